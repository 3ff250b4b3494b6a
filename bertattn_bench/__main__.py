"""Command line: ``python -m bertattn_bench record|compare|run`` (thin wrappers over the pytest benchmarks).

  record  [--model M] [pytest args]           record M's baseline into reference_numbers/baselines/
  compare --model B --against A [pytest args] run B, judged against A's recorded baseline: exit 1 on a regression
  run     [pytest args]                       the claim benchmarks (same as `pytest benchmarks`)
  diff    OLD NEW [--prefix P]                what moved between two recorded baselines (a JSON path, or
                                              REV:PATH for a git revision's copy): a Markdown table of every
                                              claim@corpus whose value, n or verdict changed
  merge   OUT IN... [--reference M]           join the claims reports of a split run (each IN a --claims-report
                                              folder, its baseline fragments in IN/baselines/): OUT/claims.*,
                                              OUT/matrix.*, OUT/baselines/<slug>.json; refuses parts recorded with
                                              other code, claims catalog, --limit or data
  matrix  OUT IN... [--reference M]           the claims x models table (Markdown, CSV, HTML) of any claims
                                              reports (e.g. checkpoints along training), without merge's checks
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


USAGE_ERROR = 4  # pytest's exit status for a usage error: the options are checked there with the same status


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and pytest's usage-error status, not argparse's usage block and 2
        self.exit(USAGE_ERROR, f"ERROR: {self.prog}: {message} (see --help)\n")


def pytest_args(argv: list[str] | None = None) -> list[str]:
    """The pytest command line a ``record|compare|run`` invocation stands for."""
    parser = _Parser(prog="python -m bertattn_bench", description=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["record", "compare", "run", "diff", "merge", "matrix"])
    parser.add_argument("--against", help="compare: model A (name, slug or baseline JSON)")
    args, rest = parser.parse_known_args(argv)
    out = [str(ROOT / "benchmarks"), "-p", "no:cacheprovider", "--rootdir", str(ROOT), *rest]
    if args.command == "record":
        out.append("--record-baseline")
    elif args.command == "compare":
        if not args.against:
            parser.error("compare needs --against MODEL_A")
        out += ["--compare-to", args.against]
    return out


def diff_main(argv: list[str]) -> int:
    """0: nothing that fails under --fail-on moved; 1: something did (listed); 4: bad usage or input."""
    from .baselines import FAIL_ON, baseline_diff, diff_failures, diff_markdown, read_baseline
    from .errors import BenchError

    parser = _Parser(prog="python -m bertattn_bench diff", description="what moved between two recorded baselines")
    parser.add_argument("old", help="baseline JSON, or REV:PATH (e.g. HEAD~3:reference_numbers/baselines/X.json)")
    parser.add_argument("new", help="baseline JSON, or REV:PATH")
    parser.add_argument("--prefix", default="", help="only claim ids starting with this (e.g. clark.)")
    parser.add_argument("--fail-on", default="flips+values", choices=FAIL_ON,
                        help="what exits 1: a flipped verdict, a value outside its claim's tolerance, both (default), "
                             "any moved entry, or never")
    args = parser.parse_args(argv)
    try:
        rows = baseline_diff(read_baseline(args.old, ROOT), read_baseline(args.new, ROOT), args.prefix)
        failures = diff_failures(rows, args.fail_on)
    except BenchError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return USAGE_ERROR
    print(diff_markdown(rows))
    flips = sum(r["flipped"] for r in rows)
    print(f"\n{len(rows)} moved, {flips} verdict(s) changed")
    other = sum(1 for r in rows if not r.get("comparable", True))
    if other:
        print(f"not judged: {other} entr(y/ies) recorded with another --limit and another n")
    if failures:
        print(f"FAILED (--fail-on {args.fail_on}): {len(failures)} entr(y/ies)")
        for line in failures:
            print(f"  {line}")
        return 1
    return 0


def _report_parser(command: str, what: str) -> _Parser:
    parser = _Parser(prog=f"python -m bertattn_bench {command}", description=what)
    parser.add_argument("out", help="output folder (created)")
    parser.add_argument("inputs", nargs="+", help="claims-report folders (--claims-report DIR of each part)")
    parser.add_argument("--reference", default=None, help="model whose values the others' delta is taken against "
                                                          "(full name, short name as in the table, or slug)")
    return parser


def _copy_figures(inputs: list[Path], out: Path) -> list[Path]:
    """Every ``IN/figures/*.png`` into ``OUT/figures`` (a name in two parts keeps the first copy, and says so)."""
    import shutil

    copied: dict[str, Path] = {}
    for folder in inputs:
        for png in sorted((folder / "figures").glob("*.png")):
            if png.name in copied:
                if copied[png.name].read_bytes() != png.read_bytes():
                    print(f"note: {png} differs from {copied[png.name]}'s copy of {png.name}: kept the first")
                continue
            (out / "figures").mkdir(parents=True, exist_ok=True)
            dest = out / "figures" / png.name
            shutil.copyfile(png, dest)
            copied[png.name] = png
    return sorted(out / "figures" / n for n in copied)


def cross_model_claims() -> set[str]:
    """Claims that read another model of the same run (``inputs = [{model = "other"}]``)."""
    from .claims import load_claims

    return {c.id for c in load_claims() if any(i.get("model") == "other" for i in c.inputs)}


def merge_main(argv: list[str]) -> int:
    from . import matrix as mx
    from .baselines import write_merged_baselines
    from .errors import BenchError
    from .report import check_same_measurement, merge_records, outcome_from_record, read_run, write_report

    args = _report_parser("merge", "join the claims reports and baseline fragments of a split run").parse_args(argv)
    inputs, out = [Path(p) for p in args.inputs], Path(args.out)
    try:
        if out.resolve() in {p.resolve() for p in inputs}:
            raise BenchError(f"merge: OUT {out} is one of the inputs: give a new folder")
        runs = {str(p): read_run(p) for p in inputs}
        data = check_same_measurement(runs)
        records = merge_records({str(p): mx.read_records(p) for p in inputs})
        out.mkdir(parents=True, exist_ok=True)
        figures = _copy_figures(inputs, out)
        first = next(iter(runs.values()))
        provenance = {**{k: first[k] for k in ("format", "version", "code", "references", "limit")},
                      "data": data, "models": sorted({m for r in runs.values() for m in r.get("models", [])}),
                      "command": "python -m bertattn_bench merge " + " ".join(argv),
                      "parts": [{"input": name, **{k: v for k, v in r.items() if k != "data"}}
                                for name, r in runs.items()]}
        paths = write_report([outcome_from_record(r) for r in records], out, figures, provenance, matrix=False)
        # the records as written (report order), so the columns come in the order one combined run gives them
        m = mx.build(mx.read_records(out), args.reference, [out / "figures"])
        paths += mx.write_matrix(m, out)
        fragments = [f for p in inputs for f in sorted((p / "baselines").glob("*.json"))]
        paths += write_merged_baselines(fragments, out / "baselines") if fragments else []
    except BenchError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return USAGE_ERROR
    print(f"merged {len(inputs)} part(s): {len(records)} claim results, {len(m.columns)} model column(s), "
          f"{len(fragments)} baseline fragment(s)")
    across = cross_model_claims() & {r["claim_id"] for r in records}
    if across:
        print(f"note: {', '.join(sorted(across))} compare(s) the models of one part (claim inputs model = \"other\"): "
              f"in a split by model they are judged against (or skipped for lack of) the models of the same part only")
    for p in paths:
        print(f"  {p}")
    return 0


def matrix_main(argv: list[str]) -> int:
    from . import matrix as mx
    from .errors import BenchError
    from .report import MUST_MATCH, RUN_FILE

    args = _report_parser("matrix", "the claims x models table of any claims reports").parse_args(argv)
    try:
        records = []
        versions = set()
        for p in map(Path, args.inputs):
            records += mx.read_records(p)
            run = Path(p) / RUN_FILE
            if run.is_file():
                doc = json.loads(run.read_text(encoding="utf-8"))
                versions.add(tuple(doc.get(k) for k in MUST_MATCH))
        dirs = [Path(p) / "figures" for p in args.inputs if Path(p).is_dir()]
        paths = mx.write_matrix(mx.build(records, args.reference, dirs), Path(args.out))
    except BenchError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return USAGE_ERROR
    if len(versions) > 1:
        print(f"note: the reports were measured with {len(versions)} different (code, catalog, limit) versions; "
              f"the columns are not one measurement (merge refuses this)")
    for p in paths:
        print(f"  {p}")
    return 0


def main(argv: list[str] | None = None) -> int:
    import pytest

    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["diff"]:
        return diff_main(argv[1:])
    if argv[:1] == ["merge"]:
        return merge_main(argv[1:])
    if argv[:1] == ["matrix"]:
        return matrix_main(argv[1:])

    return int(pytest.main(pytest_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
