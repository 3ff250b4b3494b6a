"""The Markdown job summary (issue 37): counts per model, lost claims and failed checks first, then the table;
appended to $GITHUB_STEP_SUMMARY when set; the command's --fail status names the lost claims."""
from bertattn_bench.claims.catalog import ClaimOutcome
from bertattn_bench.faces.cli import main as cli_main
from bertattn_bench.report.claims_report import write_report
from bertattn_bench.report.summary import job_summary, lost_claims, write_job_summary


def outcome(claim_id, holds, passed, baseline_holds=None, model="embedded:all-MiniLM-L6-v2", control=False, **kw):
    return ClaimOutcome(claim_id=claim_id, paper="P", section="§1", statement="s", model=model, model_slug="m",
                        data="d", corpus="wikitext2", measured=0.5, unit="", n=10, n_unit="examples", reference="r",
                        comparison="> 0", holds=holds, head=None, detail="", attn_implementation="eager",
                        passed=passed, baseline_holds=baseline_holds, negative_control=control,
                        baseline=0.9 if baseline_holds is not None else None, baseline_model="A", **kw)


OUTS = [outcome("a.kept", True, True, True), outcome("b.lost", False, False, True),
        outcome("c.never", False, True, False), outcome("d.twin", True, False, control=True,
                                                       model="random-init(embedded:all-MiniLM-L6-v2)@0"),
        outcome("e.skip", None, None, skipped="needs 12 layers")]


def test_summary_counts_lost_first_then_table():
    text = job_summary(OUTS)
    assert "| minilm | 1 | 2 | 0 | 0 | 1 | 2 | 1 |" in text  # holds, does not, inconclusive, not judged, skipped
    assert "| random-minilm (negative control) | 1 | 0 | 0 | 0 | 0 | 0 | 1 |" in text
    assert text.index("### Lost claims (1)") < text.index("### Failed checks (1)") < text.index("### All claims")
    assert "- **b.lost** on wikitext2 (minilm): held on A (0.9), does not hold here (0.5)" in text
    assert "d.twin" in text.split("### Failed checks")[1].split("###")[0]
    table = text.split("### All claims")[1]
    assert table.index("b.lost") < table.index("a.kept")  # failures first in the table too
    assert [r["claim_id"] for r in lost_claims(OUTS)] == ["b.lost"]


def test_written_to_the_file_the_face_names(tmp_path, monkeypatch):
    """The library writes where it is told (the faces pass ``$GITHUB_STEP_SUMMARY``; nothing below them reads the
    environment, issue 62); the command appends to ``$GITHUB_STEP_SUMMARY`` where --out is not given."""
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "never.md"))
    assert write_job_summary("x") is None and not (tmp_path / "never.md").exists()
    target = tmp_path / "summary.md"
    target.write_text("earlier step\n")
    assert write_job_summary(job_summary(OUTS), target) == target
    text = target.read_text()
    assert text.startswith("earlier step\n## bertattn-bench") and "b.lost" in text  # appended
    write_report(OUTS, tmp_path / "rep")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "step.md"))
    assert main([str(tmp_path / "rep")]) == 0 and "b.lost" in (tmp_path / "step.md").read_text()


def main(argv):
    return cli_main(["summary", *argv])


def test_command_fail_names_lost_claims(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    write_report(OUTS, tmp_path / "rep", missing=["f.notrun"])
    assert main([str(tmp_path / "rep"), "--out", str(tmp_path / "s.md")]) == 0
    assert main([str(tmp_path / "rep"), "--fail"]) == 1
    err = capsys.readouterr().err
    assert "LOST CLAIMS: b.lost@wikitext2" in err and "INCOMPLETE: 1" in err
    assert "Incomplete run" in (tmp_path / "s.md").read_text()
    write_report(OUTS[:1], tmp_path / "ok")
    assert main([str(tmp_path / "ok"), "--fail"]) == 0
    assert main([str(tmp_path / "nothing"), "--fail"]) == 4


def test_negative_control_fails_only_where_a_claim_holds():
    """As benchmarks/test_negative_control.py: an inconclusive 'does not hold' on the twin is not a failure."""
    twin = "random-init(embedded:all-MiniLM-L6-v2)@0"
    # passed as the runner sets it for a twin row (runner/session.py: verdict != holds); an inconclusive row passes
    # on either side of its point value (the value 13 of dep_direction's bounds 0..13 at --limit 40, stop 59)
    outs = [outcome("t.unsure", False, True, control=True, model=twin, inconclusive=True, margin=-0.1,
                    interval=[-1.0, 1.0]),
            outcome("t.unsure_point_holds", True, True, control=True, model=twin, inconclusive=True, margin=0.1,
                    interval=[-1.0, 1.0]),
            outcome("t.held", True, False, control=True, model=twin)]
    text = job_summary(outs)
    assert "| random-minilm (negative control) | 1 | 0 | 2 | 0 | 0 | 2 | 1 |" in text
    failed = text.split("### Failed checks")[1].split("###")[0]
    assert "t.held" in failed and "t.unsure" not in failed
