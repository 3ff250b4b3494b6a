"""The claims × models report on synthetic claims reports with known cells: marks, values, intervals, Δ, summaries,
CSV columns, the HTML page and which model each figure belongs to."""
import csv
import io
import json

import pytest

from bertattn_bench.base.errors import BenchError
from bertattn_bench.claims.catalog import ClaimOutcome
from bertattn_bench.report import matrix as mx
from bertattn_bench.report.claims_report import write_report
from bertattn_bench.report.matrix_page import html_page

A, B = "embedded:all-MiniLM-L6-v2", "/models/tiny-roberta"
TWIN = "random-init(embedded:all-MiniLM-L6-v2)@0"
SLUG = {A: "all-MiniLM-L6-v2", B: "tiny-roberta", TWIN: "random-all-MiniLM-L6-v2-0"}
CLAIMS = {  # id: (paper, section, reference, comparison)
    "clark.sep": ("Clark et al. 2019", "§3.1", "Fig. 2: ~0.5", "> 0.3"),
    "clark.prev": ("Clark et al. 2019", "§3.1", "4 heads", ">= 1"),
    "clark.dep": ("Clark et al. 2019", "§4.2", "Table 1", "> 0.5"),
    "niven.cue": ("Niven & Kao 2019", "§3", "0.61", ">= 0.6"),
}


def outcome(claim, model, measured=None, holds=None, n=100, interval=None, head=None, skipped=None,
            inconclusive=False, control=False, corpus="wikitext2"):
    paper, section, reference, comparison = CLAIMS[claim]
    return ClaimOutcome(claim_id=claim, paper=paper, section=section, statement=f"{claim} statement", model=model,
                        model_slug=SLUG[model], data="d", corpus=corpus, measured=measured, unit="", n=n,
                        n_unit="segments", reference=reference,
                        comparison=f"NOT {comparison} (negative control)" if control else comparison,
                        holds=holds, head=head, detail=f"{claim} detail", attn_implementation="eager",
                        skipped=skipped, passed=True, interval=interval, inconclusive=inconclusive,
                        negative_control=control, margin=0.0 if inconclusive else None)


def outcomes_of(model):
    if model == A:
        return [outcome("clark.sep", A, 0.5, True, interval=[0.4, 0.6]),
                outcome("clark.prev", A, 2.0, True, head="3-7"),
                outcome("clark.dep", A, 0.45, False, n=80, corpus="ewt_dev"),
                outcome("niven.cue", A, skipped="needs ARCT")]
    if model == B:
        return [outcome("clark.sep", B, 0.25, False, interval=[0.2, 0.3]),
                outcome("clark.prev", B, 1.0, True, head="1-2"),
                outcome("clark.dep", B, 0.5, True, n=80, interval=[0.45, 0.55], inconclusive=True,
                        corpus="ewt_dev")]
    return [outcome("clark.sep", TWIN, 0.1, False, control=True), outcome("clark.prev", TWIN, 0.0, False, control=True)]


def records(*models):
    out = []
    for m in models:
        out += [o.record() | {"verdict": o.verdict} for o in outcomes_of(m)]
    return out


def test_cells_rows_and_summaries_on_known_values():
    m = mx.build(records(A, B, TWIN), reference="minilm")
    assert [c.label for c in m.columns] == ["minilm", "tiny-roberta", "random-minilm (control)"]
    assert [(r["paper"], r["section"], r["claim"], r["corpus"]) for r in m.rows] == [
        ("Clark et al. 2019", "§3.1", "clark.prev", "wikitext2"), ("Clark et al. 2019", "§3.1", "clark.sep", "wikitext2"),
        ("Clark et al. 2019", "§4.2", "clark.dep", "ewt_dev"), ("Niven & Kao 2019", "§3", "niven.cue", "wikitext2")]
    sep = m.rows[1]
    ref = sep["cells"][m.columns[0].key]
    assert mx.cell_text(ref, ref) == "✓ 0.5 [0.4, 0.6] (n=100)"  # the reference's own cell has no Δ
    assert mx.cell_text(sep["cells"][m.columns[1].key], ref) == "✗ 0.25 [0.2, 0.3] (n=100) Δ -0.25"
    prev = m.rows[0]
    assert mx.cell_text(prev["cells"][m.columns[1].key], prev["cells"][m.columns[0].key]) == "✓ 1 1-2 (n=100) Δ -1"
    assert mx.cell_text(m.rows[2]["cells"][m.columns[1].key]) == "? 0.5 [0.45, 0.55] (n=80)"
    assert mx.cell_text(m.rows[3]["cells"][m.columns[0].key]) == "–"
    assert sep["comparison"] == "> 0.3"  # the claim's, not the control's "NOT ..." wording
    assert [mx.claim_summary(r, m.columns) for r in m.rows] == ["2/2", "1/2", "0/2", "–"]
    summary = {s["model"] + s["note"]: (s["holds"], s["does not hold"], s["inconclusive"], s["skipped"]) for s in mx.model_summary(m)}
    assert summary == {"minilm": (2, 1, 0, 1), "tiny-roberta": (1, 1, 1, 0), "random-minilm (negative control: should hold 0)": (0, 2, 0, 0)}


