"""The claim-vs-measured table: terminal, Markdown, CSV and JSON (one record per claim, model and corpus)."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from tabulate import tabulate

from .claims import ClaimOutcome


def _measured(o: ClaimOutcome) -> str:
    if o.measured is None:
        return "—"
    head = f" [{o.head}]" if o.head else ""
    return f"{o.measured:.4g} {o.unit}".strip() + head


def _check(o: ClaimOutcome) -> str:
    if o.skipped:
        return "skip"
    if o.baseline_ok is None:
        return "PASS" if o.passed else "FAIL"
    if o.baseline_model and o.baseline_model != o.model:  # --compare-to: judged against another model
        verdict = "ok" if o.baseline_ok else "REGRESSION"
        held = "held" if o.baseline_holds else "did not hold"
        delta = f", Δ {o.delta:+.3g}" if o.delta is not None else ""
        return f"{verdict} (A={_num(o.baseline)}, {held}{delta})"
    return ("PASS" if o.baseline_ok else "FAIL") + f" (baseline {_num(o.baseline)})"


def _num(value) -> str:
    return "none" if value is None else f"{value:.4g}"


def in_report_order(outcomes: list[ClaimOutcome]) -> list[ClaimOutcome]:
    """Paper, section, claim, model, corpus: the same order whatever order the (xdist) workers finished in."""
    return sorted(outcomes, key=lambda o: (o.paper, o.section, o.claim_id, o.model, o.corpus, o.negative_control))


def rows(outcomes: list[ClaimOutcome]) -> list[dict]:
    ordered = in_report_order(outcomes)
    return [{
        "claim": o.claim_id, "section": o.section, "model": o.model, "data": o.corpus,
        "reference (paper)": o.reference, "needs": o.comparison, "measured": _measured(o),
        "n": f"{o.n} {o.n_unit}", "verdict": o.verdict if not o.skipped else f"skipped: {o.skipped}",
        "check": _check(o),
    } for o in ordered]


def terminal_table(outcomes: list[ClaimOutcome], width: int = 46) -> str:
    table = rows(outcomes)
    for r in table:
        for k in ("reference (paper)", "verdict"):
            if len(r[k]) > width:
                r[k] = r[k][: width - 1] + "…"
    held = sum(1 for o in outcomes if o.holds)
    judged = sum(1 for o in outcomes if o.holds is not None)
    passed = sum(1 for o in outcomes if o.passed)
    summary = (f"\n{held} of {judged} claims hold on the measured models; "
               f"{passed} of {len(outcomes)} checks pass; {sum(1 for o in outcomes if o.skipped)} skipped")
    return tabulate(table, headers="keys", tablefmt="github") + summary


def markdown_page(outcomes: list[ClaimOutcome], directory: Path, figures=()) -> str:
    """One page: the table, each claim's detail (heads, per-layer values, baselines) with its n, the figures."""
    details = "\n".join(f"- **{o.claim_id}** ({o.model}, {o.corpus}, n={o.n} {o.n_unit}): {o.statement} "
                        f"{o.detail or o.skipped or ''}" for o in outcomes)
    page = ("# bertattn-bench: claims vs measured\n\n" + tabulate(rows(outcomes), headers="keys", tablefmt="github")
            + "\n\n## Details\n\n" + details + "\n")
    if figures:
        links = [f"![{Path(f).stem}]({Path(f).relative_to(directory).as_posix()})" for f in figures]
        page += "\n## Figures\n\n" + "\n\n".join(links) + "\n"
    return page


def write_report(outcomes: list[ClaimOutcome], directory: Path, figures=()) -> list[Path]:
    """``claims.md`` (one page), ``claims.csv`` and ``claims.json`` (a list, one record per claim/model/corpus)."""
    directory.mkdir(parents=True, exist_ok=True)
    outcomes = in_report_order(outcomes)
    records = [o.record() | {"verdict": o.verdict} for o in outcomes]
    json_path = directory / "claims.json"
    json_path.write_text(json.dumps(records, indent=2, ensure_ascii=False), encoding="utf-8")
    csv_path = directory / "claims.csv"
    pd.DataFrame.from_records(records).to_csv(csv_path, index=False)
    md_path = directory / "claims.md"
    md_path.write_text(markdown_page(outcomes, directory, figures), encoding="utf-8")
    return [md_path, csv_path, json_path]
