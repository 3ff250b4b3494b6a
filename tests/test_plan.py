"""The runner owns the run's plan and its finish (issue 44): one ordered list of rows (target, claims, test id,
negative control or not) that the pytest face, the API and ``list`` all use, and one finish that returns what a run
leaves (the lines to print, the report, the job summary, the baselines)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from test_job_summary import outcome

from bertattn_bench.claims.catalog import load_claims
from bertattn_bench.runner.options import RunOptions
from bertattn_bench.runner.plan import plan_id, random_twin_name
from bertattn_bench.runner.session import Runner

ROOT = Path(__file__).resolve().parent.parent


def test_the_plan_orders_rows_and_names_them_once():
    runner = Runner(RunOptions(models=["embedded"], tier="quick"))
    rows = runner.plan("dependency")
    assert rows and {r.target.family for r in rows} == {"dependency"}
    plain, control = [r for r in rows if not r.negative_control], [r for r in rows if r.negative_control]
    assert [r.target.corpus for r in plain] == runner.options.corpora("dependency")
    assert rows[-1] is control[0] and len(control) == 1  # the twin after the family's own passes
    assert control[0].target.model == "random:embedded" == random_twin_name("embedded")
    assert random_twin_name("random:embedded@3") == "random:embedded@3"
    assert control[0].test_id == "clark-dependency-random0-ewt_dev"
    assert all(c.learned for c in control[0].claims)
    first = plain[0]
    assert first.test_id == "clark-dependency-minilm-ewt_dev"
    c = first.claims[0]
    assert first.claim_test_id(c) == f"clark-dependency-minilm-ewt_dev-{c.id}" == plan_id(c.paper, "dependency",
                                                                                            first.target, c.id)
    # a selection keeps the claims whose id it matches, drops a row left with none
    one = runner.plan(f"{c.id} and minilm")
    assert [(r.target, r.claims) for r in one] == [(first.target, (c,))]
    assert runner.plan("dependency", negative_control=False) == plain


def test_pytest_collects_the_plans_ids():
    """The pytest face parametrizes from the plan: its test ids are the plan's, for the claims, the passes and the
    negative control."""
    out = subprocess.run([sys.executable, "-m", "pytest", "benchmarks", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "-k", "dependency and ewt_dev", "--tier", "quick"], capture_output=True, text=True,
                         cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    ids = {line.split("[", 1)[1].rstrip("]") for line in out.stdout.splitlines() if "[" in line}
    rows = [r for r in Runner(RunOptions(models=["embedded"], tier="quick")).plan("dependency and ewt_dev")
            if r.target.corpus == "ewt_dev"]
    want = {r.test_id for r in rows} | {r.claim_test_id(c) for r in rows if not r.negative_control for c in r.claims}
    assert ids == want


def test_list_selects_by_the_same_ids():
    import contextlib
    import io

    from bertattn_bench.faces.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["list", "-k", "clark and dependency", "--json"]) == 0
    import json

    listed = [r["id"] for r in json.loads(buf.getvalue())]
    assert listed == [c.id for c in load_claims() if c.family == "dependency" and c.paper.startswith("Clark")]


def test_finish_returns_what_the_run_leaves(tmp_path):
    runner = Runner(RunOptions(models=["embedded"], claims_report=None))
    runner.outcomes += [outcome("a.kept", True, True, True), outcome("b.lost", False, False, True)]
    quiet = runner.finish(write=False)
    assert "a.kept" in quiet.lines[0] and quiet.summary is None and quiet.reports == [] and quiet.baselines == []
    assert runner.finish(missing=["x on minilm / ewt_dev"]).lines[-1].startswith("INCOMPLETE: 1 selected")
    done = runner.finish(summary_file=tmp_path / "summary.md")
    assert done.summary == tmp_path / "summary.md" and "### Lost claims (1)" in done.summary.read_text()
    assert done.lines[-1] == f"job summary: appended to {tmp_path / 'summary.md'}"
