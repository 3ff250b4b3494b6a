"""What the command's sub-commands share: the one-line usage error (exit 4), the program's name, where the checkout
is."""
from __future__ import annotations

import argparse
from pathlib import Path

USAGE_ERROR = 4  # pytest's exit status for a usage error: the options are checked there with the same status
PROG = "bertattn-bench"
class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and pytest's usage-error status, not argparse's usage block and 2
        self.exit(USAGE_ERROR, f"ERROR: {self.prog}: {message} (see --help)\n")


def checkout_root() -> Path | None:
    """The repository the package runs from, if it does (its benchmarks/ beside the package)."""
    root = Path(__file__).resolve().parents[2]  # faces/ -> the package -> the checkout
    return root if (root / "benchmarks").is_dir() and (root / "pyproject.toml").is_file() else None


def validate_from_environment() -> None:
    """Every face turns on the validation of the documents it writes where ``BERTATTN_VALIDATE_OUTPUTS`` is set (the
    test suite's aid; base/documents.py reads no environment)."""
    from ..base.documents import validate_outputs
    from ..base.settings import VALIDATE_OUTPUTS_ENV, env

    validate_outputs(bool(env(VALIDATE_OUTPUTS_ENV)))
