"""Where the package's own files are: the claims catalog and recorded baselines (``reference_numbers/``) and the
benchmark modules (``benchmarks/``). In a checkout they sit beside the package (where ``pytest benchmarks`` and the
docs name them); the wheel carries them inside the package (``pyproject.toml``'s package-dir mapping), read through
:mod:`importlib.resources`. A folder found in neither place is an error naming both."""
from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from .errors import BenchError

REFERENCE_NUMBERS = "reference_numbers"
BENCHMARKS = "benchmarks"
PACKAGE = __name__.split(".")[0]
PACKAGE_DIR = Path(__file__).resolve().parents[1]  # bertattn_bench/ (this module is in base/)


def folder(name: str) -> Path:
    """The package's ``name`` folder: inside the installed package, else beside it in a checkout."""
    inside = Path(str(files(PACKAGE) / name))
    if inside.is_dir():
        return inside
    beside = PACKAGE_DIR.parent / name
    if beside.is_dir():
        return beside
    raise BenchError(f"bertattn-bench has no {name}/ folder: looked in {inside} (an installed package) and {beside} "
                     f"(a checkout); reinstall the package (pip install bertattn-bench) or run from a full checkout")
