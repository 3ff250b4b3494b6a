"""The claim-vs-measured table: terminal, Markdown, CSV and JSON (one record per claim, model and corpus)."""
from __future__ import annotations

import os
from pathlib import Path

from tabulate import tabulate

from ..base.documents import read_json, short_model  # noqa: F401 (re-exported: report.short_model)
from ..claims.outcome import ClaimOutcome
from ..claims.verdicts import DOES_NOT_HOLD, HOLDS, INCONCLUSIVE, NOT_JUDGED, SKIPPED, VERDICTS, verdict_of


def _measured(o: ClaimOutcome) -> str:
    if o.measured is None:
        return "—"
    head = f" [{o.head}]" if o.head else ""
    noise = f" {o.interval_text}" if o.interval is not None else ""
    return f"{o.measured:.4g}{noise} {o.unit}".strip() + head


def _check(o: ClaimOutcome) -> str:
    if o.skipped:
        return "skip"
    if o.baseline_ok is None:
        return "PASS" if o.passed else "FAIL"
    if o.baseline_model and o.baseline_model != o.model:  # --compare-to: judged against another model
        verdict = "ok" if o.baseline_ok else "REGRESSION"
        held = {HOLDS: "held", DOES_NOT_HOLD: "did not hold", None: "held" if o.baseline_holds else "did not hold"}.get(
            o.baseline_verdict, o.baseline_verdict)  # inconclusive, not judged: as named
        delta = f", Δ {o.delta:+.3g}" if o.delta is not None else ""
        return f"{verdict} (A={_num(o.baseline)}, {held}{delta})"
    return ("PASS" if o.baseline_ok else "FAIL") + f" (baseline {_num(o.baseline)})"


def _num(value) -> str:
    return "none" if value is None else f"{value:.4g}"


def in_report_order(outcomes: list[ClaimOutcome], pairs: dict | None = None) -> list[ClaimOutcome]:
    """Paper, section, claim, model, corpus: the same order whatever order the (xdist) workers finished in; a claim
    that is another reading of one present (``pairs``: claim id -> that claim; default the catalog's ``pairs``, e.g.
    the norms family's ||alpha f|| rows of Clark's weight claims) comes right after that claim's rows, in its
    section, as the matrix shows them (issue 62)."""
    from ..claims.catalog import claim_pairs

    pairs = claim_pairs() if pairs is None else pairs
    home = {o.claim_id: (o.paper, o.section) for o in outcomes}

    def key(o):
        partner = pairs.get(o.claim_id)
        if partner in home and partner != o.claim_id:
            return (*home[partner], partner, 1, o.claim_id, o.model, o.corpus, o.negative_control)
        return (o.paper, o.section, o.claim_id, 0, "", o.model, o.corpus, o.negative_control)

    return sorted(outcomes, key=key)


def rows(outcomes: list[ClaimOutcome]) -> list[dict]:
    ordered = in_report_order(outcomes)
    return [{
        "claim": o.claim_id, "section": o.section, "model": o.model, "data": o.corpus,
        "reference (paper)": o.reference, "needs": o.comparison, "measured": _measured(o),
        "n": f"{o.n} {o.n_unit}", "verdict": o.verdict if not o.skipped else f"skipped: {o.skipped}",
        "check": _check(o),
    } for o in ordered]


TERMINAL_COLUMNS = ("claim", "model", "data", "measured", "n", "verdict", "check")
# when the table is wider than the terminal, cells are cut (with "…") first down to _PREFERRED, then to _MIN
# (which fits 80 columns); the widest excess goes first
_PREFERRED = {"claim": 30, "model": 14, "data": 14, "measured": 16, "n": 11, "verdict": 13, "check": 17}
_MIN_WIDTH = {"claim": 16, "model": 6, "data": 7, "measured": 8, "n": 6, "verdict": 13, "check": 6}


def _fit(table: list[dict], width: int) -> list[dict]:
    """Cut cells until the rows fit ``width`` columns in tabulate's "simple" format (two spaces between columns)."""
    head = {k: len(k) + 2 for k in TERMINAL_COLUMNS}  # tabulate makes a column at least its header + 2 wide
    widths = {k: max([head[k]] + [len(r[k]) for r in table]) for k in TERMINAL_COLUMNS}
    room = width - 2 * (len(widths) - 1)
    for floor in (_PREFERRED, _MIN_WIDTH):
        while sum(widths.values()) > room:
            k = max(widths, key=lambda k: widths[k] - max(floor[k], head[k]))
            if widths[k] <= max(floor[k], head[k]):
                break
            widths[k] -= 1
    return [{k: (v if len(v) <= widths[k] else v[: widths[k] - 1] + "…") for k, v in r.items()} for r in table]


