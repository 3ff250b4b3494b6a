"""The Markdown job summary of a run (issue 37), for a CI job page (GitHub Actions' ``$GITHUB_STEP_SUMMARY``) or any
log: verdict counts per model, then the lost claims and failed checks (what broke the build), then the table.

Library: :func:`job_summary` (records of ``claims.json`` or :class:`ClaimOutcome` objects -> Markdown),
:func:`lost_claims`, :func:`failed_checks`, :func:`unbounded`, :func:`write_job_summary` (appends to the file the face
names: ``$GITHUB_STEP_SUMMARY`` where set). Its command is the face's: ``bertattn-bench summary REPORT_DIR [--out
FILE] [--fail]`` (faces/report_cli.py).
"""
from __future__ import annotations

from pathlib import Path

from ..claims.verdicts import HOLDS, INCONCLUSIVE, NOT_JUDGED, SKIPPED, VERDICTS, lost, verdict_of


def _records(items) -> list[dict]:
    out = []
    for x in items:
        if isinstance(x, dict):
            out.append(x)
        else:  # a ClaimOutcome
            out.append(x.record() | {"verdict": x.verdict})
    return out


def model_label(r: dict) -> str:
    from .claims_report import short_model

    return short_model(r["model"]) + (" (negative control)" if r.get("negative_control") else "")


def lost_claims(records) -> list[dict]:
    """The failed checks (:func:`failed_checks`: what broke the build) that are lost claims by the one rule
    (:func:`~bertattn_bench.claims.verdicts.lost`: clearly held on the baseline's model, ``compare``'s model A or the
    model's own recorded run, and here does not hold or is inconclusive); the negative control apart. A row lost by
    the rule whose check passed (an inconclusive verdict within its recorded value's tolerance, a ``--compare-fail-on
    never`` run) broke nothing and is not listed; a claim not judged here has no side (its failed check, if any, is
    listed by :func:`failed_checks`)."""
    return [r for r in failed_checks(records) if not r.get("negative_control") and lost(_baseline_side(r), r)]


def _baseline_side(r: dict) -> dict:
    """The recorded entry's verdict as :func:`verdict_of` reads it: ``baseline_verdict``, or for a report written
    before it was kept, ``baseline_holds`` read as a clear side."""
    verdict = r.get("baseline_verdict")
    if verdict is None:
        return {"holds": r.get("baseline_holds")} if r.get("baseline_holds") is not None else {"skipped": True}
    return {"holds": verdict == HOLDS, "inconclusive": verdict == INCONCLUSIVE, "not_judged": verdict == NOT_JUDGED,
            "skipped": verdict == SKIPPED, "measured": r.get("baseline")}


def _failed(r: dict) -> bool:
    """What fails the build: the runner's own ``passed`` (for the negative control, the random twin: a
    learned-structure claim that clearly holds there; an inconclusive row passes, whichever side its value is on)."""
    return r.get("passed") is False


def failed_checks(records) -> list[dict]:
    """Every record whose check fails the build (:func:`_failed`), lost claims included."""
    return [r for r in _records(records) if _failed(r)]


def unbounded(records) -> list[dict]:
    """Judged rows (a side given, the negative control apart) whose value carries no interval, no bounds and no
    ``exact`` reason: a verdict that says nothing of what was random in it (issue 61's audit; each should be none)."""
    return [r for r in _records(records) if not r.get("negative_control") and verdict_of(r) not in (SKIPPED, NOT_JUDGED)
            and not r.get("interval") and not r.get("exact")]


def _num(v) -> str:
    return "—" if v is None else (f"{v:.4g}" if isinstance(v, float) else str(v))


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _why(r: dict) -> str:
    if r.get("check_failure"):
        return r["check_failure"]
    if r.get("negative_control"):
        return "holds on random weights (a learned-structure claim must not)"
    if lost(_baseline_side(r), r):
        who = r.get("baseline_model") or "the baseline"
        return (f"held on {who} ({_num(r.get('baseline'))}), {verdict_of(r)} here ({_num(r.get('measured'))})")
    return "does not hold" if r.get("baseline") is None else "check failed"


def job_summary(items, title: str = "bertattn-bench: claims vs measured", missing: list[str] | None = None) -> str:
    """The Markdown summary: counts per model, lost claims and failed checks first, then every record."""
    records = _records(items)
    lines = [f"## {title}", ""]
    if missing:
        lines += [f"> **Incomplete run**: {len(missing)} selected claim(s)/test(s) did not run: "
                  + ", ".join(missing[:20]) + (" …" if len(missing) > 20 else ""), ""]
    groups: dict[str, list[dict]] = {}
    for r in records:
        groups.setdefault(model_label(r), []).append(r)
    lines += ["| model | " + " | ".join(VERDICTS) + " | checks passed | checks failed |",
              "|---|" + "---|" * (len(VERDICTS) + 2)]
    for model, group in sorted(groups.items()):
        counts = {v: sum(1 for r in group if verdict_of(r) == v) for v in VERDICTS}
        failed = sum(1 for r in group if _failed(r))
        passed = sum(1 for r in group if not r.get("skipped") and not _failed(r))
        lines.append(f"| {_cell(model)} | " + " | ".join(str(counts[v]) for v in VERDICTS) + f" | {passed} | {failed} |")
    lost, failed = lost_claims(records), failed_checks(records)
    lost_keys = {(r["claim_id"], r["model"], r["corpus"]) for r in lost}
    other = [r for r in failed if (r["claim_id"], r["model"], r["corpus"]) not in lost_keys]
    lines.append("")
    if lost:
        lines += [f"### Lost claims ({len(lost)})", ""]
        lines += [f"- **{r['claim_id']}** on {r['corpus']} ({_cell(model_label(r))}): {_cell(_why(r))}" for r in lost]
        lines.append("")
    if other:
        lines += [f"### Failed checks ({len(other)})", ""]
        lines += [f"- **{r['claim_id']}** on {r['corpus']} ({_cell(model_label(r))}): {_cell(_why(r))}" for r in other]
        lines.append("")
    if not lost and not failed:
        lines += ["No claim lost, every check passed.", ""]
    bare = unbounded(records)
    if bare:
        lines += [f"### Verdicts without an interval ({len(bare)})", "",
                  "Judged with no interval, bounds or `exact` reason: their side may move with the data sample or "
                  "the seed. " + ", ".join(sorted({f"{r['claim_id']}@{r['corpus']}" for r in bare})), ""]
    lines += ["### All claims", "", "| claim | model | data | measured | n | verdict | check |",
              "|---|---|---|---|---|---|---|"]
    order = sorted(records, key=lambda r: (not _failed(r), r.get("paper", ""), r.get("section", ""),
                                           r["claim_id"], r["model"], r["corpus"]))
    for r in order:
        check = "skip" if r.get("skipped") else ("FAIL" if _failed(r) else "pass")
        lines.append(f"| {_cell(r['claim_id'])} | {_cell(model_label(r))} | {_cell(r['corpus'])} | {_num(r.get('measured'))}"
                     f" | {_num(r.get('n'))} | {_cell(verdict_of(r))} | {check} |")
    return "\n".join(lines) + "\n"


def write_job_summary(text: str, path: str | Path | None = None) -> Path | None:
    """Append ``text`` to ``path`` (the faces pass ``$GITHUB_STEP_SUMMARY`` where set); nothing where none: None."""
    target = path
    if not target:
        return None
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "a", encoding="utf-8") as f:
        f.write(text if text.endswith("\n") else text + "\n")
    return target
