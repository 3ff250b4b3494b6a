"""Issue 61: a verdict that survives the seed. A value read from a trained part and measured on one seed carries the
seed's randomness in its interval, from the spread of the same value over k seeds recorded beside the baseline
(scripts/spread.py): Student's t with k - 1 degrees of freedom times the sd, added in quadrature to the data's
standard error, on each side of explicit bounds. Known answers by hand; the loader on the spread files' two shapes;
the compare between two seeds of the recorded spreads never reports a claim lost."""
import json
import math

import pytest
from test_claims_registry import FakePass, claim

from bertattn_bench.claims import registry
from bertattn_bench.claims.baselines import BASELINE_DIR, seed_spreads
from bertattn_bench.claims.catalog import baseline_key, evaluate, load_claims
from bertattn_bench.claims.stats import combined_half_width, seed_half_width
from bertattn_bench.claims.verdicts import DOES_NOT_HOLD, HOLDS, lost, verdict_of

NAME = "test_seed_interval_metric"
if NAME not in registry.METRICS:  # value, SE, bounds and seeds from the fake pass
    registry.metric(NAME)(lambda pr, **kw: registry.Measurement(
        value=pr.result, n=pr.n_examples, n_unit="things", standard_error=getattr(pr, "se", None),
        bounds=getattr(pr, "bounds", None), values={"seeds": getattr(pr, "seeds", 1)}))


T3 = seed_half_width(1.0, 3)  # t(2) at the level z = 1.96 stands for (checked above against the printed table)


class P(FakePass):
    pass


def fake(value, se=None, bounds=None, seeds=1):
    p = P(value)
    p.se, p.bounds, p.seeds = se, bounds, seeds
    return p


def spread(sd, k=3, key=baseline_key("t.claim", "fake_corpus")):
    return {key: {"sd": sd, "k": k, "seeds": list(range(k)), "values": [], "source": "spread/x.json"}}


def test_the_t_multiplier_by_hand():
    # t(0.975; 2) = 4.302653, t(0.975; 1) = 12.706205, t(0.975; 9) = 2.262157 (printed tables; z = 1.96 is the
    # 0.950004 level, which moves the fifth digit)
    assert seed_half_width(1.0, 3) == pytest.approx(4.302653, rel=1e-4)
    assert seed_half_width(2.0, 2) == pytest.approx(2 * 12.706205, rel=1e-4)
    assert seed_half_width(0.5, 10) == pytest.approx(0.5 * 2.262157, rel=1e-4)
    assert math.isnan(seed_half_width(1.0, 1)) and math.isnan(seed_half_width(float("nan"), 3))
    assert combined_half_width(3.0, 4.0) == 5.0 and combined_half_width(None, 2.0) == 2.0


def test_a_one_seed_value_with_no_other_interval_gets_the_seeds():
    c = claim(">", 1.0, metric=NAME)
    wide = evaluate(c, fake(2.0), seed_spread=spread(0.5))  # 2 ± 2.15: the threshold inside
    assert wide.interval == pytest.approx([2.0 - T3 * 0.5, 2.0 + T3 * 0.5], abs=1e-5)
    assert wide.inconclusive and "seed: sd 0.5 over 3 seeds" in wide.detail
    narrow = evaluate(c, fake(2.0), seed_spread=spread(0.1))  # 2 ± 0.43: clear
    assert not narrow.inconclusive and verdict_of(narrow) == HOLDS
    assert evaluate(c, fake(2.0), seed_spread=None).interval is None  # nothing recorded: no interval invented
    still = evaluate(c, fake(2.0), seed_spread=spread(0.0))  # no seed moved it: no width-0 interval, and it says so
    assert still.interval is None and "seed: sd 0 over 3 seeds" in still.detail \
        and "the seed does not move it" in still.detail
    assert evaluate(c, fake(2.0, se=0.2), seed_spread=spread(0.0)).interval == \
        pytest.approx([2.0 - 1.96 * 0.2, 2.0 + 1.96 * 0.2])  # a data interval stays as it is
    other = spread(0.5, key=baseline_key("t.claim", "other_corpus"))
    assert evaluate(c, fake(2.0), seed_spread=other).interval is None  # another corpus's spread is not this one's