def _terminal_check(o: ClaimOutcome) -> str:
    return _check(o).replace("(baseline ", "(base ")


def terminal_table(outcomes: list[ClaimOutcome], width: int = 120) -> str:
    """The compact table for the terminal (claim, model, data, measured, n, verdict, check) that fits ``width``
    columns, the skip reasons in full below it, and the counts per model (the random twin counted apart). The full
    table (section, the paper's reference, the comparison) is in the --claims-report files."""
    table = [{"claim": o.claim_id, "model": short_model(o.model), "data": o.corpus, "measured": _measured(o),
              "n": f"{o.n} {o.n_unit}", "verdict": verdict_of(o), "check": _terminal_check(o)}
             for o in in_report_order(outcomes)]
    lines = [tabulate(_fit(table, width), headers="keys", tablefmt="simple", disable_numparse=True)]
    reasons: dict[str, list[str]] = {}
    for o in in_report_order(outcomes):
        if o.skipped:
            reasons.setdefault(o.skipped, []).append(o.claim_id)
    for reason, ids in reasons.items():
        ids = list(dict.fromkeys(ids))
        lines.append(f"skipped {', '.join(ids)}: {reason}")
    lines.append("")
    lines += summary_lines(outcomes)
    return "\n".join(lines)


def failure_message(o: ClaimOutcome) -> str:
    """Why a claim's test failed, with its numbers (the pytest face's failure text)."""
    if o.baseline_ok is not None and o.baseline_model and o.baseline_model != o.model:
        return (f"{o.claim_id} regressed on {o.model} / {o.corpus}: it holds on {o.baseline_model} "
                f"(measured {_num(o.baseline)}) but not here: {o.measured:.4g} {o.unit} (n={o.n} {o.n_unit}), "
                f"needs {o.comparison}: {o.detail}")
    if o.baseline_ok is not None:
        return (f"{o.claim_id} on {o.model} / {o.corpus}: measured {o.measured:.4g} (n={o.n} {o.n_unit}, "
                f"{o.verdict}) but the recorded baseline is {_num(o.baseline)} "
                f"({'holds' if o.baseline_holds else 'does not hold'}), "
                f"{'verdict checked' if o.tolerance is None else f'tolerance {o.tolerance}'}"
                f"{' — failed: ' + o.check_failure if o.check_failure else ''}: {o.detail}")
    return (f"{o.claim_id} on {o.model} / {o.corpus}: {o.statement} — measured {o.measured:.4g} {o.unit} "
            f"(n={o.n} {o.n_unit}), needs {o.comparison}: {o.detail}")


def summary_lines(outcomes: list[ClaimOutcome]) -> list[str]:
    """Per model: how many claims hold and how many checks pass; the negative control (random twin) apart, since
    there a claim that holds is the failure."""
    groups: dict[tuple[bool, str], list[ClaimOutcome]] = {}
    for o in outcomes:
        groups.setdefault((o.negative_control, o.model), []).append(o)
    out = []
    for (control, model), group in sorted(groups.items()):
        count = {v: sum(1 for o in group if verdict_of(o) == v) for v in VERDICTS}
        held, unsure, skipped, unjudged = count[HOLDS], count[INCONCLUSIVE], count[SKIPPED], count[NOT_JUDGED]
        judged = [o for o in group if verdict_of(o) in (HOLDS, DOES_NOT_HOLD, INCONCLUSIVE)]
        passed = sum(1 for o in group if o.passed)
        if control:
            out.append(f"{model} (negative control): {held} of {len(judged)} learned-structure claims hold "
                       f"(should be 0)" + (f", {unsure} inconclusive (not shown to hold: pass)" if unsure else "")
                       + f"; {passed} of {len(group)} checks pass (each row checks that the claim does NOT "
                       f"hold on random weights)")
        else:
            out.append(f"{model}: {held} of {len(judged)} claims hold"
                       + (f", {len(judged) - held - unsure} do not, {unsure} inconclusive (the threshold inside the "
                          f"value's 95% interval)" if unsure else "")
                       + f"; {passed} of {len(group)} checks pass" + (f"; {skipped} skipped" if skipped else "")
                       + (f"; {unjudged} not judged (a trained model they read did not learn)" if unjudged else ""))
    return out


