"""Issue 36, audit items 2, 6 and 7a (the Kovaleva disable family), on planted sweeps: each test plants a sweep on
which the old definition gave the wrong verdict and checks the new one gives the right one.

* item 2 (``kov.disable_head_gain_every_task``, ``kov.disable_layer_gain``): a gain is judged within the model, by
  the exact paired bounds on the flipped dev examples (Bonferroni over the configurations), not against the seed sd
  of the fine-tuned score;
* item 6 (``kov.disable_head_gain_range``): the range is judged on [best lower bound, best upper bound], so the best
  of 72 noisy deltas is not "in range";
* item 7a (``kov.sts_rte_shared_heads``): heads harmful on every task (a control task's top-5) do not count as
  STS-B and RTE sharing heads.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from test_claims_registry import FakePass

from bertattn_bench.claims.catalog import evaluate, load_claims
from bertattn_bench.claims.registry import NotApplicable
from bertattn_bench.claims.stats import binomial_above_p, paired_gain_bounds, sign_test_p
from bertattn_bench.families.disable import (
    DisableResult,
    disable_best_gain,
    disable_best_head_margin,
    disable_shared_harmful_heads,
)

N, L, H = 408, 6, 12  # MRPC's dev set, MiniLM's shape
CLAIMS = {c.id: c for c in load_claims(family="disable")}


def _sweep(gained, lost, layer_gained=None, layer_lost=None, n=N, task="mrpc", base=80.0) -> DisableResult:
    """A DisableResult from per-seed flips: ``gained``/``lost`` of shape (S, L, H) (or (L, H): one seed); layers
    default to no flips. Δ and the McNemar p follow from the flips, as in ``score_configs``."""
    g, l_ = np.asarray(gained, int), np.asarray(lost, int)
    if g.ndim == 2:
        g, l_ = g[None], l_[None]
    S = g.shape[0]
    lg = np.zeros((S, L), int) if layer_gained is None else np.asarray(layer_gained, int).reshape(S, L)
    ll = np.zeros((S, L), int) if layer_lost is None else np.asarray(layer_lost, int).reshape(S, L)
    p = np.vectorize(lambda a, b: sign_test_p(a, b))
    return DisableResult(
        task=task, metric="acc", n_dev=n, n_layers=L, n_heads=H, seeds=tuple(range(S)), tier="regression",
        base=np.full(S, base), head_delta=100.0 * (g - l_) / n, layer_delta=100.0 * (lg - ll) / n,
        head_p=p(g, l_).astype(float), layer_p=p(lg, ll).astype(float),
        head_flips=np.stack([l_, g], -1), layer_flips=np.stack([ll, lg], -1), step=100.0 / n)


def _verdict(claim_id: str, r: DisableResult) -> str:
    """The claims layer's verdict on a planted sweep ('holds', 'does not hold', '... (inconclusive ...)')."""
    out = evaluate(CLAIMS[claim_id], FakePass(r, n_examples=r.n_dev, corpus=r.task))
    return out.verdict


def _side(claim_id: str, r: DisableResult) -> str:
    v = _verdict(claim_id, r)
    return "inconclusive" if "inconclusive" in v else v


def _old_margin(r: DisableResult, what: str = "head", seed_sd: float = 2.25) -> float:
    """The definition before issue 36 (one seed, MRPC): best gain minus max(one example's step, the seed sd recorded
    for MRPC, 2.25); no standard error, so its sign was the verdict."""
    d = r.head_delta if what == "head" else r.layer_delta
    return float(np.mean([x.max() for x in d])) - max(r.step, seed_sd)


def _losing_background(rng, shape=(L, H)):
    """Heads that change a few examples, mostly for the worse (Fig. 8's typical head)."""
    g = rng.integers(0, 3, shape)
    return g, g + rng.integers(1, 6, shape)


# ---- item 2 ------------------------------------------------------------------------------------------------------

