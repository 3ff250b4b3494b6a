"""Command line: ``python -m bertattn_bench record|compare|run`` (thin wrappers over the pytest benchmarks).

  record  [--model M] [pytest args]           record M's baseline into reference_numbers/baselines/
  compare --model B --against A [pytest args] run B, judged against A's recorded baseline: exit 1 on a regression
  run     [pytest args]                       the claim benchmarks (same as `pytest benchmarks`)
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
    parser.add_argument("command", choices=["record", "compare", "run"])
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


def main(argv: list[str] | None = None) -> int:
    import pytest

    return int(pytest.main(pytest_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
