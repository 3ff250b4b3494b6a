"""The one hasher: files and folders (full-content sha256, memoised in a small index), data sets, model weights
and the code version of a module and what it imports (its computing source: syntax tree without docstrings, the
``@metric`` / ``@figure`` functions or the places imports come from). The pass cache (:mod:`bertattn_bench.runner.
cache`), the checkpoint caches (:mod:`bertattn_bench.training.checkpoints`) and the baselines' provenance
(:mod:`bertattn_bench.claims.baselines`) key and record with it.
"""
from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import json
import os
import uuid
import warnings
from pathlib import Path
from typing import Iterable

from filelock import FileLock

from .errors import CacheWarning

INDEX_NAME = "file-digests.json"
_PACKAGE_NAME = __name__.split(".")[0]


# ---- one file hasher --------------------------------------------------------------------------------------------

def sha256_file(path: Path) -> str:
    """Full-content sha256 (hex) of one file, read in 1 MiB chunks. The only function that reads a file to hash it."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    except OSError as exc:  # e.g. the data folder disappeared mid-run: the project's clean error, not a traceback
        from ..base.errors import DataError

        raise DataError(f"{path}: cannot read the file for its checksum ({exc.strerror or exc})") from None
    return h.hexdigest()


def set_aside(path: Path, want_dir: bool, what: str) -> bool:
    """A cache path of the wrong kind (a folder where a file goes, or the reverse) moved out of the way, beside it
    as ``<name>.set-aside-<n>``, with one :class:`CacheWarning` naming both; True where it did. Nothing is deleted."""
    path = Path(path)
    if not (path.exists() or path.is_symlink()) or path.is_dir() == want_dir:
        return False
    n = 1
    while path.with_name(f"{path.name}.set-aside-{n}").exists():
        n += 1
    target = path.with_name(f"{path.name}.set-aside-{n}")
    try:
        os.replace(path, target)
    except OSError as exc:
        from ..base.errors import BenchError

        raise BenchError(f"{what} {path} is a {'file' if want_dir else 'folder'} where a "
                         f"{'folder' if want_dir else 'file'} goes, and cannot be moved aside ({exc.strerror or exc})"
                         ) from None
    warnings.warn(f"{what} {path} was a {'file' if want_dir else 'folder'} where a {'folder' if want_dir else 'file'} "
                  f"goes: set aside as {target.name}", CacheWarning, stacklevel=3)
    return True


class DigestIndex:
    """Full sha256 per file, memoised by (size, mtime_ns, ctime_ns, inode): a file whose stamp is unchanged is not
    re-read. With a ``path``, the memo persists there (JSON; read-merge-write under a file lock, atomic replace), so
    later runs and parallel workers share it; without one it lives in this process only."""

    def __init__(self, path: Path | None = None):
        self.path = Path(path) if path else None
        self._memo: dict[str, list] | None = None
        self._new: dict[str, list] = {}
        self.read_only = False  # a read-only cache folder: the index is read, never written

    @staticmethod
    def stamp(st: os.stat_result) -> list[int]:
        # ctime and inode too: `cp -p` or an editor that keeps mtime still changes them (a user cannot set ctime)
        return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]

    def _read(self) -> dict[str, list]:
        """The index file's entries; an unreadable or malformed file (not JSON, or JSON of another shape) or entry is
        left out with a :class:`CacheWarning` naming the file: its files are rehashed (a miss costs time, never a
        wrong key), and the next flush rewrites it."""
        if self.path is None or not self.path.is_file():
            if self.path is not None and not self.read_only:
                set_aside(self.path, want_dir=False, what="digest index")
            return {}
        try:
            doc = json.loads(self.path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError, OSError) as exc:
            warnings.warn(f"{self.path}: unreadable digest index ({type(exc).__name__}: {exc}); rehashing the data "
                          f"files", CacheWarning, stacklevel=3)
            return {}
        if not isinstance(doc, dict):
            warnings.warn(f"{self.path}: malformed digest index (a JSON {type(doc).__name__}, expected an object "
                          f"path -> [stamp, sha256]); rehashing the data files", CacheWarning, stacklevel=3)
            return {}
        good = {k: v for k, v in doc.items() if _index_entry_ok(v)}
        if len(good) != len(doc):
            warnings.warn(f"{self.path}: {len(doc) - len(good)} malformed digest index entr(y/ies) (e.g. "
                          f"{next(k for k in doc if k not in good)!r}); rehashing those files", CacheWarning,
                          stacklevel=3)
        return good

    def _load(self) -> dict[str, list]:
        if self._memo is None:
            self._memo = self._read()
        return self._memo

    def digest(self, path: Path) -> str:
        path = Path(path).resolve()
        stamp = self.stamp(path.stat())
        memo = self._load()
        entry = memo.get(str(path))
        if entry is not None and entry[0] == stamp:
            return entry[1]
        value = sha256_file(path)
        memo[str(path)] = self._new[str(path)] = [stamp, value]
        return value

    def flush(self) -> None:
        """Merge this process's new digests into the index file (locked: xdist workers flush concurrently)."""
        if self.path is None or not self._new or self.read_only:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.path) + ".lock"):
            with warnings.catch_warnings():  # said once, by _load
                warnings.simplefilter("ignore", CacheWarning)
                on_disk = self._read()
            on_disk.update(self._new)
            tmp = self.path.with_suffix(f".tmp{os.getpid()}")
            try:
                tmp.write_text(json.dumps(on_disk, sort_keys=True), encoding="utf-8")
                os.replace(tmp, self.path)
            finally:  # never a stray temporary file, whatever stopped the write
                tmp.unlink(missing_ok=True)
        self._new = {}