def test_markdown_groups_by_paper_and_section():
    md = mx.markdown(mx.build(records(A, B, TWIN), reference=A))
    assert md.index("## Clark et al. 2019") < md.index("### Clark et al. 2019, §3.1") < md.index(
        "### Clark et al. 2019, §4.2") < md.index("## Niven & Kao 2019")
    assert "| clark.sep | wikitext2 | Fig. 2: ~0.5 | > 0.3 | ✓ 0.5 [0.4, 0.6] (n=100) | ✗ 0.25 [0.2, 0.3] (n=100) " \
           "Δ -0.25 | ✗ 0.1 (n=100) | 1/2 |" in md
    assert "| random-minilm (negative control: should hold 0) | 0 | 2 | 0 | 0 | 0 | 2 |" in md
    # a model that did not run a claim: an empty cell, not a mark
    assert "| niven.cue | wikitext2 | 0.61 | >= 0.6 | – |  |  | – |" in md


def test_csv_has_a_column_group_per_model():
    rows = list(csv.DictReader(io.StringIO(mx.csv_text(mx.build(records(A, B), reference="all-MiniLM-L6-v2")))))
    sep = next(r for r in rows if r["claim"] == "clark.sep")
    assert (sep["tiny-roberta: verdict"], sep["tiny-roberta: ci_low"], sep["tiny-roberta: delta"]) == (
        "does not hold", "0.2", "-0.25")
    assert sep["minilm: delta"] == "" and sep["holds on"] == "1/2"
    assert next(r for r in rows if r["claim"] == "niven.cue")["tiny-roberta: verdict"] == ""


def test_html_links_or_embeds_each_figure_under_its_model(tmp_path):
    figs = tmp_path / "figures"
    figs.mkdir()
    png = b"\x89PNG\r\n\x1a\n fake"
    for name in ("surface-special-all-MiniLM-L6-v2-wikitext2.png", "surface-special-random-all-MiniLM-L6-v2-0-"
                 "wikitext2.png", "surface-entropy-tiny-roberta-wikitext2.png", "arct-shipped-runs-test.png"):
        (figs / name).write_bytes(png)
    m = mx.build(records(A, B, TWIN), figure_dirs=[figs])
    by = {c.label: [p.name for p in m.figures.get(c.key, [])] for c in m.columns}
    assert by == {"minilm": ["surface-special-all-MiniLM-L6-v2-wikitext2.png"],
                  "tiny-roberta": ["surface-entropy-tiny-roberta-wikitext2.png"],
                  "random-minilm (control)": ["surface-special-random-all-MiniLM-L6-v2-0-wikitext2.png"]}
    page = html_page(m, base=tmp_path)  # by default linked by their path relative to the page's folder
    assert "data:image/png;base64," not in page and "<link rel='stylesheet'" not in page and "<script src" not in page
    assert page.count("<a href='figures/surface-special-all-MiniLM-L6-v2-wikitext2.png'>") == 2  # thumbnail, caption
    assert page.count("src='figures/") == 3 and "arct-shipped-runs-test" not in page
    out = tmp_path / "out" / "matrix"  # the matrix command's OUT beside the reports: a path up to them
    assert "src='../../figures/surface-entropy-tiny-roberta-wikitext2.png'" in html_page(m, base=out)
    embedded = html_page(m, base=tmp_path, self_contained=True)
    assert embedded.count("data:image/png;base64,") == 3 and "src='figures/" not in embedded
    # the verdict as text beside its mark (not colour alone), the value, the column and verdict for the script
    # (and the interval's ends, which the "lost" mark reads: an inconclusive cell holding the reference's value agrees)
    assert ("<td class='holds' data-col='0' data-verdict='holds' data-value='0.5' data-lo='0.4' data-hi='0.6' "
            "title='clark.sep detail'>"
            "<span class='mark' aria-hidden='true'>✓</span><span class='vh'>holds: </span>0.5 [0.4, 0.6] (n=100)</td>"
            ) in page
    assert "class='not control' data-col='2' data-verdict='does not hold' data-value='0.1' data-control=1" in page
    # header cells marked up as such: columns, rows, row groups (a paper's section)
    assert "<th scope='col' data-col='1'>tiny-roberta</th>" in page
    assert "<th scope='row'><b>clark.sep</b>" in page
    assert "<th scope='rowgroup' colspan='8'>Clark et al. 2019, §4.2</th>" in page
    # the controls are hidden until the script shows them: without JavaScript the full table, nothing to click
    assert "<form id='controls' hidden" in page and page.count("<tr class='claim'") == 4
    assert "@media print" in page


