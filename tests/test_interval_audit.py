"""Issue 61: every judged claim carries an interval or bounds covering its randomness, or an ``exact`` reason in its
catalog entry. The audit (``report.summary.unbounded``) lists the judged rows that have neither, and the job summary
names them; ``exact`` must say why."""
import pytest
from test_output_schemas import outcome

from bertattn_bench.base.errors import BenchError
from bertattn_bench.claims.catalog import _claims_from_file, load_claims
from bertattn_bench.report.summary import job_summary, unbounded


def test_the_audit_lists_judged_rows_with_no_interval_and_no_exact_reason():
    rows = [outcome("t.bounded").record(),
            outcome("t.bare", interval=None).record(),
            outcome("t.exact", interval=None, exact="an identity").record(),
            outcome("t.skip", None, skipped="needs 12 layers", interval=None).record(),
            outcome("t.untrained", interval=None, not_judged="did not learn").record(),
            outcome("t.twin", interval=None, negative_control=True).record()]
    assert [r["claim_id"] for r in unbounded(rows)] == ["t.bare"]
    text = job_summary(rows)
    assert "### Verdicts without an interval (1)" in text and "t.bare@c" in text
    assert "without an interval" not in job_summary(rows[:1])


def test_exact_must_say_why(tmp_path):
    path = tmp_path / "x.toml"
    base = ('[meta]\npaper = "P"\nfamily = "surface"\nsource = "S"\n[[claim]]\nid = "t.x"\nsection = "1"\n'
            'statement = "s"\nmetric = "median_head"\ncomparison = ">"\nthreshold = 0\nreference = "r"\n'
            'rationale = "r"\ntolerance = 0\ntolerance_rationale = "r"\n')
    path.write_text(base + 'exact = "  "\n')
    with pytest.raises(BenchError, match="t.x: exact must say why"):
        _claims_from_file(path)
    path.write_text(base + 'exact = "an identity"\n')
    assert _claims_from_file(path)[0].exact == "an identity"


def test_the_model_free_claims_are_exact_and_no_trained_claim_is():
    claims = load_claims()
    arct = [c for c in claims if c.family == "arct"]
    assert arct and all(c.exact for c in arct)  # arithmetic on fixed files: no model, no sample
    trained = {"finetune", "disable", "prune", "probes", "arct_ft", "speedup"}
    assert not [c.id for c in claims if c.family in trained and c.exact]  # their seed must be in an interval
