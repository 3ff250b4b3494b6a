"""The terminal table: seven columns that fit the terminal (80..120), skip reasons in full below, counts per model
with the random twin apart; a note when the baseline was recorded with other torch/transformers versions."""
import pytest

from bertattn_bench.claims.catalog import ClaimOutcome
from bertattn_bench.report.claims_report import TERMINAL_COLUMNS, summary_lines, terminal_table, version_notes

MODEL = "embedded:all-MiniLM-L6-v2"
TWIN = "random-init(embedded:all-MiniLM-L6-v2)@0"
LONG_REASON = "needs a masked-LM head (BertForMaskedLM with trained head weights); this model has none: " + "x" * 80


def outcome(claim_id, model=MODEL, holds=True, passed=True, skipped=None, control=False, baseline=None, **kw):
    return ClaimOutcome(
        claim_id=claim_id, paper="clark2019", section="§4.2, Table 1, Fig. 5", statement="A statement " * 8,
        model=model, model_slug="all-MiniLM-L6-v2" if model == MODEL else "random-init-all-MiniLM-L6-v2-seed0",
        data="UD EWT dev (UD trees mapped to SD, Clark Table 1 relations)", corpus=kw.pop("corpus", "ewt_dev"),
        measured=None if skipped else 38.2345678, unit="points", n=1211, n_unit="arcs",
        reference="dobj: 8-10, 86.8 vs 40.0 (-2), and a long reference text " * 3, comparison=">= 10",
        holds=None if skipped else holds, head="3-1", detail="d", attn_implementation="bertattn_eager",
        baseline=baseline, baseline_ok=None if baseline is None else True, skipped=skipped,
        passed=None if skipped else passed, negative_control=control, **kw)


OUTCOMES = [outcome("clark.dep_dobj", baseline=38.23, baseline_holds=True),
            outcome("clark.probe_vs_structural_with_a_long_name", holds=False, corpus="gum_paragraphs"),
            outcome("clark.grad_sep", skipped=LONG_REASON), outcome("clark.grad_cls", skipped=LONG_REASON),
            outcome("clark.dep_dobj", model=TWIN, holds=False, control=True),
            outcome("clark.dep_det", model=TWIN, holds=True, passed=False, control=True)]


@pytest.mark.parametrize("width", [80, 100, 120])
def test_table_fits_the_width_and_has_the_seven_columns(width):
    text = terminal_table(OUTCOMES, width=width)
    table = text.split("\nskipped ")[0].splitlines()
    assert table[0].split() == list(TERMINAL_COLUMNS)
    assert max(len(line) for line in table) <= width
    assert any("…" in line for line in table)  # something had to be cut at this width
    assert "reference" not in table[0] and "section" not in table[0]  # the full table stays in the files


def test_wide_enough_nothing_is_cut():
    text = terminal_table(OUTCOMES[:1], width=120)
    assert "…" not in text.split("\n\n")[0] and "38.23 points [3-1]" in text and "PASS (base 38.23)" in text


def test_skip_reasons_are_printed_in_full_once():
    text = terminal_table(OUTCOMES, width=80)
    assert f"skipped clark.grad_cls, clark.grad_sep: {LONG_REASON}" in text.splitlines()


def test_counts_per_model_and_the_twin_apart():
    assert summary_lines(OUTCOMES) == [
        "all-MiniLM-L6-v2".join(["embedded:", ": 1 of 2 claims hold; 2 of 4 checks pass; 2 skipped"]),
        f"{TWIN} (negative control): 1 of 2 learned-structure claims hold (should be 0); 1 of 2 checks pass (each "
        "row checks that the claim does NOT hold on random weights)",
    ]
    assert terminal_table(OUTCOMES).endswith(summary_lines(OUTCOMES)[-1])


def test_version_note_only_when_the_baseline_versions_differ():
    import torch
    import transformers

    same = {"provenance": {"torch": torch.__version__, "transformers": transformers.__version__}}
    other = {"provenance": {"torch": "2.0.0", "transformers": transformers.__version__}}
    assert version_notes(OUTCOMES, load=lambda slug: same) == []
    assert version_notes(OUTCOMES, load=lambda slug: other) == [
        f"note: the baseline of all-MiniLM-L6-v2 was recorded with torch 2.0.0 (this run: {torch.__version__}); "
        "values may drift (within each claim's tolerance)"]
    no_baseline = [o for o in OUTCOMES if o.baseline is None]
    assert version_notes(no_baseline, load=lambda slug: other) == []


def test_the_session_ends_with_the_compact_table(pytester, monkeypatch):
    """The plugin's terminal summary, end to end: the table after the tests, its counts, before pytest's summary."""
    monkeypatch.setenv("COLUMNS", "80")
    pytester.makeconftest('pytest_plugins = ["bertattn_bench.faces.pytest_plugin", "bertattn_bench.faces.short_options"]')
    pytester.makepyfile(test_fake_claims="""
import sys
sys.path.insert(0, %r)
from test_terminal_table import OUTCOMES

def test_claims(bench):
    bench.outcomes.extend(OUTCOMES)
""" % str(__import__("pathlib").Path(__file__).parent))
    # in a subprocess: an in-process run drops the modules it imported when it ends, and a later test in this worker
    # would import transformers' config classes a second time (BertModel(config) then refuses its own config)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    out = result.outlines
    start = out.index(next(ln for ln in out if "bertattn-bench: claims vs measured" in ln))
    assert out[start + 1].split() == list(TERMINAL_COLUMNS)
    assert max(len(ln) for ln in out[start + 1:start + 9]) <= 120  # not a terminal: 120 columns
    assert summary_lines(OUTCOMES)[0] in out and "1 passed" in out[-1]