def version_notes(outcomes: list[ClaimOutcome], load=None) -> list[str]:
    """A note per model judged against its own recorded baseline when that baseline was measured with another
    torch or transformers version than this run (the values may then drift, within each claim's tolerance)."""
    import torch
    import transformers

    from ..claims.baselines import load_baseline

    load = load or load_baseline
    now = {"torch": torch.__version__, "transformers": transformers.__version__}
    notes = []
    for slug in sorted({o.model_slug for o in outcomes if o.baseline is not None and not o.negative_control
                        and (o.baseline_model in (None, o.model))}):
        recorded = (load(slug) or {}).get("provenance", {})
        differ = [f"{k} {recorded[k]} (this run: {now[k]})" for k in now if recorded.get(k) and recorded[k] != now[k]]
        if differ:
            notes.append(f"note: the baseline of {slug} was recorded with {', '.join(differ)}; values may drift "
                         f"(within each claim's tolerance)")
    return notes


def markdown_page(outcomes: list[ClaimOutcome], directory: Path, figures=()) -> str:
    """One page: the table, each claim's detail (heads, per-layer values, baselines) with its n, the figures."""
    details = "\n".join(f"- **{o.claim_id}** ({o.model}, {o.corpus}, n={o.n} {o.n_unit}): {o.statement} "
                        f"{o.detail or o.skipped or ''}" for o in outcomes)
    page = ("# bertattn-bench: claims vs measured\n\n" + tabulate(rows(outcomes), headers="keys", tablefmt="github")
            + "\n\n## Details\n\n" + details + "\n")
    if figures:
        # by name: the same page whether the figures come from one run or from the parts of a split one (merge)
        links = [f"![{Path(f).stem}]({Path(f).relative_to(directory).as_posix()})"
                 for f in sorted(figures, key=lambda f: Path(f).name)]
        page += "\n## Figures\n\n" + "\n\n".join(links) + "\n"
    return page


CSV_COLUMNS = ("claim_id", "paper", "section", "model", "model_slug", "corpus", "negative_control", "verdict", "holds",
               "inconclusive", "value", "unit", "ci_low", "ci_high", "margin", "n", "n_unit", "head", "baseline",
               "baseline_holds", "baseline_model", "delta", "tolerance", "baseline_ok", "passed", "check_failure",
               "skipped", "reference", "comparison", "statement", "data", "attn_implementation", "detail", "values")


def _csv_cell(v) -> str:
    import math

    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)  # shortest round-trip form: a number a spreadsheet reads
    if isinstance(v, (dict, list)):
        from ..base.documents import dumps

        return dumps(v, indent=None).strip()
    return str(v)


def csv_text(records: list[dict]) -> str:
    """``claims.csv``: one row per record, every number in its own column (value, ci_low, ci_high, n, baseline,
    delta, ...; empty where none), booleans ``true``/``false``, the metric's named values as one JSON cell."""
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for r in records:
        lo, hi = r.get("interval") or (None, None)
        row = {**r, "value": r.get("measured"), "ci_low": lo, "ci_high": hi}
        w.writerow([_csv_cell(row.get(k)) for k in CSV_COLUMNS])
    return buf.getvalue()


RUN_FILE = "run.json"
# the report's own entries: replaced by each write (anything else in the folder is kept)
REPORT_FILES = ("claims.md", "claims.csv", "claims.json", RUN_FILE, "matrix.md", "matrix.csv", "matrix.html",
                "matrix.json", "figures")


def incomplete_banner(missing: list[str]) -> str:
    shown = ", ".join(missing[:20]) + (f" and {len(missing) - 20} more" if len(missing) > 20 else "")
    return (f"> **INCOMPLETE REPORT**: the run stopped (or was limited) before {len(missing)} selected claim(s)/test(s) "
            f"ran: {shown}. The table below holds only what ran.\n\n")


