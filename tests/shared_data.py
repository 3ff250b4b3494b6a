"""The prepared data folder the tests that read real data use: ``$BERTATTN_DATA_DIR``, else ``../shared/data``
beside the checkout (as CI has it)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from bertattn_bench.base.settings import DATA_DIR_ENV

ROOT = Path(__file__).resolve().parent.parent


def prepared_data(*needed: str) -> Path:
    """The first candidate folder holding every path in ``needed`` (a name ending in ``/`` must be a folder, any
    other a file); the test skips with one line where there is none."""
    for candidate in (os.environ.get(DATA_DIR_ENV), ROOT.parent / "shared" / "data"):
        if candidate and all((Path(candidate) / p).is_dir() if p.endswith("/") else (Path(candidate) / p).is_file()
                             for p in needed):
            return Path(candidate)
    pytest.skip(f"no data folder with {', '.join(needed)} (../shared/data or ${DATA_DIR_ENV})")
