"""The claims × models report: one row per claim (and corpus), one column per model, from any set of claims reports.

Input: the records of ``claims.json`` files (what ``--claims-report DIR`` writes, or what ``merge`` joins), in any
number, from one run or many (a model zoo, checkpoints along training, seeds of a fine-tune). Output:

* ``matrix.md``: rows grouped by paper and section, with the paper's reference and the comparison; each cell the
  verdict mark and the value with its 95% interval (where the metric gives one), ``Δ`` to the reference model's
  value; a summary per model (holds / does not / inconclusive / skipped) and, per claim, on how many models it holds;
* ``matrix.csv``: the same table, one column group per model (verdict, value, interval, n, Δ);
* ``matrix.html``: one page (:mod:`bertattn_bench.report.matrix_page`, which writes all four files:
  ``write_matrix``).

A random-init twin (a negative control) is its own column, marked "(control)": there a claim that holds is the
failure, and its summary says so. Heads are shown as the reports give them (``layer-head``, 1-based).
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path

from ..base.documents import checked, read_json, short_model
from ..base.errors import BenchError
from ..claims.verdicts import verdict_of  # noqa: F401 (the one verdict; matrix.verdict_of is this function)

MARKS = {"holds": "✓", "does not hold": "✗", "inconclusive": "?", "not judged": "∅", "skipped": "–", None: ""}
LEGEND = ("✓ holds · ✗ does not hold · ? inconclusive (a threshold inside the value's 95% interval) · "
          "∅ not judged (a trained model it reads did not learn: the reason in the claims report) · "
          "– skipped (the reason is in the claims report) · blank: not run for this model")


@dataclass(frozen=True)
class Column:
    model: str  # the model's full name, as the records give it
    slug: str
    control: bool  # judged as the negative control (random-init twin)
    label: str = ""

    @property
    def key(self) -> tuple[str, bool]:
        return self.model, self.control


@dataclass
class Matrix:
    columns: list[Column]
    rows: list[dict]  # {paper, section, claim, corpus, statement, reference, comparison, cells: {col key: record}}
    reference: Column | None = None
    figures: dict[tuple[str, bool], list[Path]] = field(default_factory=dict)


def read_records(source: Path) -> list[dict]:
    """The records of a claims report: a folder holding ``claims.json`` or the JSON file itself."""
    path = Path(source)
    path = path / "claims.json" if path.is_dir() else path
    records = read_json(path, f"{source}: no claims report here (expected a folder with claims.json, written by "
                              f"--claims-report DIR, or the claims.json file)")
    if isinstance(records, dict) and records.get("schema") == "bertattn-bench/claims":  # versioned (issue 37)
        records = checked(records, "claims", str(path)).get("records")  # the shipped schema, version included
    # else: an older report, a bare list of records
    if not isinstance(records, list) or not all(isinstance(r, dict) and "claim_id" in r for r in records):
        raise BenchError(f"{path}: not a claims report (a list of records with claim_id)")
    for i, r in enumerate(records):
        missing = [k for k in ("claim_id", "model", "corpus", "paper", "section") if k not in r]
        if missing:
            raise BenchError(f"{path}: record {i + 1} ({r.get('claim_id')}) lacks {', '.join(missing)}")
    return records


def _labels(columns: list[Column]) -> list[Column]:

    short = [short_model(c.model) for c in columns]
    out = []
    for c, s in zip(columns, short):
        label = s if sum(1 for c2, s2 in zip(columns, short) if s2 == s and c2.model != c.model) == 0 else c.model
        out.append(Column(c.model, c.slug, c.control, label + (" (control)" if c.control else "")))
    return out


def build(records: list[dict], reference: str | None = None, figure_dirs=(), pairs: dict | None = None) -> Matrix:
    """The matrix of ``records``: columns in the order models first appear, rows in paper/section/claim/corpus
    order, except that a claim which is another reading of one present (``pairs``: claim id -> that claim's id;
    default the catalog's ``pairs`` keys, e.g. the norms family's ||alpha f|| rows of Clark's weight claims) follows
    it in its group. ``reference``: a model (full name, short name or slug) whose values the others' Δ is taken
    against."""
    from ..claims.catalog import claim_pairs

    cols: dict[tuple[str, bool], Column] = {}
    rows: dict[tuple, dict] = {}
    for r in records:
        col = Column(r["model"], r.get("model_slug") or r["model"], bool(r.get("negative_control")))
        cols.setdefault(col.key, col)
        key = (r["paper"], r["section"], r["claim_id"], r["corpus"])
        comparison = r.get("comparison", "")
        if col.control:  # the control's wording ("NOT > 0.5 (negative control)"): the row shows the claim's
            comparison = comparison.removeprefix("NOT ").removesuffix(" (negative control)")
        row = rows.setdefault(key, {"paper": r["paper"], "section": r["section"], "claim": r["claim_id"],
                                    "corpus": r["corpus"], "statement": r.get("statement", ""),
                                    "reference": r.get("reference", ""), "comparison": comparison, "cells": {}})
        if col.key in row["cells"] and row["cells"][col.key] != r:
            raise BenchError(f"claim {r['claim_id']} on {r['corpus']} for {r['model']} appears twice with different "
                             f"values (measured {row['cells'][col.key].get('measured')} and {r.get('measured')}): "
                             f"give each model and claim once")
        row["cells"][col.key] = r
    columns = _labels(list(cols.values()))
    ref = None
    if reference is not None:
        found = [c for c in columns if not c.control and reference in (c.model, c.slug, c.label)]
        if not found:
            raise BenchError(f"--reference {reference!r}: not one of the models ({', '.join(c.label for c in columns)})")
        ref = found[0]
    pairs = claim_pairs() if pairs is None else pairs
    first = {}  # claim id -> the key of its first row
    for k in sorted(rows):
        first.setdefault(k[2], k)
    order = {}
    for k, row in rows.items():
        partner = first.get(pairs.get(k[2]))
        if partner is None or partner[2] == k[2]:
            order[k] = (*k[:3], 0, k[3], "")
        else:  # after every row of the claim it pairs with, in that claim's group
            order[k] = (*partner[:3], 1, k[3], k[2])
            row["pairs"], row["group"] = partner[2], (rows[partner]["paper"], rows[partner]["section"])
            theirs = sorted(j[3] for j in rows if j[2] == partner[2])
            if k[3] not in theirs:  # another corpus than its partner's rows: the row says so (issue 62)
                row["pair_corpus"] = ", ".join(theirs)
    out = Matrix(columns, [rows[k] for k in sorted(rows, key=order.get)], ref)
    out.figures = _figures_by_model(columns, figure_dirs)
    return out


def _figures_by_model(columns: list[Column], figure_dirs) -> dict:
    """Each PNG of the reports' figures folders under the model whose slug its name holds (the longest such slug:
    ``random-<slug>`` is the twin's, not the model's); figures of no single model are left out."""
    found: dict[tuple[str, bool], list[Path]] = {}
    slugs = sorted({c.slug for c in columns}, key=len, reverse=True)
    by_slug = {c.slug: c for c in columns if not c.control} | {c.slug: c for c in columns if c.control}
    seen = set()
    for d in figure_dirs:
        for png in sorted(Path(d).glob("*.png")):
            if png.name in seen:
                continue
            seen.add(png.name)
            stem = f"-{png.stem}-"
            slug = next((s for s in slugs if f"-{s}-" in stem), None)
            if slug is not None:
                found.setdefault(by_slug[slug].key, []).append(png)
    return found


# ---- cells -------------------------------------------------------------------------------------------------------

def _num(v) -> str:
    return "—" if v is None else f"{v:.4g}"


def cell_text(r: dict | None, ref: dict | None = None) -> str:
    """``✓ 0.512 [0.48, 0.54] 3-7 (n=1000) Δ +0.02``: mark, value, 95% interval, head, n, Δ to the reference."""
    if r is None:
        return ""
    v = verdict_of(r)
    if v == "skipped" or r.get("measured") is None:
        return MARKS[v]
    text = f"{MARKS[v]} {_num(r['measured'])}"
    if r.get("interval"):
        lo, hi = r["interval"]
        text += f" [{_num(lo)}, {_num(hi)}]"
    if r.get("head"):
        text += f" {r['head']}"
    text += f" (n={r.get('n')})"
    if ref is not None and ref is not r and ref.get("measured") is not None and verdict_of(ref) != "skipped":
        text += f" Δ {r['measured'] - ref['measured']:+.3g}"
    return text


def model_summary(m: Matrix) -> list[dict]:
    out = []
    for c in m.columns:
        counts = {"holds": 0, "does not hold": 0, "inconclusive": 0, "not judged": 0, "skipped": 0}
        for row in m.rows:
            r = row["cells"].get(c.key)
            if r is not None:
                counts[verdict_of(r)] += 1
        note = " (negative control: should hold 0)" if c.control else ""
        label = c.label.removesuffix(" (control)") if c.control else c.label
        out.append({"model": label, "holds": counts["holds"], "does not hold": counts["does not hold"],
                    "inconclusive": counts["inconclusive"], "not judged": counts["not judged"],
                    "skipped": counts["skipped"],
                    "rows": sum(counts.values()), "note": note})
    return out


def claim_summary(row: dict, columns: list[Column]) -> str:
    """On how many of the models (controls apart) that measured it the claim holds: ``2/3``."""
    judged = [row["cells"][c.key] for c in columns if not c.control and c.key in row["cells"]
              and verdict_of(row["cells"][c.key]) not in ("skipped", "not judged")]
    if not judged:
        return "–"
    held = sum(1 for r in judged if verdict_of(r) == "holds")
    return f"{held}/{len(judged)}"


# ---- Markdown and CSV ----------------------------------------------------------------------------------------------

def _md_escape(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def row_group(row: dict) -> tuple[str, str]:
    """The (paper, section) a row is shown under: its own, or that of the claim it pairs with."""
    return row.get("group") or (row["paper"], row["section"])


def claim_label(row: dict) -> str:
    """The claim id; a paired row's says it is another reading of the row above it, and whose, and where it reads
    another corpus than that row, which (the norms family reads the Kobayashi authors' token types 0 then 1,
    ``wikitext2_types01``, beside Clark's ``wikitext2``: docs/families/norms.md)."""
    if not row.get("pairs"):
        return row["claim"]
    other = f"; on {row['corpus']}, {row['pairs']} on {row['pair_corpus']}" if row.get("pair_corpus") else ""
    return f"↳ {row['claim']} ({row['paper']}, {row['section']}{other})"


def markdown(m: Matrix) -> str:
    head = ["claim", "data", "paper's reference", "needs"] + [c.label for c in m.columns] + ["holds on"]
    lines = ["# bertattn-bench: claims × models", "",
             f"{len(m.rows)} claim rows × {len(m.columns)} models. " + LEGEND + "."
             + (f" Δ: value minus {m.reference.label}'s." if m.reference else ""), ""]
    lines += ["## Summary per model", "", "| model | holds | does not hold | inconclusive | not judged | skipped | rows |",
              "|---|---|---|---|---|---|---|"]
    lines += [f"| {_md_escape(s['model'])}{s['note']} | {s['holds']} | {s['does not hold']} | {s['inconclusive']} "
              f"| {s['not judged']} | {s['skipped']} | {s['rows']} |" for s in model_summary(m)]
    current = None
    for row in m.rows:
        group = row_group(row)
        if group != current:
            if current is None or group[0] != current[0]:
                lines += ["", f"## {group[0]}"]
            lines += ["", f"### {group[0]}, {group[1]}", "", "| " + " | ".join(map(_md_escape, head)) + " |",
                      "|" + "---|" * len(head)]
            current = group
        ref = row["cells"].get(m.reference.key) if m.reference else None
        cells = [claim_label(row), row["corpus"], row["reference"], row["comparison"]]
        cells += [cell_text(row["cells"].get(c.key), ref if not c.control else None) for c in m.columns]
        cells.append(claim_summary(row, m.columns))
        lines.append("| " + " | ".join(_md_escape(x) for x in cells) + " |")
    return "\n".join(lines) + "\n"


def csv_text(m: Matrix) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    head = ["paper", "section", "claim", "corpus", "reference", "comparison"]
    for c in m.columns:
        head += [f"{c.label}: {k}" for k in ("verdict", "measured", "ci_low", "ci_high", "n", "head", "delta")]
    w.writerow(head + ["holds on"])
    for row in m.rows:
        ref = row["cells"].get(m.reference.key) if m.reference else None
        out = [row["paper"], row["section"], row["claim"], row["corpus"], row["reference"], row["comparison"]]
        for c in m.columns:
            r = row["cells"].get(c.key)
            if r is None:
                out += [""] * 7
                continue
            lo, hi = r.get("interval") or (None, None)
            delta = (r["measured"] - ref["measured"] if ref is not None and not c.control and ref is not r
                     and r.get("measured") is not None and ref.get("measured") is not None else None)
            out += [verdict_of(r), r.get("measured"), lo, hi, r.get("n"), r.get("head") or "", delta]
        w.writerow(["" if v is None else v for v in out] + [claim_summary(row, m.columns)])
    return buf.getvalue()


def json_doc(m: Matrix) -> dict:
    """``matrix.json``: the versioned document of the table (schema ``bertattn-bench/matrix``): columns, and per row
    the cells by column label with the verdict and each number in its own field."""
    from ..base.documents import envelope

    rows = []
    for row in m.rows:
        ref = row["cells"].get(m.reference.key) if m.reference else None
        cells = {}
        for c in m.columns:
            r = row["cells"].get(c.key)
            if r is None:
                continue
            lo, hi = r.get("interval") or (None, None)
            delta = (r["measured"] - ref["measured"] if ref is not None and not c.control and ref is not r
                     and r.get("measured") is not None and ref.get("measured") is not None else None)
            cells[c.label] = {"verdict": verdict_of(r), "value": r.get("measured"), "ci_low": lo, "ci_high": hi,
                              "n": r.get("n"), "head": r.get("head"), "delta": delta}
        rows.append({"paper": row["paper"], "section": row["section"], "claim": row["claim"], "corpus": row["corpus"],
                     "reference": row["reference"], "comparison": row["comparison"], "cells": cells,
                     "holds_on": claim_summary(row, m.columns)})
    return envelope("matrix", {
        "reference": m.reference.label if m.reference else None,
        "columns": [{"label": c.label, "model": c.model, "slug": c.slug, "control": c.control} for c in m.columns],
        "rows": rows, "summary": model_summary(m)})
