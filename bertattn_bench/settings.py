"""Settings read from options or environment variables (never hard-coded paths)."""
from __future__ import annotations

import os
from pathlib import Path

from .errors import DataError

DATA_DIR_ENV = "BERTATTN_DATA_DIR"
MODEL_ENV = "BERTATTN_MODEL"
DEVICE_ENV = "BERTATTN_DEVICE"
SEED_ENV = "BERTATTN_SEED"


def training_seed(default: int = 0) -> int:
    """The seed of trained measurements (probe initialisation, training order, held-out split) from
    ``$BERTATTN_SEED``; ``default`` when unset. The data samples keep their own seed, so n does not move with it:
    runs under several seeds measure how far a trained value moves (scripts/probe_spread.py)."""
    value = os.environ.get(SEED_ENV, "").strip()
    if not value:
        return default
    try:
        seed = int(value)
    except ValueError:
        raise DataError(f"{SEED_ENV}={value!r}: not an integer (a training seed, e.g. {SEED_ENV}=1)") from None
    if seed < 0:
        raise DataError(f"{SEED_ENV}={value!r}: a seed must be >= 0")
    return seed


def resolve_data_dir(option: str | None = None) -> Path:
    """The data directory from ``--data-dir`` or ``$BERTATTN_DATA_DIR``; a clear error when unset or empty."""
    value = option or os.environ.get(DATA_DIR_ENV)
    if not value:
        raise DataError(
            f"no data directory: pass --data-dir DIR or set {DATA_DIR_ENV}=DIR "
            "(the folder holding ud_english_ewt/, gum/, wikitext2_raw/, ...; CI uses ../shared/data)"
        )
    path = Path(value).expanduser()
    source = "--data-dir" if option else DATA_DIR_ENV
    if not path.is_dir():
        raise DataError(f"{source}={value!r}: no such directory")
    if not any(path.iterdir()):
        raise DataError(f"{source}={value!r}: the directory is empty")
    return path.resolve()


def data_file(data_dir: Path, relative: str) -> Path:
    path = data_dir / relative
    if not path.exists():
        raise DataError(f"missing data file {path} (looked under the data directory {data_dir}; "
                        f"set --data-dir / {DATA_DIR_ENV} to the folder that holds {relative.split('/')[0]}/)")
    return path