def write_report(outcomes: list[ClaimOutcome], directory: Path, figures=(), provenance: dict | None = None,
                 matrix: bool = True, missing: list[str] | None = None, self_contained: bool = False) -> list[Path]:
    """``claims.md`` (one page), ``claims.csv`` and ``claims.json`` (a versioned document, ``records``: one per
    claim/model/corpus); with ``provenance`` (:func:`run_provenance`) ``run.json``, what ``merge`` checks before joining
    reports; with ``matrix`` the claims × models view (``matrix.md``/``.csv``/``.html``/``.json``).

    ``missing``: the claims/tests selected but not run (an interrupted run): ``claims.json`` and ``run.json`` say
    ``"complete": false`` and list them, ``claims.md`` opens with a banner. The folder is written atomically: the
    files go to a sibling temporary folder which then replaces ``directory``, so an interrupted write leaves the
    previous report whole, and figures of earlier runs not in ``figures`` are gone (other entries of the folder, e.g.
    ``baselines/``, are kept). ``figures`` must lie under ``directory`` (they are carried over). ``self_contained``:
    ``matrix.html`` embeds the figures (else it links them, ``figures/NAME.png``)."""
    import shutil

    from ..base.documents import envelope, remove_stale_temps, write_json

    directory = Path(directory)
    final = directory.resolve()
    final.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(final.parent)  # a killed run's half-written report folder
    tmp = final.with_name(f".{final.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    missing = list(missing or [])
    outcomes = in_report_order(outcomes)
    records = [o.record() | {"verdict": o.verdict} for o in outcomes]
    state = {"complete": not missing, "missing": missing}
    write_json(tmp / "claims.json", envelope("claims", {**state, "records": records}))
    (tmp / "claims.csv").write_text(csv_text(records), encoding="utf-8")
    figures = [Path(f) for f in figures]
    kept = []
    for f in figures:  # carried into the new folder under the same relative path
        rel = f.resolve().relative_to(final)
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, tmp / rel)
        kept.append(directory / rel)
    page = markdown_page(outcomes, directory, kept) + guard_section((provenance or {}).get("trained_models"))
    (tmp / "claims.md").write_text(("" if not missing else incomplete_banner(missing)) + page, encoding="utf-8")
    names = ["claims.md", "claims.csv", "claims.json"]
    if provenance is not None:
        write_json(tmp / RUN_FILE, envelope("run", {**provenance, **state}))
        names.append(RUN_FILE)
    if matrix:
        from ..base import documents
        from . import matrix as mx
        from .matrix_page import write_matrix

        folders = sorted({Path(f).parent for f in kept})
        m = mx.build(documents.loads(documents.dumps(records)), figure_dirs=[tmp / f.relative_to(directory)
                                                                              for f in folders])
        names += [p.name for p in write_matrix(m, tmp, self_contained=self_contained)]
    if final.is_dir():  # keep what is not the report's own (e.g. baselines/ recorded into the folder)
        for entry in final.iterdir():
            if entry.name not in REPORT_FILES and not (tmp / entry.name).exists():
                os.replace(entry, tmp / entry.name)
    old = final.with_name(f".{final.name}.old{os.getpid()}")
    if final.exists():
        os.replace(final, old)
    os.replace(tmp, final)
    shutil.rmtree(old, ignore_errors=True)
    return [directory / n for n in names]


# ---- what a claims report was measured with, and joining reports of split runs (issue 28) ------------------------

RUN_FORMAT = "bertattn-bench run"
# what must be equal for two reports to be one measurement: the code, the claims catalog, the example limit
MUST_MATCH = ("code", "references", "limit")


def code_version() -> str:
    """sha256 over the package's and the benchmarks' Python sources (what computes and judges every value)."""
    from ..base.hashing import files_digest
    from ..base.resources import BENCHMARKS, PACKAGE_DIR, folder

    root = PACKAGE_DIR
    bench = folder(BENCHMARKS)
    files = sorted(p for p in root.rglob("*.py") if bench not in p.parents) + sorted(bench.glob("*.py"))
    return files_digest(files)[0][:16]


def references_version() -> str:
    """sha256 over the claims catalog (reference_numbers/*.toml: the papers' numbers, thresholds, tolerances)."""
    from ..base.hashing import files_digest
    from ..claims.catalog import REFERENCE_DIR

    return files_digest(sorted(REFERENCE_DIR.glob("*.toml")))[0][:16]


def trained_models(passes: list[dict]) -> list[dict]:
    """The learned-model guard's test of every trained model the run's passes read, once each."""
    seen, out = set(), []
    for p in passes:
        for t in p.get("learning") or ():
            if t["subject"] not in seen:
                seen.add(t["subject"])
                out.append(t)
    return out


def guard_section(trained: list[dict] | None) -> str:
    """``claims.md``'s list of the trained models the claims read and whether each learned (the learned-model
    guard: a claim reading one that did not is *not judged*)."""
    if not trained:
        return ""
    rows = "".join(f"| {t['subject']} | {'yes' if t['learned'] else '**no**: its claims are not judged'} | "
                   f"{t['test']} |\n" for t in trained)
    return ("\n## Trained models: did each learn?\n\nEvery claim that reads a trained model is judged only if the "
            "model learned (dev accuracy above its majority class, Pearson r > 0, a probe above itself untrained; "
            "one-sided, p < 0.01).\n\n| trained model | learned | test |\n|---|---|---|\n" + rows)