def _index_entry_ok(v) -> bool:
    return (isinstance(v, list) and len(v) == 2 and isinstance(v[0], list) and len(v[0]) == 4
            and all(isinstance(x, int) for x in v[0]) and isinstance(v[1], str) and len(v[1]) == 64)


DEFAULT_INDEX = DigestIndex()  # in-process memo for callers without a cache dir


def file_digest(path: Path, index: DigestIndex | None = None) -> str:
    """Full sha256 (hex) of ``path``, memoised by its stat stamp in ``index`` (default: this process's memo)."""
    return (index or DEFAULT_INDEX).digest(path)


def data_files(path: Path) -> list[Path]:
    """The files behind ``path``: the file itself, or every file under a folder, recursively, sorted."""
    path = Path(path)
    if not path.is_dir():
        return [path]
    return sorted((f for f in path.rglob("*") if f.is_file()), key=lambda f: f.relative_to(path).as_posix())


def _named_files(paths: Iterable[Path]) -> list[tuple[str, Path]]:
    out = []
    for p in paths:
        p = Path(p)
        for f in data_files(p):
            out.append((f.relative_to(p).as_posix() if p.is_dir() else p.name, f))
    return out


def files_digest(paths: Iterable[Path], index: DigestIndex | None = None) -> tuple[str, int]:
    """sha256 over (name, full sha256) of every file behind ``paths`` (folders: all files, named relative to the
    folder), and how many files; the index is flushed once at the end."""
    h, count = hashlib.sha256(), 0
    for name, f in _named_files(paths):
        h.update(name.encode())
        h.update(file_digest(f, index).encode())
        count += 1
    (index or DEFAULT_INDEX).flush()
    return h.hexdigest(), count


def pieces_digest(examples, labels=None) -> str:
    """sha256 of encoded examples' pieces in order (each one's ``input_ids`` and ``token_type_ids``) and, where given,
    their labels: what a computation over a split reads besides the weights (a kept sweep's key, the session's head
    importance)."""
    import numpy as np

    h = hashlib.sha256()
    for e in examples:
        h.update(np.asarray(e.input_ids, dtype=np.int64).tobytes() + b"|")
        h.update(np.asarray(e.token_type_ids, dtype=np.int64).tobytes() + b";")
    if labels is not None:
        h.update(b"labels:" + np.ascontiguousarray(np.asarray(labels, np.float64)).tobytes())
    return h.hexdigest()


def data_fingerprint(paths: list[Path], index: DigestIndex | None = None) -> str:
    return files_digest(paths, index)[0][:16]


# ---- model -------------------------------------------------------------------------------------------------------

def hub_snapshot_commit(name: str, cache_dir: Path | None = None) -> str | None:
    """The commit of the local HF-cache snapshot that ``from_pretrained(name)`` loads offline (refs/main), else None.
    Never touches the network (``local_files_only``)."""
    try:
        from huggingface_hub import snapshot_download

        folder = snapshot_download(repo_id=name, local_files_only=True, cache_dir=cache_dir)
    except Exception:  # not in the cache, not a valid repo id, no huggingface_hub
        return None
    return Path(folder).name


def model_fingerprint(info, index: DigestIndex | None = None) -> str:
    """The model part of a key: name, random-init seed, attention implementation, device type, and the weights:
    every file of a folder (full sha256), or a hub name's snapshot commit. A model that is neither (e.g. built from
    a config in memory) gets a unique value: it is never served from the cache."""
    source = Path(info.source) if info.source else None
    parts = [info.name, str(info.random_init_seed), info.attn_implementation, info.device.split(":")[0]]
    if source is not None and source.is_dir():
        digest, count = files_digest([source], index)
        parts.append(f"folder:{digest}:{count}")
    elif (getattr(info, "extra", None) or {}).get("weights_sha256"):  # a model object the caller held: its weights
        parts.append(f"weights:{info.extra['weights_sha256']}")
    elif info.random_init_seed is not None and info.extra.get("config_sha256"):
        # built from a config in memory with a seed: the weights are the config's, the seed's and torch's RNG's
        import torch

        parts.append(f"config:{info.extra['config_sha256']}:torch{torch.__version__}")
    else:
        commit = hub_snapshot_commit(info.source) if info.source else None
        parts.append(f"hub:{info.source}@{commit}" if commit else f"unresolved:{uuid.uuid4().hex}")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