def test_a_copy_of_fig8_is_inconclusive_not_a_failure():
    """Fig. 8's MRPC gain, +1.2 points = 5 net examples of 408 (7 gained, 2 lost): the old bar (the seed sd 2.25)
    read 'does not hold'; a 5-net gain among 72 heads is not significant, nor is a gain ruled out: inconclusive."""
    g, l_ = _losing_background(np.random.default_rng(0))
    g[3, 3], l_[3, 3] = 7, 2
    r = _sweep(g, l_)
    assert r.head_delta.max() == pytest.approx(500 / 408)
    assert _old_margin(r) < 0  # old: "does not hold" (no SE: a clear verdict)
    assert _side("kov.disable_head_gain_every_task", r) == "inconclusive"
    m = disable_best_head_margin(SimpleNamespace(result=r))
    assert m.values["lower"] < 0 < m.values["upper_minus_margin"]
    assert "4-4 +1.23 (-2/+7" in m.detail


def test_a_clear_gain_holds_and_old_bar_missed_it():
    """+25 net examples (27 gained, 2 lost: +6.1 points; exact one-sided p ~ 4e-7, x72 still tiny) holds. A gain of
    +2.21 (9 gained, 0 lost; p = 0.002, x72 = 0.14) was a clear 'does not hold' for the old bar (2.25) and is
    inconclusive now; on a dev set of SST-2's size (872) 12 gained, 0 lost (+1.38 points, p 2.4e-4 x72 = 0.018) is
    a significant gain the old bar called no gain: holds."""
    g, l_ = _losing_background(np.random.default_rng(1))
    g[1, 2], l_[1, 2] = 27, 2
    assert _verdict("kov.disable_head_gain_every_task", _sweep(g, l_)) == "holds"
    g[1, 2], l_[1, 2] = 9, 0
    r = _sweep(g, l_)
    assert _old_margin(r) < 0 and _side("kov.disable_head_gain_every_task", r) == "inconclusive"
    g[1, 2] = 12
    r = _sweep(g, l_, n=872)
    assert _old_margin(r) < 0 and _verdict("kov.disable_head_gain_every_task", r) == "holds"


def test_every_head_only_loses_does_not_hold():
    """Every head loses 10-40 examples and gains none: every upper bound is below the 0.1-point margin, a clear
    'does not hold' (the equivalence side); the old definition said the same, but for the wrong reason (a bar)."""
    rng = np.random.default_rng(2)
    r = _sweep(np.zeros((L, H), int), rng.integers(10, 41, (L, H)))
    assert _verdict("kov.disable_head_gain_every_task", r) == "does not hold"
    # heads whose disabling changes nothing (the random-init twin, a majority-class predictor): exactly no gain
    flat = _sweep(np.zeros((L, H), int), np.zeros((L, H), int))
    assert _verdict("kov.disable_head_gain_every_task", flat) == "does not hold"
    # one head that gains one example and loses none is not ruled out: inconclusive
    g = np.zeros((L, H), int)
    g[0, 0] = 1
    lost = rng.integers(10, 41, (L, H))
    lost[0, 0] = 0
    assert _side("kov.disable_head_gain_every_task", _sweep(g, lost)) == "inconclusive"


def test_seeds_combine_as_every_seed():
    """Several seeds: holds when every seed's best gain is significant; a seed with only a Fig.-8-sized gain makes
    it inconclusive; every seed losing everywhere does not hold."""
    rng = np.random.default_rng(3)
    g0, l0 = _losing_background(rng)
    g1, l1 = _losing_background(rng)
    g0[2, 5], l0[2, 5] = 27, 2
    g1[4, 1], l1[4, 1] = 30, 1
    assert _verdict("kov.disable_head_gain_every_task", _sweep([g0, g1], [l0, l1])) == "holds"
    g1[4, 1], l1[4, 1] = 7, 2
    assert _side("kov.disable_head_gain_every_task", _sweep([g0, g1], [l0, l1])) == "inconclusive"
    z = np.zeros((2, L, H), int)
    assert _verdict("kov.disable_head_gain_every_task", _sweep(z, z + 12)) == "does not hold"