def test_bad_inputs_name_the_file(tmp_path):
    with pytest.raises(BenchError, match="no claims report here"):
        mx.read_records(tmp_path)
    (tmp_path / "claims.json").write_text("[{\"claim_id\": \"x\"}]")
    with pytest.raises(BenchError, match=r"claims.json: record 1 \(x\) lacks model"):
        mx.read_records(tmp_path)
    with pytest.raises(BenchError, match="--reference 'nope'"):
        mx.build(records(A), reference="nope")
    twice = records(A) + [dict(records(A)[0], measured=0.9)]
    with pytest.raises(BenchError, match="appears twice with different values"):
        mx.build(twice)


def test_a_run_report_holds_the_matrix(tmp_path):
    paths = write_report(outcomes_of(A) + outcomes_of(TWIN), tmp_path)
    assert {p.name for p in paths} >= {"matrix.md", "matrix.csv", "matrix.html", "claims.json"}
    assert "| clark.sep | wikitext2 | Fig. 2: ~0.5 | > 0.3 | ✓ 0.5 [0.4, 0.6] (n=100) | ✗ 0.1 (n=100) | 1/1 |" in \
        (tmp_path / "matrix.md").read_text()
    assert len(json.loads((tmp_path / "claims.json").read_text())["records"]) == 6


def _paired_records():
    """clark.sep on two corpora, its norm reading kob.sep (another paper, section and corpus), two other claims."""
    def rec(claim, paper, section, corpus, value):
        return outcome("clark.sep", A, value, value > 0.3, corpus=corpus).record() | {
            "claim_id": claim, "paper": paper, "section": section, "verdict": "holds" if value > 0.3 else "x"}

    return [rec("kob.sep", "Kobayashi et al. 2020", "Clark §3.1, norm reading", "wikitext2_types01", 0.04),
            rec("niven.cue", "Niven & Kao 2019", "§3", "all", 0.61),
            rec("clark.sep", "Clark et al. 2019", "§3.1", "wikitext2", 0.5),
            rec("clark.sep", "Clark et al. 2019", "§3.1", "gum_paragraphs", 0.45),
            rec("clark.dep", "Clark et al. 2019", "§4.2", "ewt_dev", 0.6),
            rec("kob.alone", "Kobayashi et al. 2020", "§4", "wikitext2_types01", 0.6)]


def test_a_paired_reading_follows_the_claim_it_pairs_with():
    """A norms row naming a Clark claim (the TOML's ``pairs``) sits right after that claim's rows, in its group, in
    the Markdown and the HTML; the other rows keep their order; without the pair it goes back to its own paper."""
    m = mx.build(_paired_records(), pairs={"kob.sep": "clark.sep"})
    assert [(r["claim"], r["corpus"]) for r in m.rows] == [
        ("clark.sep", "gum_paragraphs"), ("clark.sep", "wikitext2"), ("kob.sep", "wikitext2_types01"),
        ("clark.dep", "ewt_dev"), ("kob.alone", "wikitext2_types01"), ("niven.cue", "all")]
    md = mx.markdown(m).splitlines()
    at = {key: i for i, line in enumerate(md) for key in ("| clark.sep | wikitext2 |", "| ↳ kob.sep (Kobayashi",
                                                           "### Clark et al. 2019, §3.1", "### Clark et al. 2019, §4.2",
                                                           "## Kobayashi et al. 2020") if line.startswith(key)}
    assert at["### Clark et al. 2019, §3.1"] < at["| clark.sep | wikitext2 |"] < at["| ↳ kob.sep (Kobayashi"] \
        == at["| clark.sep | wikitext2 |"] + 1 < at["### Clark et al. 2019, §4.2"] < at["## Kobayashi et al. 2020"]
    page = html_page(m)
    group = page.split("<tbody class='group'>")[1]  # the first group: Clark §3.1, with the paired row inside
    assert "Clark et al. 2019, §3.1" in group and group.index("<b>clark.sep</b>") < group.index("↳ kob.sep")
    assert "class='claim paired' data-paper='Kobayashi et al. 2020' data-group='Clark et al. 2019 §3.1'" in group
    # issue 62: the pair reads another corpus than its partner's rows, and says so
    assert "↳ kob.sep (Kobayashi et al. 2020, Clark §3.1, norm reading; on wikitext2_types01, clark.sep on " \
           "gum_paragraphs, wikitext2)" in page
    same = [r | {"corpus": "wikitext2"} if r["claim_id"] == "kob.sep" else r for r in _paired_records()]
    assert "; on " not in mx.markdown(mx.build(same, pairs={"kob.sep": "clark.sep"}))
    alone = mx.build(_paired_records(), pairs={})
    assert [r["claim"] for r in alone.rows] == ["clark.sep", "clark.sep", "clark.dep", "kob.sep", "kob.alone", "niven.cue"]
    assert "pairs" not in alone.rows[3] and "↳" not in mx.markdown(alone)
    # the catalog's own pairs (the default): kob.sep_mid_layers follows clark.sep_mid_layers
    recs = [r | {"claim_id": r["claim_id"].replace("sep", "sep_mid_layers")} for r in _paired_records()]
    assert [r["claim"] for r in mx.build(recs).rows][:4] == ["clark.sep_mid_layers"] * 2 + ["kob.sep_mid_layers",
                                                                                             "clark.dep"]
