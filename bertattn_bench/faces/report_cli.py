"""The command's report sub-commands: ``diff`` (what moved between two recorded baselines), ``merge`` (the claims
reports of a split run joined), ``matrix`` (the claims x models table of any claims reports) and ``summary`` (the
Markdown job summary of a claims report). Each returns the
command's exit status: 0, 1 (``diff``: something under --fail-on moved), 4 (bad usage or input, one line)."""
from __future__ import annotations

import sys
from pathlib import Path

from .cli_parsing import PROG, USAGE_ERROR, Parser, checkout_root


def diff_main(argv: list[str]) -> int:
    """0: nothing that fails under --fail-on moved; 1: something did (listed); 4: bad usage or input."""
    from ..base.errors import BenchError
    from ..claims.baselines import FAIL_ON, baseline_diff, diff_failures, diff_markdown, read_baseline

    parser = Parser(prog=f"{PROG} diff", description="what moved between two recorded baselines")
    parser.add_argument("old", help="baseline JSON, or REV:PATH (e.g. HEAD~3:reference_numbers/baselines/X.json)")
    parser.add_argument("new", help="baseline JSON, or REV:PATH")
    parser.add_argument("--prefix", default="", help="only claim ids starting with this (e.g. clark.)")
    parser.add_argument("--fail-on", default="flips+values", choices=FAIL_ON,
                        help="what exits 1: a flipped verdict, a value outside its claim's tolerance, both (default), "
                             "any moved entry, or never")
    args = parser.parse_args(argv)
    try:
        rows = baseline_diff(read_baseline(args.old, checkout_root()),
                             read_baseline(args.new, checkout_root()), args.prefix)
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


def report_parser(command: str, what: str) -> Parser:
    parser = Parser(prog=f"{PROG} {command}", description=what)
    parser.add_argument("out", help="output folder (created)")
    parser.add_argument("inputs", nargs="+", help="claims-report folders (--claims-report DIR of each part)")
    parser.add_argument("--reference", default=None, help="model whose values the others' delta is taken against "
                                                          "(full name, short name as in the table, or slug)")
    parser.add_argument("--self-contained", action="store_true", help="embed the figures in matrix.html")
    return parser


def merge_main(argv: list[str]) -> int:
    from ..base.errors import BenchError
    from ..runner.merge import merge_reports

    args = report_parser("merge", "join the claims reports and baseline fragments of a split run").parse_args(argv)
    try:
        _, lines = merge_reports([Path(p) for p in args.inputs], Path(args.out), args.reference,
                                 "python -m bertattn_bench merge " + " ".join(argv), self_contained=args.self_contained)
    except BenchError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return USAGE_ERROR
    print("\n".join(lines))
    return 0


def matrix_main(argv: list[str]) -> int:
    from ..base.errors import BenchError
    from ..report import matrix as mx
    from ..report.claims_report import MUST_MATCH, RUN_FILE, read_run
    from ..report.matrix_page import write_matrix

    args = report_parser("matrix", "the claims x models table of any claims reports").parse_args(argv)
    try:
        records = []
        versions = set()
        for p in map(Path, args.inputs):
            records += mx.read_records(p)
            run = Path(p) / RUN_FILE
            if run.is_file():
                doc = read_run(Path(p))  # checked against its schema: a malformed one is exit 4 naming it
                versions.add(tuple(doc.get(k) for k in MUST_MATCH))
        dirs = [Path(p) / "figures" for p in args.inputs if Path(p).is_dir()]
        paths = write_matrix(mx.build(records, args.reference, dirs), Path(args.out),
                                self_contained=args.self_contained)
    except BenchError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return USAGE_ERROR
    if len(versions) > 1:
        print(f"note: the reports were measured with {len(versions)} different (code, catalog, limit) versions; "
              f"the columns are not one measurement (merge refuses this)")
    for p in paths:
        print(f"  {p}")
    return 0


def summary_main(argv: list[str]) -> int:
    """The Markdown job summary of a claims report: printed, appended to --out (default ``$GITHUB_STEP_SUMMARY`` where
    set); with --fail, 1 when a claim was lost, a check failed or the report is incomplete; 4: unreadable."""
    from ..base.errors import BenchError
    from ..base.settings import SUMMARY_ENV, env
    from ..report.claims_report import read_json
    from ..report.matrix import read_records
    from ..report.summary import failed_checks, job_summary, lost_claims, model_label, write_job_summary

    parser = Parser(prog=f"{PROG} summary", description="the Markdown job summary of a claims report")
    parser.add_argument("report", help="a claims report folder (--claims-report DIR) or its claims.json")
    parser.add_argument("--out", default=None, help=f"append the summary here (default ${SUMMARY_ENV} where set)")
    parser.add_argument("--title", default="bertattn-bench: claims vs measured")
    parser.add_argument("--fail", action="store_true", help="exit 1 when a claim was lost or a check failed")
    args = parser.parse_args(argv)
    try:
        records = read_records(Path(args.report))
        path = Path(args.report)
        doc = read_json(path / "claims.json" if path.is_dir() else path, "")
        missing = doc.get("missing") if isinstance(doc, dict) else None
    except BenchError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return USAGE_ERROR
    text = job_summary(records, args.title, missing)
    print(text)
    write_job_summary(text, args.out or env(SUMMARY_ENV))
    lost, failed = lost_claims(records), failed_checks(records)
    if args.fail and (lost or failed or missing):
        if lost:
            print("LOST CLAIMS: " + ", ".join(f"{r['claim_id']}@{r['corpus']}" for r in lost), file=sys.stderr)
        rest = [r for r in failed if r not in lost]
        if rest:
            print("FAILED CHECKS: " + ", ".join(f"{r['claim_id']}@{r['corpus']} ({model_label(r)})" for r in rest),
                  file=sys.stderr)
        if missing:
            print(f"INCOMPLETE: {len(missing)} claim(s)/test(s) not run", file=sys.stderr)
        return 1
    return 0
