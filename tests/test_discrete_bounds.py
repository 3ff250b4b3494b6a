"""Issue 61: counts, ranks and depths get bounds. A discrete surface value (the depth of a peak layer, the share of
heads in a band) carries the 95% percentile bounds of its bootstrap over the segments, and an ``in_band`` claim is
inconclusive exactly when those bounds reach both into and out of its depth band. Known answers on planted
per-segment statistics and by hand."""
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from test_claims_registry import claim

from bertattn_bench.claims.stats import bootstrap_bounds
from bertattn_bench.families.common.surface_stats import SurfaceResult
from bertattn_bench.families.surface import peak_layer_depth


def test_bootstrap_bounds_by_hand():
    # a constant statistic: no resample moves it
    assert bootstrap_bounds(lambda idx: 3.0, 10)[:2] == (3.0, 3.0)
    # the mean of two units 0 and 1: resample means 0, 0.5, 1 with probabilities 1/4, 1/2, 1/4: the central 95% is
    # [0, 1]; with level 0.4 it is [0.5, 0.5]
    x = np.array([0.0, 1.0])
    lo, hi, kept = bootstrap_bounds(lambda idx: x[idx].mean(), 2, samples=2000)
    assert (lo, hi, kept) == (0.0, 1.0, 2000)
    assert bootstrap_bounds(lambda idx: x[idx].mean(), 2, samples=2000, level=0.4)[:2] == (0.5, 0.5)
    # every resample refused: no bounds
    lo, hi, kept = bootstrap_bounds(lambda idx: float("nan"), 5)
    assert np.isnan(lo) and np.isnan(hi) and kept == 0


def _surface(to_sep: np.ndarray) -> SimpleNamespace:
    """A pass whose per-segment attention to [SEP] is ``to_sep`` (segments x layers, one head); other fields 0."""
    seg = torch.tensor(to_sep, dtype=torch.float32)[:, :, None]
    per = {"to_sep": seg, "entropy": torch.zeros_like(seg)}
    res = SurfaceResult(stats={k: v.mean(0) for k, v in per.items()}, n_segments=seg.shape[0], n_tokens=100,
                        sep_chance=0.1, per_segment=per, sep_chance_per_segment=torch.full((seg.shape[0],), 0.1))
    return SimpleNamespace(result=res)


def test_a_peak_that_every_segment_agrees_on_is_exact_and_one_that_moves_gets_bounds():
    steady = np.tile([0.1, 0.9, 0.1], (20, 1))  # 3 layers, the middle one peaks in every segment: depth 2/3
    m = peak_layer_depth(_surface(steady), stat="to_sep")
    assert m.value == pytest.approx(2 / 3) and m.bounds == pytest.approx((2 / 3, 2 / 3))
    c = claim("in_band", "middle")
    assert c.side(m.value, None, m.bounds) == "holds"
    # half the segments peak in layer 2 (middle), half in layer 3 (late), by about as much: the peak moves
    moving = np.array([[0.1, 0.9, 0.1]] * 10 + [[0.1, 0.1, 0.95]] * 10)
    m = peak_layer_depth(_surface(moving), stat="to_sep")
    assert m.bounds[0] == pytest.approx(2 / 3) and m.bounds[1] == pytest.approx(1.0)
    assert c.side(m.value, None, m.bounds) == "inconclusive"
    assert claim("in_band", "early").side(m.value, None, m.bounds) == "does not hold"  # no resample is early


@pytest.mark.parametrize("band, bounds, inside", [
    ("middle", (0.5, 0.6), False),        # wholly inside (1/3, 2/3]
    ("middle", (2 / 3, 2 / 3 + 1e-12), False),  # width ~0 at the upper edge (which belongs to the band)
    ("middle", (0.5, 0.8), True),         # reaches above 2/3
    ("middle", (1 / 3, 0.5), True),       # 1/3 itself is outside (the band is open below)
    ("middle", (0.7, 0.9), False),        # wholly outside
    ("last", (5 / 6, 1.0), True),
    ("last", (1.0, 1.0), False),
    ("early", (0.0, 1 / 3), True),        # depth 0 ("no clear peak") is outside (0, 1/3]: [0, 1/3] holds both
    ("early", (0.1, 1 / 3), False),
])
def test_in_band_inconclusive_by_hand(band, bounds, inside):
    assert claim("in_band", band).threshold_inside(list(bounds)) == inside


def _readings(alpha_sep: np.ndarray, norm_sep: np.ndarray) -> SimpleNamespace:
    """A norms pass whose per-segment [SEP] shares by alpha and by ||alpha f|| are given (segments x layers)."""
    def reading(x):
        seg = torch.tensor(x, dtype=torch.float32)[:, :, None]
        per = {"to_sep": seg, "entropy": torch.zeros_like(seg)}
        return SurfaceResult(stats={k: v.mean(0) for k, v in per.items()}, n_segments=seg.shape[0], n_tokens=100,
                             sep_chance=0.1, per_segment=per, sep_chance_per_segment=torch.full((seg.shape[0],), 0.1))

    from bertattn_bench.families.norms import NormsResult

    # the readings alone (no ||f(x)|| sums): resampled by the family's own NormsResult.resample
    res = SimpleNamespace(readings={"weights": reading(alpha_sep), "norms": reading(norm_sep)},
                          n_segments=alpha_sep.shape[0], fx_per_segment=None)
    res.resample = lambda idx: NormsResult.resample(res, idx)
    return SimpleNamespace(result=res)