def test_layer_gain_uses_the_paired_test_over_layers():
    """kov.disable_layer_gain: Bonferroni over the 6 layers. RTE's +3.2 (Fig. 9) on 277 pairs is 9 net examples:
    10 gained, 1 lost is not significant after x6 (one-sided p 0.0059 x 6 = 0.035 > 0.025): inconclusive, where
    the old bar (seed sd 1.33 on RTE) said 'holds'; 11 gained, 1 lost (p 0.0032 x 6 = 0.019) holds. A Fig.-8-sized
    layer gain on MRPC (7 gained, 2 lost) is inconclusive where the old bar (2.25) said no."""
    z = np.zeros((L, H), int)
    lg, ll = np.zeros(L, int), np.full(L, 30)
    lg[0], ll[0] = 10, 1
    r = _sweep(z, z, lg, ll, n=277, task="rte", base=55.0)
    assert _old_margin(r, "layer", seed_sd=1.33) > 0 and _side("kov.disable_layer_gain", r) == "inconclusive"
    lg[0] = 11
    r = _sweep(z, z, lg, ll, n=277, task="rte", base=55.0)
    assert _verdict("kov.disable_layer_gain", r) == "holds"
    lg[0], ll[0] = 7, 2
    r = _sweep(z, z, lg, ll)
    assert _old_margin(r, "layer") < 0 and _side("kov.disable_layer_gain", r) == "inconclusive"
    assert _verdict("kov.disable_layer_gain", _sweep(z, z, np.zeros(L), np.full(L, 40))) == "does not hold"


def test_a_regression_sweep_stored_without_its_pairing_is_not_judged():
    r = _sweep(np.zeros((L, H), int), np.zeros((L, H), int), task="sts-b")
    for fn in (disable_best_head_margin, disable_best_gain):
        with pytest.raises(NotApplicable, match="predates the correlation with the undisabled"):
            fn(SimpleNamespace(result=r))


def _sts_sweep(head_noise: dict, n: int = 1500, layer_noise: dict | None = None, seed: int = 0) -> DisableResult:
    """A planted STS-B sweep built the way ``DisablePass.measure`` builds it (``score_configs`` and ``with_base`` on
    per-configuration predictions): gold scores y, the undisabled model's predictions y + e (Pearson ~0.8); a head
    (layer) named in ``head_noise`` (``layer_noise``) predicts y + k e + 0.1 f instead (k < 1: better; f fresh noise),
    every other head y + e + 0.005 f (a head that barely matters)."""
    from bertattn_bench.data import glue
    from bertattn_bench.families.disable import configurations, score_configs, with_base

    rng = np.random.default_rng(seed)
    t = glue.task("sts-b")
    y = rng.normal(size=n)
    e = 0.75 * rng.normal(size=n)
    configs, names = configurations(L, H)
    preds = []
    for name in names:
        k = head_noise.get(name, (layer_noise or {}).get(name))
        preds.append(y + e if name == "none" else y + k * e + 0.1 * rng.normal(size=n) if k is not None
                     else y + e + 0.005 * rng.normal(size=n))
    logits = np.stack(preds)
    scores, p, flips = score_configs(t, logits, y)
    paired = with_base(t, logits)
    d = scores - scores[0]
    return DisableResult(
        task="sts-b", metric="pearson", n_dev=n, n_layers=L, n_heads=H, seeds=(0,), tier="full",
        base=np.array([scores[0]]), head_delta=d[1:1 + L * H].reshape(1, L, H), layer_delta=d[1 + L * H:][None],
        head_p=p[1:1 + L * H].reshape(1, L, H), layer_p=p[1 + L * H:][None],
        head_flips=flips[1:1 + L * H].reshape(1, L, H, 2), layer_flips=flips[1 + L * H:][None], step=float("nan"),
        head_with_base=paired[1:1 + L * H].reshape(1, L, H), layer_with_base=paired[1 + L * H:][None])