def test_the_seed_adds_in_quadrature_to_a_standard_error_and_outside_bounds():
    c = claim(">", 1.0, metric=NAME)
    out = evaluate(c, fake(2.0, se=0.2), seed_spread=spread(0.1))
    half = math.hypot(1.96 * 0.2, T3 * 0.1)
    assert out.interval == pytest.approx([2.0 - half, 2.0 + half], abs=1e-5)
    out = evaluate(c, fake(2.0, bounds=(1.5, 2.5)), seed_spread=spread(0.1))
    assert out.interval == pytest.approx([1.5 - T3 * 0.1, 2.5 + T3 * 0.1], abs=1e-5)
    # a tier that trained several seeds: the metric's interval holds them already, nothing is added
    assert evaluate(c, fake(2.0, se=0.2, seeds=3), seed_spread=spread(0.1)).interval == \
        pytest.approx([2.0 - 1.96 * 0.2, 2.0 + 1.96 * 0.2])


def test_the_loader_reads_both_shapes_of_a_spread_file(tmp_path):
    folder = tmp_path / "spread"
    folder.mkdir()
    runs = [{"seed": 0, "omp_num_threads": 2}, {"seed": 1, "omp_num_threads": 2}, {"seed": 2, "omp_num_threads": 2},
            {"seed": 0, "omp_num_threads": 1}]
    (folder / "m-old.json").write_text(json.dumps({"runs": runs, "claims": {
        "a@c": {"values": [1.0, 2.0, 3.0, 9.0]},  # the thread-count run (9.0) is another machine, not a seed
        "b@c": {"values": [1.0, 2.0]}}}))  # not aligned with the runs: unusable
    (folder / "m-new.json").write_text(json.dumps({"runs": runs, "claims": {
        "c@c": {"seeds": [0, 1, 2, 3], "seed_values": [0.0, 0.0, 0.0, 4.0]}}}))
    got = seed_spreads("m", tmp_path)
    assert got["a@c"]["sd"] == pytest.approx(1.0) and got["a@c"]["k"] == 3 and got["a@c"]["seeds"] == [0, 1, 2]
    assert "b@c" not in got
    assert got["c@c"]["sd"] == pytest.approx(2.0) and got["c@c"]["k"] == 4
    assert seed_spreads("other", tmp_path) == {}


def _recorded_pairs():
    """(claim, key, value at seed a, value at seed b) for every recorded one-seed spread of the embedded model."""
    claims = {c.id: c for c in load_claims()}
    out = []
    for key, s in seed_spreads("all-MiniLM-L6-v2", BASELINE_DIR).items():
        c = claims.get(key.split("@")[0])
        if c is None or c.comparison == "in_band":
            continue
        for i in range(len(s["values"])):
            for j in range(len(s["values"])):
                if i != j:
                    out.append((c, key, s["values"][i], s["values"][j]))
    return out


def _as_judged(value, interval, verdict):
    """A run's row as the spread file recorded it (its value, interval and verdict, judged by that run)."""
    return {"measured": value, "interval": interval, "holds": verdict == HOLDS, "inconclusive": verdict == "inconclusive",
            "not_judged": "not judged" if verdict == "not judged" else None}


def test_two_seeds_of_the_recorded_spreads_never_report_a_claim_lost():
    """The compare (``--compare-to``'s lost rule) between every two seeds of every recorded spread: no claim clearly
    held at one seed and is lost at another, and no clear verdict flips (holds at one seed, clearly does not hold at
    another). A spread file that keeps each run's interval and verdict (scripts/spread.py since stop 70: the eight
    quick seeds, judged with the spread itself, ``--rejudge``) is compared as recorded, the data's and the seed's
    noise in each interval; an older one's values are judged with the recorded seed interval alone (a data standard
    error only widens both intervals: fewer clear verdicts, more agreement)."""
    pairs = _recorded_pairs()
    assert pairs, "no recorded seed spread of the embedded model"
    spreads = seed_spreads("all-MiniLM-L6-v2", BASELINE_DIR)
    claims = {c.id: c for c in load_claims()}
    bad, as_recorded = [], set()

    def judged(c, key, value):
        half = seed_half_width(spreads[key]["sd"], spreads[key]["k"], c.interval_z)
        interval, _ = c.interval(value, None, None, half)
        side = c.side(value, None, None, half)
        return {"measured": value, "interval": interval, "holds": c.compare(value),
                "inconclusive": side == "inconclusive"}

    def check(key, ref, here):
        if lost(ref, here) or {verdict_of(ref), verdict_of(here)} == {HOLDS, DOES_NOT_HOLD}:
            bad.append((key, ref["measured"], here["measured"], verdict_of(ref), verdict_of(here), here["interval"]))

    for path in sorted((BASELINE_DIR / "spread").glob("all-MiniLM-L6-v2-*.json")):
        for key, e in json.loads(path.read_text(encoding="utf-8"))["claims"].items():
            c = claims.get(key.split("@")[0])
            if c is None or c.comparison == "in_band" or "intervals" not in e:
                continue
            as_recorded.add(key)
            rows = [_as_judged(v, iv, vd) for v, iv, vd in zip(e["values"], e["intervals"], e["verdicts"])]
            for i, j in ((i, j) for i in range(len(rows)) for j in range(len(rows)) if i != j):
                check(key, rows[i], rows[j])
    assert len(as_recorded) >= 50  # the eight quick seeds' file
    for c, key, a, b in pairs:
        if key not in as_recorded:
            check(key, judged(c, key, a), judged(c, key, b))
    assert not bad, bad


