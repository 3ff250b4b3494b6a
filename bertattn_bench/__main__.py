"""Command line: ``python -m bertattn_bench record|compare|run`` (thin wrappers over the pytest benchmarks).

  record  [--model M] [pytest args]           record M's baseline into reference_numbers/baselines/
  compare --model B --against A [pytest args] run B, judged against A's recorded baseline: exit 1 on a regression
  run     [pytest args]                       the claim benchmarks (same as `pytest benchmarks`)
  diff    OLD NEW [--prefix P]                what moved between two recorded baselines (a JSON path, or
                                              REV:PATH for a git revision's copy): a Markdown table of every
                                              claim@corpus whose value, n or verdict changed
"""
from __future__ import annotations

import argparse
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
    parser.add_argument("command", choices=["record", "compare", "run", "diff"])
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
    from .baselines import baseline_diff, diff_markdown, read_baseline

    parser = _Parser(prog="python -m bertattn_bench diff", description="what moved between two recorded baselines")
    parser.add_argument("old", help="baseline JSON, or REV:PATH (e.g. HEAD~3:reference_numbers/baselines/X.json)")
    parser.add_argument("new", help="baseline JSON, or REV:PATH")
    parser.add_argument("--prefix", default="", help="only claim ids starting with this (e.g. clark.)")
    args = parser.parse_args(argv)
    rows = baseline_diff(read_baseline(args.old, ROOT), read_baseline(args.new, ROOT), args.prefix)
    print(diff_markdown(rows))
    flips = sum(r["flipped"] for r in rows)
    print(f"\n{len(rows)} moved, {flips} verdict(s) changed")
    return 0


def main(argv: list[str] | None = None) -> int:
    import pytest

    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["diff"]:
        return diff_main(argv[1:])

    return int(pytest.main(pytest_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
