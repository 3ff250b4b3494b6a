"""One rule for a "lost" claim (``claims.verdicts.lost``): clearly held on the reference, and here judged and not
clearly holding (does not hold, or inconclusive). The ``--compare-to`` check's default policy, the job summary's lost
list and the matrix page's marks read it; before stop 60 the check and the summary compared the point sides (an
inconclusive reference "held", an inconclusive run "held" when its point did) while the page used this rule."""
import dataclasses

from test_claims_registry import FakePass, claim

from bertattn_bench.claims import registry
from bertattn_bench.claims.catalog import baseline_key, evaluate
from bertattn_bench.claims.verdicts import lost
from bertattn_bench.report.summary import job_summary, lost_claims

NAME = "test_lost_rule_metric_with_se"
if NAME not in registry.METRICS:  # the value and its standard error from the fake pass: value ± 1.96 SE
    registry.metric(NAME)(lambda pr, **kw: registry.Measurement(value=pr.result, n=pr.n_examples, n_unit="things",
                                                                standard_error=pr.se))


@dataclasses.dataclass
class SePass(FakePass):
    se: float | None = None


def entry(verdict: str) -> dict:
    return {"holds": verdict in ("holds", "inconclusive+"), "inconclusive": verdict.startswith("inconclusive"),
            "not_judged": "no" if verdict == "not judged" else None, "skipped": None}


def test_the_rule_over_every_pair_of_verdicts():
    sides = ("holds", "does not hold", "inconclusive+", "inconclusive-", "not judged")
    table = {(a, b): lost(entry(a), entry(b)) for a in sides for b in sides}
    assert {k for k, v in table.items() if v} == {("holds", "does not hold"), ("holds", "inconclusive+"),
                                                  ("holds", "inconclusive-")}
    assert not lost(entry("holds"), {"skipped": "no data", "holds": False})


def _compare(a: str, value: float, se: float | None):
    a_entry = {"measured": 2.0, "n": 100, **{k: v for k, v in entry(a).items() if v is not None}}
    base = {"results": {baseline_key("t.claim", "fake_corpus"): a_entry}, "provenance": {"model": "A"}}
    return evaluate(claim(">", 1.0, metric=NAME), SePass(value, se=se), base, mode="compare", compare_fail_on="lost")


def test_the_compare_check_fails_on_a_lost_claim_by_the_rule():
    assert not _compare("holds", 0.5, None).passed  # clearly held on A, clearly not here
    here = _compare("holds", 1.2, 0.3)  # its point holds, its interval reaches below 1 and not up to A's 2.0: lost
    assert here.inconclusive and here.holds and not here.passed and here.baseline_verdict == "holds"
    # an inconclusive A (its point held) showed nothing: a clear "does not hold" here is no loss
    there = _compare("inconclusive+", 0.5, None)
    assert there.passed and there.baseline_verdict == "inconclusive"
    assert _compare("holds", 3.0, 0.1).passed  # still clearly holds


def test_the_job_summary_lists_the_same_losses():
    def record(a: str, value: float, se: float | None) -> dict:
        return {**_compare(a, value, se).record(), "model": "B"}

    records = [record("holds", 1.2, 0.3), record("inconclusive+", 0.5, None), record("holds", 3.0, 0.1)]
    got = lost_claims(records)
    assert [(r["baseline_verdict"], r["inconclusive"]) for r in got] == [("holds", True)]
    assert "held on A (2), inconclusive here (1.2)" in job_summary(records)
    # a report written before baseline_verdict was kept: baseline_holds read as a clear side
    old = {k: v for k, v in records[0].items() if k != "baseline_verdict"}
    assert lost_claims([old]) == [old]
    assert lost_claims([{**old, "baseline_holds": False}]) == []


def test_a_row_lost_by_the_rule_whose_check_passed_broke_nothing():
    """The job summary lists what broke the build: a claim recorded as clearly holding that is inconclusive now, its
    value within the recorded tolerance (the check passes: the verdict is noise), is not listed as lost."""
    c = claim(">", 1.0, metric=NAME, tolerance=0.5)
    base = {"results": {baseline_key("t.claim", "fake_corpus"): {"measured": 1.4, "holds": True, "n": 100}}}
    out = evaluate(c, SePass(1.2, se=0.5), base)
    assert out.inconclusive and out.passed and out.baseline_verdict == "holds"
    assert lost_claims([out.record()]) == [] and lost({"holds": True}, out.record())


def test_an_inconclusive_run_whose_interval_holds_the_reference_value_is_not_lost():
    """Issue 61: two runs that differ only by the seed. A clearly held at 2.0; here 1.2 ± 1.96 x 0.5 = [0.22, 2.18]
    reaches below the threshold 1 (inconclusive) and up to A's value: the two agree within this run's noise, nothing
    was lost; the same value with a narrower interval [0.61, 1.79] that excludes 2.0 is lost, and a clear "does not
    hold" is lost whatever its interval."""
    from bertattn_bench.claims.verdicts import agrees

    agreeing = _compare("holds", 1.2, 0.5)
    assert agreeing.inconclusive and agreeing.passed
    assert agrees({"measured": 2.0}, agreeing) and not lost({"holds": True, "measured": 2.0}, agreeing)
    assert not _compare("holds", 1.2, 0.3).passed
    assert not _compare("holds", 0.5, None).passed
    assert lost({"holds": True, "measured": 2.0}, {"holds": False, "interval": [0.0, 2.5]})
    assert not agrees({"measured": None}, agreeing) and not agrees({"measured": 2.0}, {"interval": None})


def test_two_noisy_values_agree_within_their_combined_noise():
    """Stop 70: the reference's value is as noisy as this one (two seeds differ by sd x sqrt(2)): agreement is
    |a - b| <= sqrt(h_here^2 + h_ref^2), each half-width on the side facing the other value. 2.0 against 1.2 with
    this interval [0.61, 1.79] (h 0.59): lost with the reference's [1.5, 2.5] (h 0.5: sqrt(0.59^2 + 0.5^2) = 0.773 <
    0.8), agrees with [1.4, 2.6] (0.841); the same from the other side."""
    from bertattn_bench.claims.verdicts import agrees

    here = {"measured": 1.2, "interval": [0.61, 1.79], "holds": True, "inconclusive": True}
    assert not agrees({"measured": 2.0, "interval": [1.5, 2.5]}, here)
    assert agrees({"measured": 2.0, "interval": [1.4, 2.6]}, here)
    assert lost({"holds": True, "measured": 2.0, "interval": [1.5, 2.5]}, here)
    assert not lost({"holds": True, "measured": 2.0, "interval": [1.4, 2.6]}, here)
    below = {"measured": 2.8, "interval": [2.21, 3.39], "holds": True, "inconclusive": True}
    assert not agrees({"measured": 2.0, "interval": [1.5, 2.5]}, below)  # h_here 0.59 (lower), h_ref 0.5 (upper)
    assert agrees({"measured": 2.0, "interval": [1.4, 2.6]}, below)
