"""The one verdict (issue 44): five states, one function, used by the terminal table, the matrix, the job summary
and the baselines; a claim the learned-model guard does not judge has no side, is counted as "not judged" and is
never a lost claim."""
from __future__ import annotations

import pytest
from test_claims_registry import baseline, claim
from test_job_summary import outcome
from test_learned import DEGENERATE, LEARNED, TrainedFakePass

from bertattn_bench.claims import baselines, verdicts
from bertattn_bench.claims.catalog import evaluate
from bertattn_bench.claims.verdicts import VERDICTS, verdict_of
from bertattn_bench.report import matrix, summary
from bertattn_bench.report.claims_report import summary_lines, terminal_table

RECORDS = {  # one record per state, with fields that would mislead a reader that checks them in another order
    "holds": {"holds": True},
    "does not hold": {"holds": False},
    "inconclusive": {"holds": True, "inconclusive": True},
    "not judged": {"holds": False, "inconclusive": True, "not_judged": "did not learn"},
    "skipped": {"holds": None, "not_judged": "did not learn", "skipped": "needs 12 layers"},
}


@pytest.mark.parametrize("state", VERDICTS)
def test_each_state_from_a_record_an_outcome_and_a_baseline_entry(state):
    rec = RECORDS[state]
    assert verdict_of(rec) == state
    assert baselines.verdict_of(rec) == state and matrix.verdict_of(rec) == state
    o = outcome("x.c", rec["holds"], True, skipped=rec.get("skipped"), not_judged=rec.get("not_judged"),
                inconclusive=rec.get("inconclusive", False), interval=[0.4, 0.6], margin=0.1)
    assert verdict_of(o) == state and state in o.verdict  # the long form: "holds (inconclusive: ...)"
    assert verdict_of(o.record()) == state


def test_the_five_states_in_order():
    assert VERDICTS == ("holds", "does not hold", "inconclusive", "not judged", "skipped")
    assert matrix.verdict_of is verdicts.verdict_of  # the matrix names no verdict of its own
    assert baselines.verdict_of(None) == "—"


def test_evaluate_gives_a_not_judged_claim_no_side():
    out = evaluate(claim(">=", 0.0), TrainedFakePass(5.0, learning=(DEGENERATE,)))
    assert out.holds is None and verdict_of(out) == "not judged"
    # a value below the threshold is not judged either (not "does not hold")
    below = evaluate(claim(">=", 10.0), TrainedFakePass(5.0, learning=(DEGENERATE,)))
    assert below.holds is None and verdict_of(below) == "not judged"
    assert verdict_of(evaluate(claim(">=", 10.0), TrainedFakePass(5.0, learning=(LEARNED,)))) == "does not hold"


def test_a_baseline_judged_now_not_judged_when_recorded_reads_as_does_not_hold():
    """Recorded not judged (holds null since issue 44, false before it): a judged "does not hold" now passes the
    verdict part of the check, a "holds" now fails it."""
    for recorded_holds in (None, False):
        rec = baseline(5.0, recorded_holds)
        rec["results"]["t.claim@fake_corpus"]["not_judged"] = "did not learn"
        assert evaluate(claim(">=", 10.0), TrainedFakePass(5.0, learning=(LEARNED,)), rec).passed
        held = evaluate(claim(">=", 0.0), TrainedFakePass(5.0, learning=(LEARNED,)), rec)
        assert held.passed is False and "verdict" in held.check_failure


def test_the_job_summary_counts_not_judged_and_never_loses_it():
    ok = outcome("a.kept", True, True, True)
    unjudged = outcome("n.unjudged", None, False, True, not_judged="fine-tune did not learn",
                       check_failure="not judged where the baseline was judged (a lost judgement)")
    legacy = outcome("l.legacy", False, False, True, not_judged="fine-tune did not learn")  # a record made before
    lost = outcome("b.lost", False, False, True)
    outs = [ok, unjudged, legacy, lost]
    text = summary.job_summary(outs)
    assert "| model | holds | does not hold | inconclusive | not judged | skipped |" in text
    assert "| minilm | 1 | 1 | 0 | 2 | 0 | 1 | 3 |" in text
    assert [r["claim_id"] for r in summary.lost_claims(outs)] == ["b.lost"]
    assert [r["claim_id"] for r in summary.lost_claims([o.record() for o in outs])] == ["b.lost"]
    # its failed check (a lost judgement) is still listed, with its reason
    failed = text.split("### Failed checks")[1].split("###")[0]
    assert "n.unjudged" in failed and "lost judgement" in failed


def test_the_negative_control_table_and_lines_use_the_same_states():
    outs = [evaluate(claim(">=", 0.0), TrainedFakePass(5.0, learning=(DEGENERATE,))),
            evaluate(claim(">=", 10.0, id="t.no"), TrainedFakePass(5.0, learning=(LEARNED,)))]
    table = terminal_table(outs, width=200)
    assert "not judged" in table and "does not hold" in table
    (line,) = summary_lines(outs)
    assert "0 of 1 claims hold" in line and "1 not judged" in line


def test_the_matrix_schema_takes_every_verdict():
    """A cell's verdict enum in the shipped matrix schema is the verdict function's five words (a "not judged" cell,
    a model that did not learn, was refused by the schema when the matrix was written: found by issue 46's callback
    test)."""
    import json

    from bertattn_bench.base.resources import folder
    from bertattn_bench.claims.verdicts import VERDICTS

    schema = json.loads((folder("schemas") / "matrix.schema.json").read_text(encoding="utf-8"))

    def enums(node):
        if isinstance(node, dict):
            if "verdict" in node.get("properties", {}):
                yield node["properties"]["verdict"]["enum"]
            for v in node.values():
                yield from enums(v)
        elif isinstance(node, list):
            for v in node:
                yield from enums(v)

    found = list(enums(schema))
    assert found and all(sorted(e) == sorted(VERDICTS) for e in found)