def run_provenance(passes: list[dict], limit: int | None, tier: str, command: str,
                   settings: dict | None = None) -> dict:
    """``run.json`` of a run: the versions ``merge`` must find equal (code, references, limit), the data each pass
    read (family/corpus -> files and checksum), and, for the reader, commit, command, date, models, versions.
    ``passes``: the run's pass summaries (:func:`runner.pass_summary`)."""
    import datetime as dt

    import torch
    import transformers

    from ..claims.baselines import git_commit

    return {
        "format": RUN_FORMAT, "version": 1,
        "code": code_version(), "references": references_version(), "limit": limit,
        "tier": tier,
        "data": dict(sorted({f"{p['family']}/{p['corpus']}": p.get("data_files") or p.get("data", "")
                             for p in passes}.items())),
        "models": sorted({p["model"] for p in passes}),
        "commit": git_commit(), "command": command,
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "torch": torch.__version__, "transformers": transformers.__version__,
        "devices": sorted({p["device"] for p in passes}),
        "trained_models": trained_models(passes),
        # a classifier judged as given (not fine-tuned here): its task and the digest of its weights, head included
        **({"as_given": given} if (given := {p["model"]: p["as_given"] for p in passes if p.get("as_given")}) else {}),
        **({"settings": settings} if settings else {}),  # every option that can change a value (RunOptions)
    }


def read_run(folder: Path) -> dict:
    from ..base.errors import BenchError

    path = Path(folder) / RUN_FILE
    doc = read_json(path, f"{folder}: no {RUN_FILE} (a claims report written by this version with --claims-report "
                          f"holds one; it says which code, catalog and data the values come from)")
    if not isinstance(doc, dict) or (doc.get("format") != RUN_FORMAT and doc.get("schema") != "bertattn-bench/run"):
        raise BenchError(f"{path}: not a {RUN_FORMAT} record")
    from ..base.documents import checked

    return checked(doc, "run", str(path))


def check_same_measurement(runs: dict[str, dict]) -> dict[str, str]:
    """Refuse (BenchError naming the inputs) runs that differ in code, claims catalog, example limit, or in the
    data of a family/corpus both read; else the union of their data."""
    from ..base.errors import BenchError

    first_name, first = next(iter(runs.items()))
    for name, run in runs.items():
        for key in MUST_MATCH:
            if run.get(key) != first.get(key):
                raise BenchError(f"cannot merge {name} with {first_name}: recorded with different {key} "
                                 f"({run.get(key)!r} vs {first.get(key)!r}; commits {run.get('commit')} and "
                                 f"{first.get('commit')}): re-run the parts with the same checkout and options")
    data: dict[str, tuple[str, str]] = {}
    for name, run in runs.items():
        for key, desc in run.get("data", {}).items():
            if key in data and data[key][1] != desc:
                raise BenchError(f"cannot merge {name} with {data[key][0]}: {key} read different data ({desc!r} vs "
                                 f"{data[key][1]!r})")
            data.setdefault(key, (name, desc))
    return {k: v[1] for k, v in sorted(data.items())}


def outcome_from_record(record: dict) -> ClaimOutcome:
    from dataclasses import fields

    names = {f.name for f in fields(ClaimOutcome)}
    return ClaimOutcome(**{k: v for k, v in record.items() if k in names})


def merge_records(sources: dict[str, list[dict]]) -> list[dict]:
    """One list of records from several reports: a (claim, model, corpus, control) measured in two of them must
    have the same record (else BenchError naming both)."""
    from ..base.errors import BenchError

    seen: dict[tuple, tuple[str, dict]] = {}
    for name, records in sources.items():
        for r in records:
            key = (r["claim_id"], r["model"], r["corpus"], bool(r.get("negative_control")))
            if key in seen and seen[key][1] != r:
                other = seen[key][0]
                raise BenchError(f"{name} and {other} both hold {r['claim_id']} on {r['corpus']} for {r['model']} "
                                 f"with different results (measured {r.get('measured')} vs "
                                 f"{seen[key][1].get('measured')}): give each (model, claim) to one part only")
            seen.setdefault(key, (name, r))
    return [r for _, r in seen.values()]