def test_sts_b_gains_are_judged_on_the_same_examples():
    """STS-B (Pearson) was 'not judged' (no flips); now the gain in r is bounded on the same dev examples: a head whose
    disabling cuts the prediction noise by a fifth holds, a sweep of heads that barely matter rules out any gain of
    0.1 points (does not hold), a smaller real gain on fewer examples cannot be told (inconclusive)."""
    r = _sts_sweep({"3-4": 0.8})
    assert r.head_delta[0, 2, 3] == r.head_delta.max() > 1.0  # about +1.8 points of Pearson
    assert _verdict("kov.disable_head_gain_every_task", r) == "holds"
    quiet = _sts_sweep({})
    assert np.abs(quiet.head_delta).max() < 0.1
    assert _verdict("kov.disable_head_gain_every_task", quiet) == "does not hold"
    small = _sts_sweep({"3-4": 0.97}, n=150)
    assert 0 < small.head_delta[0, 2, 3]
    assert _side("kov.disable_head_gain_every_task", small) == "inconclusive"
    # the layer claim reads the layer configurations the same way
    assert _verdict("kov.disable_layer_gain", _sts_sweep({}, layer_noise={"L2": 0.8})) == "holds"
    # the pairing is what decides: the same Δ with the pairing ignored (r with the base 0) is not significant
    unpaired = _sts_sweep({"3-4": 0.97})
    assert _verdict("kov.disable_head_gain_every_task", unpaired) == "holds"
    unpaired.head_with_base = np.zeros_like(unpaired.head_with_base)
    assert _side("kov.disable_head_gain_every_task", unpaired) == "inconclusive"


def test_paired_gain_bounds_match_the_exact_sign_test():
    """The lower bound is > 0 exactly when the one-sided exact sign test rejects at its level; d = 0 is [0, 0]."""
    for g in range(16):
        for l_ in range(8):
            lo, hi = paired_gain_bounds(g, l_, 100, 0.01, 0.01)
            assert (lo > 0) == (g + l_ > 0 and binomial_above_p(g, g + l_, 0.5) < 0.01)
            assert lo <= 100 * (g - l_) / 100 <= hi
    assert paired_gain_bounds(0, 0, 408, 0.05, 0.05) == (0.0, 0.0)
    lo, hi = paired_gain_bounds(1, 0, 100, 0.05, 0.05)  # one gained: Clopper-Pearson pi in [0.05, 1]
    assert lo == pytest.approx(-0.9) and hi == pytest.approx(1.0)


# ---- item 6 ------------------------------------------------------------------------------------------------------

def test_best_of_72_noisy_deltas_is_not_in_range():
    """72 heads that each flip 12 examples at random (no head matters): the best raw Δ lands in [0.1, 2.2] (the old
    raw maximum 'held'), the new interval contains 0.1: inconclusive."""
    rng = np.random.default_rng(4)
    g = rng.binomial(12, 0.5, (L, H))
    r = _sweep(g, 12 - g)
    best = float(r.head_delta.max())
    assert CLAIMS["kov.disable_head_gain_range"].compare(best)  # old: "holds"
    assert _side("kov.disable_head_gain_range", r) == "inconclusive"
    m = disable_best_gain(SimpleNamespace(result=r))
    assert m.values["lower"] < 0.1 < m.values["upper"]
    assert m.values["best_gain"] == pytest.approx(best)


def test_range_can_hold_and_fail_for_the_right_reason():
    """On a large dev set (10,000 examples) a best gain of 1.0 points (150 gained, 50 lost) is significant and
    bounded: holds; 4.0 points (450/50) is significantly above 2.2: does not hold; the twin (nothing changes) does
    not hold. On 408 pairs even 13 gained, 0 lost (+3.2, significant) cannot hold: its upper bound is above 2.2."""
    z = np.zeros((L, H), int)
    g, l_ = z.copy(), z + 40
    g[2, 2], l_[2, 2] = 150, 50
    assert _verdict("kov.disable_head_gain_range", _sweep(g, l_, n=10_000)) == "holds"
    g[2, 2], l_[2, 2] = 450, 50
    assert _verdict("kov.disable_head_gain_range", _sweep(g, l_, n=10_000)) == "does not hold"
    assert _verdict("kov.disable_head_gain_range", _sweep(z, z)) == "does not hold"
    g, l_ = z.copy(), z + 5
    g[0, 1], l_[0, 1] = 13, 0
    assert _side("kov.disable_head_gain_range", _sweep(g, l_)) == "inconclusive"


