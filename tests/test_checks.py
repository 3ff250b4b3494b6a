"""Issue 62: a claim's check in three named steps (claims/checks.py), each with its own known answers: measure
(value, n, or why skipped), judge (side, interval, inconclusive), and the check policies the runner chooses (own
baseline, compare-to, record, negative control, none), with ``passed`` decided by ``check`` alone."""
import pytest
from test_claims_registry import NA_METRIC, FakePass, baseline, claim

from bertattn_bench.claims.checks import (
    CompareTo,
    NegativeControl,
    NoBaseline,
    OwnBaseline,
    Record,
    check,
    judge,
    measure,
    policy_for,
)


def judged(c, value, **kw):
    pr = FakePass(value, **kw)
    m = measure(c, pr)
    return judge(c, pr, m) if m.m is not None else m.outcome


def test_measure_gives_the_value_or_why_it_was_skipped():
    m = measure(claim(">", 1.0), FakePass(2.0, n_examples=40))
    assert (m.outcome.measured, m.outcome.n, m.outcome.unit, m.outcome.holds) == (2.0, 40, "u", None)
    skipped = measure(claim(">", 1.0, metric=NA_METRIC), FakePass(2.0))
    assert skipped.m is None and skipped.outcome.skipped == "nothing to measure here"
    short = measure(claim(">", 1.0, requires={"min_layers": 12}), FakePass(2.0))
    assert "needs 12 layers" in short.outcome.skipped


def test_a_pass_that_measured_nothing_is_skipped_by_the_caller_before_any_metric():
    """Issue 62: "nothing to measure" is decided once, where the metrics are called: the pass's reason becomes the
    claim's, and the metric (which would fail on the reason-only result) is never called; so for a further pass a
    claim reads."""
    from bertattn_bench.claims.registry import NothingToMeasure

    c = claim(">", 1.0, metric=NA_METRIC)  # a metric that would say something else
    out = measure(c, FakePass(NothingToMeasure("no masked-LM head here"))).outcome
    assert out.skipped == "no masked-LM head here" and out.measured is None
    two = claim(">", 1.0, inputs=("other",))
    other = FakePass(NothingToMeasure("the other task was not fine-tuned"))
    out = measure(two, FakePass(2.0), others=lambda cl: [other]).outcome
    assert out.skipped == "the other task was not fine-tuned"


def test_judge_gives_the_side():
    assert judged(claim(">", 1.0), 2.0).holds is True
    assert judged(claim(">", 1.0), 0.5).holds is False
    assert judged(claim("between", [0, 1]), 0.5).interval is None  # no SE, no bounds, no seed: no interval


@pytest.mark.parametrize("value, expect", [(2.0, True), (0.5, False)])
def test_no_baseline_is_the_papers_verdict(value, expect):
    c = claim(">", 1.0)
    assert check(NoBaseline(), c, judged(c, value)).passed is expect


def test_record_passes_and_a_skipped_claim_passes_nothing():
    c = claim(">", 1.0)
    assert check(Record(), c, judged(c, 0.5)).passed is True
    skipped = judged(claim(">", 1.0, metric=NA_METRIC), 0.5)
    assert check(Record(), c, skipped).passed is None and check(NoBaseline(), c, skipped).passed is None


def test_the_negative_control_fails_only_a_clear_hold():
    c = claim(">", 1.0)
    out = check(NegativeControl(), c, judged(c, 2.0))
    assert out.passed is False and out.comparison.startswith("NOT > 1.0")
    assert check(NegativeControl(), c, judged(c, 0.5)).passed is True


def test_own_baseline_value_verdict_and_n():
    c = claim(">", 1.0, tolerance=0.5)
    assert check(OwnBaseline(baseline(2.2, True)), c, judged(c, 2.0)).passed is True
    off = check(OwnBaseline(baseline(3.0, True)), c, judged(c, 2.0))
    assert off.passed is False and "value off by -1" in off.check_failure
    other_n = check(OwnBaseline(baseline(2.0, True, n=50)), c, judged(c, 2.0))
    assert other_n.passed is False and "n 100 where the baseline has 50" in other_n.check_failure
    # a --limit sample of another n: reported, not checked
    assert check(OwnBaseline(baseline(9.0, True, n=50), limit=50), c, judged(c, 2.0)).passed is True
    # no entry for this claim: the paper's verdict
    assert check(OwnBaseline(baseline(2.0, True, claim_id="other")), c, judged(c, 0.5)).passed is False


def test_own_baseline_of_a_timing_on_another_device_is_not_checked():
    c = claim(">", 0.0, per_device=True, tolerance=1.0)
    doc = baseline(50.0, True)
    doc["provenance"] = {"device": "cuda"}
    out = check(OwnBaseline(doc), c, judged(c, 5.0), device="cpu")
    assert out.passed is True and "recorded on cuda, measured here on cpu" in out.detail
    assert check(OwnBaseline(doc), c, judged(c, 5.0), device="cuda:0").passed is False  # same kind: checked


def test_compare_to_by_policy():
    c = claim(">", 1.0)
    a = baseline(2.0, True)
    assert check(CompareTo(a), c, judged(c, 0.5)).passed is False  # clearly held on A, clearly not here: lost
    assert check(CompareTo(a, fail_on="never"), c, judged(c, 0.5)).passed is True
    assert check(CompareTo(a), c, judged(c, 3.0)).passed is True
    assert check(CompareTo(baseline(2.0, True, claim_id="x")), c, judged(c, 0.5)).passed is True  # nothing to lose


def test_policy_for_each_mode():
    assert isinstance(policy_for("own", None), NoBaseline) and isinstance(policy_for("own", {"results": {}}),
                                                                          OwnBaseline)
    assert isinstance(policy_for("compare", {}), CompareTo) and isinstance(policy_for("record", None), Record)
    assert isinstance(policy_for("negative", None), NegativeControl)
