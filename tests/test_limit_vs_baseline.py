"""A --limit run against a baseline recorded on the whole corpus (issue 37): where n differs, the value and the
verdict are another sample's, so they are reported, not checked (the check passes and says what it skipped); where n
matches, or the run is not limited, the usual checks apply."""
from test_claims_registry import FakePass, baseline, claim

from bertattn_bench.claims.catalog import evaluate


def test_limited_run_with_other_n_is_not_checked():
    c = claim(">", 1.0)
    out = evaluate(c, FakePass(0.2, n_examples=122), baseline(5.0, holds=True, n=5211), limit=50)
    assert out.passed and out.baseline_ok is None and out.check_failure is None
    assert "not checked: recorded n=5211, this run n=122 (--limit 50)" in out.detail
    assert out.baseline == 5.0  # still reported


def test_limited_run_with_same_n_is_checked():
    c = claim(">", 1.0)
    out = evaluate(c, FakePass(0.2, n_examples=122), baseline(5.0, holds=True, n=122), limit=50)
    assert not out.passed and "value off" in out.check_failure and "not checked" not in out.detail


def test_unlimited_run_still_fails_on_n():
    c = claim(">", 1.0)
    out = evaluate(c, FakePass(5.0, n_examples=122), baseline(5.0, holds=True, n=5211))
    assert not out.passed and "n 122 where the baseline has 5211" in out.check_failure


def test_compare_mode_limited_with_other_n_is_not_a_regression():
    c = claim(">", 1.0)
    out = evaluate(c, FakePass(0.2, n_examples=122), baseline(5.0, holds=True, n=5211), mode="compare", limit=50)
    assert out.passed and out.baseline_ok is None
    out = evaluate(c, FakePass(0.2, n_examples=122), baseline(5.0, holds=True, n=122), mode="compare", limit=50)
    assert not out.passed and out.baseline_ok is False
