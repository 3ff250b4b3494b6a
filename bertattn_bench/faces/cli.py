"""The command line: ``bertattn-bench COMMAND`` (or ``python -m bertattn_bench COMMAND``).

  run     [options] [pytest args]             the claim benchmarks (the pytest face: one test per claim, the
                                              claims table at the end; the same as `pytest benchmarks` in a checkout)
  record  [--model M] [options]               run and record M's baseline (default: the package's baselines)
  compare --model B --against A [options]     run B judged against A's recorded baseline: exit 1 on a lost claim
  list    [-k EXPR] [--families]              the claims (or families with their corpora), no data or model needed
  diff    OLD NEW [--prefix P]                what moved between two recorded baselines (a JSON path, or
                                              REV:PATH for a git revision's copy)
  merge   OUT IN... [--reference M]           join the claims reports of a split run into one report, matrix and
                                              baseline; refuses parts measured with other code, catalog or data
  matrix  OUT IN... [--reference M]           the claims x models table (Markdown, CSV, HTML) of any claims reports
  summary REPORT [--out F] [--fail]           the Markdown job summary of a claims report (lost claims, failed checks)
  data    list|fetch|verify ...               the corpora the claims read (where available)

Options of run, record and compare (each also as --bertattn-NAME):
  -k EXPR                   select by paper, family, model, corpus or claim id (pytest -k), e.g. -k dependency
  --model NAME_OR_PATH      embedded (default), a folder, a hub name, random:<model>[@seed]; repeatable
  --data-dir DIR            the data folder (env BERTATTN_DATA_DIR), read as given; without it the default data
                            folder, first filled with the corpora the selection reads and it lacks
  --offline                 never download data: a missing corpus stops the run (env BERTATTN_OFFLINE=1)
  --tier quick|regression|full   the budget (default quick; env BERTATTN_TIER)
  --corpus FAMILY=A,B       corpora per family (see `list --families`)
  --limit N                 at most N examples per corpus (a smoke run)
  --device auto|cpu|cuda|cuda:N, --batch-size N
  --claims-report DIR       claims.md/.csv/.json, run.json, matrix.*, figures
  --self-contained          matrix.html embeds the figures (default: linked; also for merge and matrix)
  --record-baseline [DIR]   record the measured values as each model's baseline
  --compare-to MODEL_OR_JSON   judge against another model's recorded baseline
  --compare-fail-on lost|flips|never   what fails compare: a claim lost (default), any verdict flip, nothing
  --cache-dir DIR, --no-cache  finished passes and fine-tunes (env BERTATTN_CACHE_DIR; default ./.bertattn_cache)
  --time-cores              recompute and time every pass even when cached
Any other argument goes to pytest (e.g. -x, -q, --benchmark-disable, -n 2 with pytest-xdist).

Exit status: 0 every check passed; 1 a check failed (a value or verdict regressed); 4 bad usage or input
(an option, a data file, a model, a cache folder), one line naming it; 5 -k selected no test.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .cli_parsing import PROG, USAGE_ERROR, Parser, checkout_root  # noqa: F401 (USAGE_ERROR: the command's)

COMMANDS = ["run", "record", "compare", "list", "diff", "merge", "matrix", "summary", "data"]


def pytest_args(argv: list[str] | None = None) -> list[str]:
    """The pytest command line a ``run|record|compare`` invocation stands for."""
    from ..base.resources import BENCHMARKS, folder

    parser = Parser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                     add_help=False)
    parser.add_argument("command", choices=COMMANDS)
    parser.add_argument("--against", help="compare: model A (name, slug or baseline JSON)")
    args, rest = parser.parse_known_args(argv)
    root = checkout_root()
    # (the command imported this package before pytest starts: pytest's note that it cannot rewrite the plugin's
    # asserts is expected, and said once here instead of in every run's warnings)
    out = [str(folder(BENCHMARKS)), "-p", "bertattn_bench.faces.short_options",
           "-W", "ignore:Module already imported so cannot be rewritten:pytest.PytestAssertRewriteWarning",
           "--rootdir", str(root or Path.cwd()), *rest]
    if args.command == "record":
        out.append("--record-baseline")
    elif args.command == "compare":
        if not args.against:
            parser.error("compare needs --against MODEL_A")
        out += ["--compare-to", args.against]
    return out


def list_main(argv: list[str]) -> int:
    """The claims (id, paper, section, family, statement) or the families with their corpora: no data, no model."""
    from ..base.errors import BenchError
    from ..claims.catalog import load_claims
    from ..claims.registry import families
    from ..runner.plan import family_order, plan_id, selection

    parser = Parser(prog=f"{PROG} list", description="the claims of the catalog (no data or model needed)")
    parser.add_argument("-k", dest="select", default=None, help="a -k expression over paper-family-claim ids")
    parser.add_argument("--families", action="store_true", help="the families, their corpora and defaults")
    parser.add_argument("--json", action="store_true", help="as JSON")
    args = parser.parse_args(argv)
    try:
        matches = selection(args.select)
        if args.families:
            rows = [{"family": f.name, "default": f.default_corpus, "corpora": list(f.corpora)}
                    for f in (families()[n] for n in family_order())]
            rows = [r for r in rows if matches(r["family"])]
            print(json.dumps(rows, indent=1) if args.json else "\n".join(
                f"{r['family']:<12} default {r['default']:<14} corpora {', '.join(r['corpora'])}" for r in rows))
            return 0
        catalog = load_claims()
        rows = [{"id": c.id, "paper": c.paper, "section": c.section, "family": c.family, "learned": c.learned,
                 "catalog": c.catalog_id, "statement": c.statement} for name in family_order() for c in catalog
                if c.family == name and matches(plan_id(c.paper, c.family, claim_id=c.id))]
    except BenchError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return USAGE_ERROR
    if args.json:
        print(json.dumps(rows, indent=1, ensure_ascii=False))
    else:
        for r in rows:
            print(f"{r['id']:<40} {r['paper']:<22} {r['section']:<14} {r['statement']}")
        tested = {r["catalog"] for r in rows if r["catalog"]}
        # beyond the catalog's papers (Kobayashi et al.'s norms): counted apart, by paper, beside the catalog's claims
        papers = {c.paper for c in catalog if c.catalog_id}
        beyond = {}
        for r in rows:
            if not r["catalog"] and r["paper"] not in papers:
                beyond[r["paper"]] = beyond.get(r["paper"], 0) + 1
        added = sum(1 for r in rows if not r["catalog"]) - sum(beyond.values())
        print(f"{len(rows)} entr{'y' if len(rows) == 1 else 'ies'}: {len(tested)} claim(s) of the catalog"
              f"{' (with their variants)' if len(rows) - added - sum(beyond.values()) > len(tested) else ''}"
              f"{f', {added} addition(s) of the project' if added else ''}"
              + "".join(f", {n} of {paper}" for paper, n in sorted(beyond.items())))
    return 0


def main(argv: list[str] | None = None) -> int:
    from .cli_parsing import validate_from_environment

    validate_from_environment()
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(__doc__)
        return 0 if argv else USAGE_ERROR
    if argv[:1] == ["list"]:
        return list_main(argv[1:])
    if argv[:1] in (["diff"], ["merge"], ["matrix"], ["summary"]):  # the report sub-commands (faces/report_cli.py)
        from . import report_cli

        return getattr(report_cli, f"{argv[0]}_main")(argv[1:])
    if argv[:1] == ["data"]:  # list / fetch / verify the corpora (bertattn_bench/faces/data_cli.py)
        from .data_cli import main as data_main
        return data_main(argv[1:])

    args = pytest_args(argv)
    if "-h" in argv or "--help" in argv:
        print(__doc__)
        return 0
    import pytest

    return int(pytest.main(args))


def console() -> int:
    """The ``bertattn-bench`` entry point: :func:`main`, quiet when its output is cut short (``| head``)."""
    try:
        return main()
    except BrokenPipeError:
        sys.stderr.close()  # nothing more can be written; no traceback about it
        return 0
    except KeyboardInterrupt:  # Ctrl-C outside pytest's own handling (start-up, a subcommand): one line, status 2
        print("bertattn-bench: interrupted (Ctrl-C)", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(console())
