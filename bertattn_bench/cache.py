"""On-disk cache of pass results, keyed by (model, data, code version, options), safe for parallel workers.

A pass that finished is never recomputed: an interrupted run resumes from the passes already on disk, and two
pytest-xdist workers that need the same pass take a file lock, so one computes and the other loads.
Writes are atomic (temporary file + rename), so an interrupted write leaves no half file behind.
"""
from __future__ import annotations

import hashlib
import json
import os
import pickle
from pathlib import Path
from typing import Callable

from filelock import FileLock

CACHE_ENV = "BERTATTN_CACHE_DIR"
_PACKAGE = Path(__file__).resolve().parent


def code_version() -> str:
    """Hash of the package's source: any change to the measuring code invalidates cached results."""
    h = hashlib.sha256()
    for path in sorted(_PACKAGE.rglob("*.py")):
        h.update(path.relative_to(_PACKAGE).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _file_fingerprint(path: Path) -> str:
    """Size plus the first and last MiB: cheap for large weight files, and changes whenever they do."""
    size = path.stat().st_size
    h = hashlib.sha256(str(size).encode())
    with open(path, "rb") as f:
        h.update(f.read(1 << 20))
        if size > 1 << 20:
            f.seek(max(size - (1 << 20), 0))
            h.update(f.read())
    return h.hexdigest()[:16]


def model_fingerprint(info) -> str:
    source = Path(info.source)
    parts = [info.name, str(info.random_init_seed), info.attn_implementation, info.device.split(":")[0]]
    if source.is_dir():
        for f in sorted(source.iterdir()):
            if f.is_file() and f.suffix in (".json", ".safetensors", ".bin", ".txt"):
                parts.append(f"{f.name}:{_file_fingerprint(f)}")
    else:
        parts.append(info.source)  # a hub name resolved from the HF cache
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


DATA_SUFFIXES = (".conllu", ".conll")


def data_files(path: Path) -> list[Path]:
    """The data files behind ``path``: the file itself, or a folder's CoNLL-U / CoNLL-2012 files (sorted)."""
    path = Path(path)
    if not path.is_dir():
        return [path]
    return sorted(f for f in path.iterdir() if f.suffix in DATA_SUFFIXES)


def data_fingerprint(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for p in paths:
        for f in data_files(p):
            h.update(f.name.encode())
            h.update(_file_fingerprint(f).encode())
    return h.hexdigest()[:16]


def cache_key(family: str, corpus: str, info, data_paths: list[Path], options: dict) -> str:
    doc = {"family": family, "corpus": corpus, "model": model_fingerprint(info), "data": data_fingerprint(data_paths),
           "code": code_version(), "options": options}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:20]


class PassCache:
    def __init__(self, directory: Path | None):
        self.directory = directory

    def path(self, slug: str, family: str, corpus: str, key: str) -> Path:
        return self.directory / slug / f"{family}-{corpus}-{key}.pkl"

    def get_or_compute(self, path: Path, compute: Callable[[], object], force: bool = False):
        """Load ``path`` if present (unless ``force``), else compute and store it, under a file lock."""
        if self.directory is None:
            return compute(), False
        path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(path) + ".lock"):
            if path.is_file() and not force:
                try:
                    with open(path, "rb") as f:
                        return pickle.load(f), True
                except (pickle.UnpicklingError, EOFError, AttributeError, ImportError):
                    path.unlink()  # unreadable (e.g. written by other code): recompute
            result = compute()
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            with open(tmp, "wb") as f:
                pickle.dump(result, f)
            os.replace(tmp, path)
            return result, False
