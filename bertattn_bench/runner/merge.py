"""Joining the claims reports and baseline fragments of a split run (``bertattn-bench merge``): one report, one
matrix, one set of baselines, with the provenance of every part. The command translates its arguments and prints
what :func:`merge_reports` returns."""
from __future__ import annotations

from pathlib import Path

from ..base.errors import BenchError


def copy_figures(inputs: list[Path], out: Path, notes: list[str]) -> list[Path]:
    """Every ``IN/figures/*.png`` into ``OUT/figures`` (a name in two parts keeps the first copy; ``notes`` says so)."""
    import shutil

    copied: dict[str, Path] = {}
    for folder in inputs:
        for png in sorted((folder / "figures").glob("*.png")):
            if png.name in copied:
                if copied[png.name].read_bytes() != png.read_bytes():
                    notes.append(f"note: {png} differs from {copied[png.name]}'s copy of {png.name}: kept the first")
                continue
            (out / "figures").mkdir(parents=True, exist_ok=True)
            dest = out / "figures" / png.name
            shutil.copyfile(png, dest)
            copied[png.name] = png
    return sorted(out / "figures" / n for n in copied)


def cross_model_claims() -> set[str]:
    """Claims that read another model of the same run (``inputs = [{model = "other"}]``)."""
    from ..claims.catalog import load_claims

    return {c.id for c in load_claims() if any(i.get("model") == "other" for i in c.inputs)}


def merge_reports(inputs: list[Path], out: Path, reference: str | None, command: str,
                  self_contained: bool = False) -> tuple[list[Path], list[str]]:
    """The merged report, matrix and baselines in ``out``: (the files written, the lines to print). A BenchError
    names a part that cannot be merged (another code, catalog or limit; ``out`` among the inputs).
    ``self_contained``: the matrix page embeds its figures (else links them by relative path)."""
    from ..claims.baselines import write_merged_baselines
    from ..report import matrix as mx
    from ..report.claims_report import (
        check_same_measurement,
        merge_records,
        outcome_from_record,
        read_run,
        write_report,
    )
    from ..report.matrix_page import write_matrix

    if out.resolve() in {p.resolve() for p in inputs}:
        raise BenchError(f"merge: OUT {out} is one of the inputs: give a new folder")
    runs = {str(p): read_run(p) for p in inputs}
    data = check_same_measurement(runs)
    records = merge_records({str(p): mx.read_records(p) for p in inputs})
    out.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []
    figures = copy_figures(inputs, out, lines)
    first = next(iter(runs.values()))
    provenance = {**{k: first[k] for k in ("format", "version", "code", "references", "limit")},
                  "data": data, "models": sorted({m for r in runs.values() for m in r.get("models", [])}),
                  "command": command,
                  "parts": [{"input": name, **{k: v for k, v in r.items() if k != "data"}} for name, r in runs.items()]}
    paths = write_report([outcome_from_record(r) for r in records], out, figures, provenance, matrix=False)
    # the records as written (report order), so the columns come in the order one combined run gives them
    m = mx.build(mx.read_records(out), reference, [out / "figures"])
    paths += write_matrix(m, out, self_contained=self_contained)
    fragments = [f for p in inputs for f in sorted((p / "baselines").glob("*.json"))]
    paths += write_merged_baselines(fragments, out / "baselines") if fragments else []
    lines.append(f"merged {len(inputs)} part(s): {len(records)} claim results, {len(m.columns)} model column(s), "
                 f"{len(fragments)} baseline fragment(s)")
    across = cross_model_claims() & {r["claim_id"] for r in records}
    if across:
        lines.append(f"note: {', '.join(sorted(across))} compare(s) the models of one part (claim inputs model = "
                     f"\"other\"): in a split by model they are judged against (or skipped for lack of) the models of "
                     f"the same part only")
    return paths, lines + [f"  {p}" for p in paths]