@pytest.mark.parametrize("holds, inconclusive, passed", [
    (True, False, False),   # clearly holds on random weights: the control fails
    (False, False, True),   # clearly does not hold
    (True, True, True),     # inconclusive (either side): not shown to hold, passes
    (False, True, True),
])
def test_the_twin_row_prints_what_the_exit_status_says(monkeypatch, holds, inconclusive, passed):
    """One truth (issue 45): the negative control's row is PASS exactly when its test passes (the benchmark fails on
    ``passed`` alone), and an inconclusive twin row passes."""
    from types import SimpleNamespace

    from bertattn_bench.claims import checks
    from bertattn_bench.report.claims_report import _check
    from bertattn_bench.runner.options import RunOptions
    from bertattn_bench.runner.plan import Target
    from bertattn_bench.runner.session import Runner

    runner = Runner(RunOptions(models=["m"]), loaded={"m": object()})
    target = Target("random:m@0", "ewt_dev", "dependency")
    runner.results[target] = SimpleNamespace(model=SimpleNamespace(slug="x"))
    made = outcome("clark.dep_dobj", model=TWIN, holds=holds, passed=None, inconclusive=inconclusive)
    # measured and judged as planted; the runner's policy (the negative control) and claims.checks.check decide
    monkeypatch.setattr(checks, "measure", lambda *a, **k: checks.Measured(made, object(), []))
    monkeypatch.setattr(checks, "judge", lambda claim, pr, measured, *a, **k: measured.outcome)
    runner.results[target] = SimpleNamespace(model=SimpleNamespace(slug="x", device="cpu"))
    out = runner.outcome(SimpleNamespace(inputs=()), target, negative_control=True)
    assert out.passed is passed and out.negative_control
    assert _check(out) == ("PASS" if passed else "FAIL")
    assert "does NOT hold" in summary_lines([out])[0]


@pytest.mark.parametrize("holds, inconclusive, passed", [(True, False, False), (True, True, True), (False, False, True)])
def test_the_twin_test_fails_exactly_where_its_row_says_fail(holds, inconclusive, passed):
    """The pytest face's negative-control test reads the runner's ``passed``, as the row prints it: a point value on
    the claim's side whose interval straddles the threshold (inconclusive) is not shown to hold and passes."""
    from types import SimpleNamespace

    from bertattn_bench.faces.pytest_session import check_negative_control

    made = outcome("clark.dep_direction", model=TWIN, holds=holds, passed=passed, inconclusive=inconclusive)
    made.negative_control = True
    bench = SimpleNamespace(result=lambda target: SimpleNamespace(result=None), judge=lambda row: [made])
    row = SimpleNamespace(target=SimpleNamespace(family="dependency", model="random:m@0"))
    if passed:
        check_negative_control(bench, row)
    else:
        with pytest.raises(AssertionError, match="clark.dep_direction"):
            check_negative_control(bench, row)


def test_claims_md_puts_a_paired_norm_reading_under_its_clark_claim():
    """Issue 62 (found in use): claims.md sorted by paper, section and id, so a Kobayashi norm reading landed under
    Kobayashi, far from the Clark weight claim it pairs with (the matrix put it under). One order now: the paired
    row right after its claim's rows, in that claim's section."""
    from bertattn_bench.report.claims_report import in_report_order

    rows = [_outcome("kob.sep", "Kobayashi et al. 2020", "§4"), _outcome("clark.zzz", "Clark et al. 2019", "§3.2"),
            _outcome("clark.sep", "Clark et al. 2019", "§3.2"), _outcome("clark.sep", "Clark et al. 2019", "§3.2", "n"),
            _outcome("clark.abc", "Clark et al. 2019", "§3.1")]
    order = [(r.claim_id, r.model) for r in in_report_order(rows, pairs={"kob.sep": "clark.sep"})]
    assert order == [("clark.abc", "m"), ("clark.sep", "m"), ("clark.sep", "n"), ("kob.sep", "m"), ("clark.zzz", "m")]
    # without the partner in the run, its own place
    alone = [r.claim_id for r in in_report_order([rows[0], rows[4]], pairs={"kob.sep": "clark.sep"})]
    assert alone == ["clark.abc", "kob.sep"]


def _outcome(cid, paper, section, model="m"):
    from bertattn_bench.claims.outcome import ClaimOutcome

    return ClaimOutcome(claim_id=cid, paper=paper, section=section, statement="s", model=model, model_slug=model,
                        data="d", corpus="c", measured=1.0, unit="", n=1, n_unit="x", reference="r", comparison="> 0",
                        holds=True, head=None, detail="", attn_implementation="eager")
