"""Verdicts that know their noise: a metric's standard error gives the claim an interval; a threshold inside it
makes the verdict "inconclusive" (reported with the margin, not checked against the baseline, not a failure)."""
from __future__ import annotations

import json

import pytest
from test_claims_registry import FakePass, baseline, claim

from bertattn_bench.claims import registry
from bertattn_bench.claims.catalog import evaluate
from bertattn_bench.claims.registry import Measurement
from bertattn_bench.claims.stats import binomial_se_points as binomial_se
from bertattn_bench.claims.stats import difference_se
from bertattn_bench.report.claims_report import rows, summary_lines, terminal_table, write_report

SE_METRIC = "test_se_metric_xyz"


def _with_se(pr, se: float = 1.0) -> Measurement:
    """``result`` is the value, ``se`` its standard error."""
    return Measurement(pr.result, n=pr.n_examples, n_unit="things", unit="points", standard_error=se)


if SE_METRIC not in registry.METRICS:
    registry.metric(SE_METRIC)(_with_se)


def se_claim(comparison=">=", threshold=0.0, se=1.0, **kw):
    return claim(comparison, threshold, metric=SE_METRIC, params={"se": se}, **kw)


def test_binomial_and_difference_standard_errors():
    assert binomial_se(50.0, 100) == pytest.approx(5.0)
    assert binomial_se(90.0, 400) == pytest.approx(1.5)
    assert binomial_se(0.0, 10) == 0.0 and binomial_se(100.0, 10) == 0.0
    assert difference_se((50.0, 100), (90.0, 400)) == pytest.approx((25 + 2.25) ** 0.5)


def test_threshold_inside_the_interval_is_inconclusive_and_does_not_fail():
    out = evaluate(se_claim(se=4.0), FakePass(-0.93))  # 95%: -0.93 ± 7.84 straddles 0
    assert out.holds is False and out.inconclusive
    assert out.interval == pytest.approx([-0.93 - 7.84, -0.93 + 7.84])
    assert out.margin == pytest.approx(-0.93)
    assert out.verdict == "does not hold (inconclusive: margin -0.93 ± 7.8, 95% CI)"
    assert out.passed  # no baseline: an inconclusive claim is not a failure
    assert "the verdict is inconclusive" in out.detail


def test_threshold_outside_the_interval_is_a_clear_verdict():
    out = evaluate(se_claim(se=4.0), FakePass(-8.0))  # -8 + 7.84 < 0
    assert not out.inconclusive and out.verdict == "does not hold" and out.passed is False
    out = evaluate(se_claim(se=4.0), FakePass(7.9))
    assert not out.inconclusive and out.verdict == "holds" and out.passed
    out = evaluate(se_claim(se=4.0, interval_z=1.0), FakePass(-4.1))  # z = 1: -4.1 ± 4 clears 0
    assert not out.inconclusive


def test_a_zero_standard_error_is_exact_not_inconclusive():
    """A value no resample moved (SE 0, e.g. a count of heads far from their bar) sitting on its threshold is a
    clear verdict: the degenerate interval [v, v] does not make it inconclusive."""
    out = evaluate(se_claim(">=", 1.0, se=0.0), FakePass(1.0))
    assert out.holds and not out.inconclusive and out.verdict == "holds"
    out = evaluate(se_claim(">=", 1.0, se=0.1), FakePass(1.0))
    assert out.inconclusive


def test_between_is_inconclusive_near_either_bound():
    out = evaluate(se_claim("between", [20.0, 35.0], se=0.48), FakePass(34.70))
    assert out.holds and out.inconclusive and out.margin == pytest.approx(-0.30)
    out = evaluate(se_claim("between", [20.0, 35.0], se=0.48), FakePass(27.0))
    assert out.holds and not out.inconclusive


def test_no_standard_error_no_interval():
    out = evaluate(claim(">=", 0.0), FakePass(-0.5))
    assert out.interval is None and not out.inconclusive and out.verdict == "does not hold"