# ---- a tier that trains k seeds: each seed's view of the result, the interval from this run's seeds ------------

from dataclasses import dataclass, field  # noqa: E402
from typing import ClassVar  # noqa: E402

import numpy as np  # noqa: E402

from bertattn_bench.claims.checks import one_seed, per_seed_values  # noqa: E402
from bertattn_bench.engine.batching import Skipped  # noqa: E402
from bertattn_bench.engine.passes import PassResult  # noqa: E402


@dataclass
class ThreeSeeds:
    seeds: tuple
    base: np.ndarray  # (S,)
    scores: dict  # seed -> score
    extra: np.ndarray | None = None  # (E,) the first E seeds only
    shared: float = 7.0  # not per seed
    meta: dict = field(default_factory=dict)
    PER_SEED: ClassVar[tuple[str, ...]] = ("base", "scores", "extra")


MEAN_NAME = "test_seed_interval_mean_base"
if MEAN_NAME not in registry.METRICS:  # the mean over the seeds the result holds, as the families' metrics are
    registry.metric(MEAN_NAME)(lambda pr, **kw: registry.Measurement(
        value=float(np.mean(pr.result.base)) + 0 * sum(pr.result.scores.values()), n=10, n_unit="things"))


def _pass(result):
    from test_claims_registry import FakePass as FP

    info = FP(0.0).model
    return PassResult("fake", "fake_corpus", "fake data", info, result, 10, Skipped(0, 0))


def test_each_seed_s_view_holds_that_seed_only():
    r = ThreeSeeds((4, 5, 6), np.array([1.0, 2.0, 6.0]), {4: "a", 5: "b", 6: "c"}, extra=np.array([9.0]))
    v = one_seed(r, 1)
    assert v.seeds == (5,) and v.base.tolist() == [2.0] and v.scores == {5: "b"} and v.shared == 7.0
    assert v.extra is None  # the second seed has no entry in a field only the first seed fills
    assert one_seed(r, 0).extra.tolist() == [9.0] and r.base.tolist() == [1.0, 2.0, 6.0]  # the result untouched


def test_a_three_seed_run_is_judged_on_its_own_seeds_spread():
    r = ThreeSeeds((0, 1, 2), np.array([1.0, 2.0, 6.0]), {0: 0, 1: 0, 2: 0})
    c = claim(">", 1.0, metric=MEAN_NAME)
    assert per_seed_values(c, _pass(r)) == [1.0, 2.0, 6.0]
    out = evaluate(c, _pass(r), seed_spread=spread(100.0))  # the run's own seeds win over a recorded spread
    sd = float(np.std([1.0, 2.0, 6.0], ddof=1))  # 2.6458
    half = T3 * sd / math.sqrt(3)  # the mean of three: 4.3027 x 2.6458 / 1.7321 = 6.572
    assert half == pytest.approx(6.572, abs=1e-3)
    assert out.interval == pytest.approx([3.0 - half, 3.0 + half], abs=1e-6) and out.inconclusive
    assert out.values["per_seed"] == [1.0, 2.0, 6.0] and "over this run's 3 seeds" in out.detail
    tight = ThreeSeeds((0, 1, 2), np.array([2.9, 3.0, 3.1]), {0: 0, 1: 0, 2: 0})
    clear = evaluate(c, _pass(tight))  # 3 ± 0.25: holds
    assert verdict_of(clear) == HOLDS and clear.interval == pytest.approx([3 - T3 * 0.1 / math.sqrt(3),
                                                                           3 + T3 * 0.1 / math.sqrt(3)], abs=1e-6)
    one = ThreeSeeds((0,), np.array([3.0]), {0: 0})  # one seed: no run spread; the recorded one applies
    assert per_seed_values(c, _pass(one)) is None
    assert evaluate(c, _pass(one), seed_spread=spread(0.5)).interval == pytest.approx([3 - T3 * 0.5, 3 + T3 * 0.5],
                                                                                       abs=1e-5)