# ---- code ----------------------------------------------------------------------------------------------------------

def _module_file(name: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin)


def _imports(name: str, path: Path) -> set[str]:
    """Package modules that module ``name`` (file ``path``) imports anywhere (function-level imports too); parsed
    once per process and file version (every pass's cache key follows the closure of its family: 1.9 s of parsing in
    a quick run before this memo, docs/results.md, stop 71)."""
    st = path.stat()
    found = _imported_names(name, str(path), (st.st_size, st.st_mtime_ns))
    return {m for m in found if (m == _PACKAGE_NAME or m.startswith(_PACKAGE_NAME + ".")) and _module_file(m)}


@functools.lru_cache(maxsize=None)
def _imported_names(name: str, file: str, stamp: tuple) -> frozenset[str]:
    """Every module name one version (``stamp``: size, mtime) of the file imports, or may import (``from a import
    b``: ``a`` and ``a.b``), as written: which of them are this package's modules is decided by the caller."""
    path = Path(file)
    is_pkg = path.name == "__init__.py"
    package = name if is_pkg else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            found.add(mod)
            found.update(f"{mod}.{a.name}" for a in node.names)  # ``from . import passes``: a submodule
    return frozenset(found)


# Modules that only name, fingerprint and lock what others compute: a trained checkpoint's code version leaves them
# out (the pass cache imports the claim registry, and through it every metric: following it would make any edit to a
# metric or a report retrain every checkpoint)
KEY_ONLY_MODULES = (f"{_PACKAGE_NAME}.runner.cache", __name__)  # the pass cache and this hasher


@functools.lru_cache(maxsize=None)
def module_closure(*names: str, exclude: tuple[str, ...] = ()) -> tuple[str, ...]:
    """``names`` and every package module they import, transitively (sorted); modules in ``exclude`` are neither
    included nor followed (e.g. this module, which only names and locks what the others compute)."""
    seen, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name in seen or name in exclude:
            continue
        path = _module_file(name)
        if path is None:
            raise ValueError(f"module_closure: {name!r} is not an importable Python module")
        seen.add(name)
        todo.extend(_imports(name, path) - seen)
    return tuple(sorted(seen))


READER_DECORATORS = ("metric", "figure")  # registered functions that read a finished pass result, never feed one


def _reads_results_only(node: ast.stmt) -> bool:
    """A module-level function registered with ``@metric(...)`` or ``@figure(...)``: a claim's measurement or a
    figure, computed from a cached pass result, so its code is not part of what the pass computes."""
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    for d in node.decorator_list:
        f = d.func if isinstance(d, ast.Call) else d
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
        if name in READER_DECORATORS:
            return True
    return False


@functools.lru_cache(maxsize=256)
def _computing_source(path: str, stamp: tuple) -> bytes:
    """What of a module's source can change a computed value: its syntax tree (so not comments or layout), without
    docstrings and without the ``@metric`` / ``@figure`` functions (:func:`_reads_results_only`). Editing a claim's
    metric, a figure or a docstring therefore leaves the cached passes and checkpoints valid; editing a reducer, a
    pass or anything they call does not. The module an ``from ... import`` names is blanked too: which module's code
    runs is in the key through that module's own source in the closure, so moving modules between folders (a layout
    change) keeps every key. ``stamp`` (size, mtime) keys the memo."""
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    tree.body = [n for n in tree.body if not _reads_results_only(n)]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):  # where a name comes from is a location, not a computation: the
            node.module, node.level = None, 0  # imported module's own source is in the closure (layout-free key)
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree).encode()


def computing_source(path: Path) -> bytes:
    st = path.stat()
    return _computing_source(str(path), (st.st_size, st.st_mtime_ns))


def module_version(*modules, exclude: tuple[str, ...] = ()) -> str:
    """Hash of the computing source (:func:`computing_source`) of ``modules`` (module objects or dotted names) and of
    every package module they import (except ``exclude`` and what only it imports): the code version of whatever
    those modules compute."""
    names = tuple(sorted({m if isinstance(m, str) else m.__name__ for m in modules}))
    # the modules' sources, not their names, in an order of their own: a module moved or renamed keeps the version
    # (as long as what it computes is unchanged); an empty package ``__init__`` (a docstring at most) adds nothing
    digests = sorted(hashlib.sha256(source).hexdigest()
                     for source in (computing_source(_module_file(name))
                                    for name in module_closure(*names, exclude=tuple(sorted(exclude))))
                     if source not in _EMPTY_SOURCES)
    return hashlib.sha256("".join(digests).encode()).hexdigest()[:16]


_EMPTY_SOURCES = {ast.dump(ast.Module(body=body, type_ignores=[])).encode() for body in ([], [ast.Pass()])}