def test_the_norm_discount_carries_the_bootstrap_bounds_of_its_minimum():
    """kob.sep_discounted: the smallest 1 - norm/alpha share over the layers where alpha gives [SEP] >= 0.3. Every
    segment alike: the bounds have width 0 at the value; half the segments discounting less: bounds around it."""
    from bertattn_bench.families.norms import norm_discount

    alpha = np.tile([0.1, 0.6, 0.5], (20, 1))
    steady = norm_discount(_readings(alpha, alpha * np.array([1, 0.2, 0.5])), category="sep")
    assert steady.value == pytest.approx(0.5) and steady.bounds == pytest.approx((0.5, 0.5))
    norm = np.array([[0.1, 0.12, 0.25]] * 10 + [[0.1, 0.12, 0.45]] * 10)  # layer 3: discount 0.5 or 0.1
    moving = norm_discount(_readings(alpha, norm), category="sep")
    assert moving.value == pytest.approx(1 - 0.35 / 0.5)
    lo, hi = moving.bounds
    assert 0.1 < lo < moving.value < hi < 0.5 and "bootstrap over the 20 segments" in moving.detail


def test_a_pattern_share_carries_the_bootstrap_bounds_over_the_examples():
    """kov.vertical_third / kov.heterogeneous_share: a share of the maps, over a sample of dev examples, with the 95%
    percentile bounds of its bootstrap over the examples (each example's type counts kept by the reducer)."""
    from bertattn_bench.claims.registry import Measurement
    from bertattn_bench.families.patterns.constants import TYPES
    from bertattn_bench.families.patterns.metrics import _with_bounds
    from bertattn_bench.families.patterns.reduce import PatternStats

    v = TYPES.index("vertical")

    def stats(rows):
        counts = np.array(rows, dtype=float)
        z = np.zeros((1, 1, 3))
        return PatternStats(counts=counts.sum(0)[None, None, :], features=z, special=z, n_special=np.zeros(3),
                            to_special=z, cls_row=np.zeros((1, 1, 4)), n_examples=len(rows), example_counts=counts)

    share = lambda st: float(st.shares()[v])  # noqa: E731
    alike = stats([[2 if i == v else 1 for i in range(len(TYPES))]] * 30)  # every example: 2 of 6 maps vertical
    m = _with_bounds(Measurement(share(alike), 180, "maps"), alike, share)
    assert m.value == pytest.approx(1 / 3) and m.bounds == pytest.approx((1 / 3, 1 / 3))
    other = TYPES.index("heterogeneous")
    half = stats([[6 if i == v else 0 for i in range(len(TYPES))]] * 15     # all six maps vertical
                 + [[6 if i == other else 0 for i in range(len(TYPES))]] * 15)  # none
    m = _with_bounds(Measurement(share(half), 180, "maps"), half, share)
    assert m.value == pytest.approx(0.5)
    lo, hi = m.bounds
    assert 0.25 < lo < 0.5 < hi < 0.75 and "bootstrap over the 30 examples" in m.detail
    assert claim(">=", 0.45).side(m.value, None, m.bounds) == "inconclusive"  # 0.45 inside the bounds
    assert claim(">=", 0.2).side(m.value, None, m.bounds) == "holds"


def test_the_ignore_special_tokens_share_has_bounds_from_the_changed_arcs():
    """Allowing [CLS]/[SEP] only turns arcs wrong: a head's changed arcs are k = correct without - correct with. On
    100 arcs and max_change 2: k = 0 is surely within (Wilson upper 3.70 > 2? no: 3.70 > 2 makes it undecided), so
    by hand: k = 0 -> [0, 3.70] undecided; k = 30 -> [21.9, 39.6] surely out. Two heads of four changed by 0, two by
    30: share 0.5 (the value), bounds [0, 0.5] (the unchanged ones undecided at 100 arcs)."""
    from bertattn_bench.claims.stats import wilson_bounds
    from bertattn_bench.families.common.dependency_stats import DependencyResult
    from bertattn_bench.families.dependency import ignore_special_tokens

    lo0, hi0 = wilson_bounds(0, 100)
    lo30, hi30 = wilson_bounds(30, 100)
    assert hi0 == pytest.approx(3.70, abs=0.01) and lo30 == pytest.approx(21.9, abs=0.1)
    correct = torch.zeros(1, 2, 1, 4)
    correct[0, 0, 0] = torch.tensor([50.0, 50.0, 50.0, 50.0])
    res = DependencyResult(("All",), correct, torch.tensor([100]), {}, 10, 100, 0,
                           all_correct_with_special=torch.tensor([[50.0, 50.0, 20.0, 20.0]]))
    m = ignore_special_tokens(SimpleNamespace(result=res), max_change=2.0)
    assert m.value == 0.5 and m.bounds == (0.0, 0.5)
    # on 10,000 arcs the unchanged heads are surely within (upper bound 0.04 points): bounds [0.5, 0.5]
    res.n_arcs = torch.tensor([10000])
    res.correct *= 100
    res.all_correct_with_special = res.all_correct_with_special * 100
    m = ignore_special_tokens(SimpleNamespace(result=res), max_change=2.0)
    assert m.bounds == (0.5, 0.5)
    # more correct with the specials than without (impossible by construction): no bounds rather than wrong ones
    res.all_correct_with_special[0, 0] = res.correct[0, 0, 0, 0] + 1
    assert ignore_special_tokens(SimpleNamespace(result=res), max_change=2.0).bounds is None