# ---- item 7a -----------------------------------------------------------------------------------------------------

def _harm(heads: list[tuple[int, int]], task: str, seeds: int = 1, rng_seed: int = 0) -> SimpleNamespace:
    """A task whose most harmful heads are ``heads`` (Δ -20 .. -10), the rest small noise."""
    rng = np.random.default_rng(rng_seed)
    d = rng.uniform(-1.0, 0.5, (seeds, L, H))
    for k, (layer, head) in enumerate(heads):
        d[:, layer, head] = -20.0 + 2 * k
    z = np.zeros((seeds, L, H))
    return SimpleNamespace(result=DisableResult(
        task=task, metric="acc", n_dev=N, n_layers=L, n_heads=H, seeds=tuple(range(seeds)), tier="full",
        base=np.full(seeds, 80.0), head_delta=d, layer_delta=np.zeros((seeds, L)), head_p=z + 1,
        layer_p=np.ones((seeds, L)), head_flips=np.zeros((seeds, L, H, 2), int),
        layer_flips=np.zeros((seeds, L, 2), int), step=100 / N))


CRITICAL = [(0, 0), (1, 3), (2, 5), (3, 7), (4, 9)]
OWN = [(0, 2), (1, 11), (3, 0), (5, 5), (2, 8)]


def _old_shared(a, b, top=5) -> int:
    """The definition before issue 36: |top-5(a) ∩ top-5(b)|, no control."""
    def harmful(r):
        return set(np.argsort(r.head_delta.mean(0).reshape(-1), kind="stable")[:top])
    return len(harmful(a.result) & harmful(b.result))


def test_generally_critical_heads_are_no_shared_reliance():
    """STS-B, RTE and the controls all hurt most without the same 5 (generally critical) heads: the old count (5
    shared >= 1) held; with the control it is 5 - 5 = 0: does not hold."""
    sts, rte = _harm(CRITICAL, "sts-b", 1, 0), _harm(CRITICAL, "rte", 3, 1)
    ctrl = [_harm(CRITICAL, "mrpc", 3, 2), _harm(CRITICAL, "sst-2", 1, 3)]
    assert _old_shared(sts, rte) == 5
    m = disable_shared_harmful_heads(sts, passes=[rte, *ctrl])
    assert m.value == 0 and not CLAIMS["kov.sts_rte_shared_heads"].compare(m.value)
    assert m.values["shared"] == 5 and m.values["specific"] == []


def test_heads_shared_by_sts_and_rte_alone_hold():
    """STS-B and RTE share 3 heads the controls do not need (the controls' top 5 are the critical heads, which the
    two tasks share 2 of): 5 shared - 2 with a control = 3 >= 1: holds."""
    sts = _harm(OWN[:3] + CRITICAL[:2], "sts-b", 1, 0)
    rte = _harm(OWN[:3] + CRITICAL[:2], "rte", 3, 1)
    ctrl = [_harm(CRITICAL, "mrpc", 3, 2), _harm(CRITICAL, "sst-2", 1, 3)]
    m = disable_shared_harmful_heads(sts, passes=[rte, *ctrl])
    assert m.value == 3 and CLAIMS["kov.sts_rte_shared_heads"].compare(m.value)
    assert sorted(m.values["specific"]) == ["1-3", "2-12", "4-1"]
    # a control that needs 3 of the pair's heads too lowers it to 5 - 3 = 2
    mrpc_like = _harm(OWN[:3] + CRITICAL[2:4], "mrpc", 3, 2)
    m = disable_shared_harmful_heads(sts, passes=[rte, mrpc_like])
    assert m.value == 5 - 3 and m.values["control_overlaps"]["sts-b&mrpc"] == 3


def test_shared_heads_need_a_control():
    sts, rte = _harm(CRITICAL, "sts-b"), _harm(CRITICAL, "rte")
    with pytest.raises(NotApplicable, match="control"):
        disable_shared_harmful_heads(sts, passes=[rte])
    assert CLAIMS["kov.sts_rte_shared_heads"].inputs == [{"corpus": "rte"}, {"corpus": "mrpc"}, {"corpus": "sst-2"}]