def test_an_inconclusive_verdict_is_not_checked_against_the_baseline():
    c = se_claim(se=4.0, tolerance=2.0)
    out = evaluate(c, FakePass(-0.9), baseline(0.5, holds=True))  # side flipped, value within tolerance
    assert out.inconclusive and out.baseline_ok and out.passed
    out = evaluate(c, FakePass(-5.0), baseline(0.5, holds=True))  # value outside tolerance: still a failure
    assert out.inconclusive and not out.baseline_ok and "value off" in out.check_failure
    # (a verdict flip with the value within tolerance needs the threshold inside the recorded ± tolerance, which
    # verdict_pinned already leaves unchecked: the inconclusive rule adds the case of a wide interval, above)


def test_reports_show_the_interval_and_count_inconclusive(tmp_path):
    outs = [evaluate(se_claim(se=4.0), FakePass(-0.93)), evaluate(se_claim(se=4.0, id="t.two"), FakePass(9.0)),
            evaluate(se_claim(se=4.0, id="t.three"), FakePass(-9.0))]
    assert summary_lines(outs) == ["fake-model: 1 of 3 claims hold, 1 do not, 1 inconclusive (the threshold inside "
                                   "the value's 95% interval); 2 of 3 checks pass"]
    table = terminal_table(outs, width=120)
    assert "inconclusive" in table and "-0.93 ±7.8 points" in table
    assert rows(outs)[0]["verdict"] == "does not hold (inconclusive: margin -0.93 ± 7.8, 95% CI)"
    write_report(outs, tmp_path)
    records = json.loads((tmp_path / "claims.json").read_text(encoding="utf-8"))["records"]
    first = next(r for r in records if r["claim_id"] == "t.claim")
    assert first["inconclusive"] is True and first["interval"] == pytest.approx([-8.77, 6.91])
    assert "inconclusive" in (tmp_path / "claims.csv").read_text(encoding="utf-8")
    assert "(inconclusive: margin -0.93" in (tmp_path / "claims.md").read_text(encoding="utf-8")


def test_dependency_best_head_gap_carries_its_interval():
    """Clark §4.2's best-head claims: the gap's standard error is the binomial SE of the head's and of the offset's
    accuracy over the relation's arcs (independent: wide); by hand for 30/40 correct vs an offset at 50% of 40."""
    import torch

    from bertattn_bench.claims.registry import METRICS, load_all_metrics
    from bertattn_bench.families.dependency import DependencyResult, OffsetBaseline

    load_all_metrics()
    correct = torch.zeros(1, 2, 1, 2, dtype=torch.float64)
    correct[0, 0, 0, 1] = 30  # head 1-2, dependent -> head: 30 of 40
    res = DependencyResult(("nsubj",), correct, torch.tensor([40]), {"nsubj": OffsetBaseline(50.0, -1, 40, 10.0)},
                           n_sentences=5, n_words=60, n_split_words=3)

    class PR:
        result = res

    m = METRICS["best_head_gap"](PR(), relation="nsubj")
    assert m.value == pytest.approx(25.0) and m.head == "1-2"
    assert m.standard_error == pytest.approx(100 * ((0.75 * 0.25 + 0.5 * 0.5) / 40) ** 0.5)
    rb = METRICS["right_branching_accuracy"](PR(), relation="nsubj")
    assert rb.standard_error == pytest.approx(100 * (0.1 * 0.9 / 40) ** 0.5)


def test_corpus_label_carries_the_tier_of_the_passes_a_claim_reads():
    """A claim judged on a pass without a tier (FrameNet) but reading the full tier's disabling sweeps is another
    measurement than the regression tier's: its baseline key says so (one_per_lu+full), so the two never overwrite.
    The recorded (regression) tier adds nothing; a quick-tier sample of a forward family (PassResult.tier) does."""
    from types import SimpleNamespace

    from bertattn_bench.claims.catalog import corpus_label

    own = SimpleNamespace(corpus="one_per_lu", result=SimpleNamespace())
    full = SimpleNamespace(corpus="mrpc", result=SimpleNamespace(tier="full"))
    recorded = SimpleNamespace(corpus="mrpc", result=SimpleNamespace(tier="regression"))
    quick = SimpleNamespace(corpus="mrpc", result=SimpleNamespace(tier="quick"))
    capped = SimpleNamespace(corpus="wikitext2", tier="quick", result=SimpleNamespace())
    assert corpus_label(own) == "one_per_lu"
    assert corpus_label(own, [recorded]) == "one_per_lu"
    assert corpus_label(own, [quick]) == "one_per_lu+quick"
    assert corpus_label(own, [full, full]) == "one_per_lu+full"
    assert corpus_label(full, [full]) == "mrpc+full"
    assert corpus_label(recorded) == "mrpc"
    assert corpus_label(capped) == "wikitext2+quick"


BOUNDS_METRIC = "test_bounds_metric_xyz"


def _with_bounds(pr, lo: float = 0.0) -> Measurement:
    """``result`` is the value (the upper bound), ``lo`` the lower: two tests bracketing it (no standard error)."""
    return Measurement(pr.result, n=pr.n_examples, n_unit="heads", unit="%", bounds=(lo, pr.result))


if BOUNDS_METRIC not in registry.METRICS:
    registry.metric(BOUNDS_METRIC)(_with_bounds)


def test_explicit_bounds_make_the_interval():
    """A metric's ``bounds`` (e.g. the share of heads shown unchanged .. not shown changed) are the interval: the
    threshold between them is inconclusive; above the lower bound the claim holds; below the upper it does not."""
    c = claim(">=", 80.0, metric=BOUNDS_METRIC, params={"lo": 10.0})
    out = evaluate(c, FakePass(100.0))
    assert out.interval == [10.0, 100.0] and out.inconclusive and "bounds 10 .. 100" in out.detail
    out = evaluate(claim(">=", 80.0, metric=BOUNDS_METRIC, params={"lo": 85.0}), FakePass(100.0))
    assert out.interval == [85.0, 100.0] and not out.inconclusive and out.verdict == "holds"
    out = evaluate(claim(">=", 80.0, metric=BOUNDS_METRIC, params={"lo": 10.0}), FakePass(60.0))
    assert not out.inconclusive and out.verdict == "does not hold"


def test_bounds_are_shown_as_bounds_not_as_plus_minus():
    out = evaluate(claim(">=", 80.0, metric=BOUNDS_METRIC, params={"lo": 31.94}), FakePass(97.22))
    assert not out.symmetric and out.interval_text == "[31.9..97.2]"
    assert out.verdict == "holds (inconclusive: the threshold lies within the bounds [31.9..97.2])"
    assert "97.22 [31.9..97.2]" in terminal_table([out])
    se = evaluate(se_claim(se=4.0), FakePass(-0.93))
    assert se.symmetric and se.interval_text == "±7.8"


def test_baseline_diff_shows_the_interval_of_either_kind():
    """`bertattn-bench diff`'s interval column reads the detail evaluate writes: value ± z SE, or explicit bounds."""
    from bertattn_bench.claims.baselines import baseline_diff

    se = evaluate(se_claim(se=4.0), FakePass(-0.93))
    bounds = evaluate(claim(">=", 80.0, metric=BOUNDS_METRIC, params={"lo": 31.94}), FakePass(97.22))
    old = {"results": {"a@c": {"measured": 0.0, "n": 1, "holds": True}, "b@c": {"measured": 0.0, "n": 1, "holds": True}}}
    new = {"results": {"a@c": {"measured": se.measured, "n": 1, "holds": se.holds, "detail": se.detail},
                       "b@c": {"measured": bounds.measured, "n": 1, "holds": bounds.holds, "detail": bounds.detail}}}
    rows = {r["key"]: r["interval_after"] for r in baseline_diff(old, new)}
    assert rows == {"a@c": "-8.77 .. 6.91", "b@c": "31.94 .. 97.22"}
