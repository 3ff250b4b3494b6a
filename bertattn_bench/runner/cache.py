"""On-disk cache of pass results, keyed by (model, data, code version, options), safe for parallel workers.

A pass that finished is never recomputed: an interrupted run resumes from the passes already on disk, and two
pytest-xdist workers that need the same pass take a file lock, so one computes and the other loads.
Writes are atomic (temporary file + rename), so an interrupted write leaves no half file behind.

The key cannot go stale (issue 9):

* **data**: every file a pass reads, whatever its extension (a folder stands for all its files, recursively);
* **weights**: every file of a model folder, or the hub snapshot's commit for a hub name (from the local HF cache,
  offline); a model neither a folder nor a resolvable hub snapshot gets a fresh key each time (never a hit);
* both by **full-content sha256** (:func:`~bertattn_bench.base.hashing.file_digest`), memoised by (size, mtime_ns, ctime_ns, inode) in a small
  index under the cache dir (``file-digests.json``, file-locked), so a hit re-reads no file;
* **code**: a version per family, the hash of the modules its prepare function imports (transitively, within the
  package: the family's own modules and the core ones, e.g. attention/, batching.py, passes.py, model.py), not
  of the whole package; and of what in them computes (:func:`computing_source`: the syntax tree without comments,
  docstrings and the ``@metric`` / ``@figure`` functions, which read a finished result), so editing a claim's
  metric or a figure re-runs no pass and retrains no checkpoint;
* **options**: limit, batch size, every plain setting of the prepared pass (e.g. the probes' seeds and
  hyper-parameters) and torch's thread count (it changes the order of float sums in trained values).

The hasher (files, data, models, code) is :mod:`bertattn_bench.base.hashing`, shared with the baselines'
provenance and the checkpoint caches; the names are re-exported here.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import warnings
from pathlib import Path
from typing import Callable

from filelock import FileLock

from ..base.documents import remove_stale_temps
from ..base.errors import CacheWarning
from ..base.hashing import (
    DEFAULT_INDEX,
    INDEX_NAME,
    DigestIndex,
    data_fingerprint,
    model_fingerprint,
    module_version,
    set_aside,
)
from ..base.settings import CACHE_ENV  # noqa: F401 (re-exported)

_PACKAGE_NAME = __name__.split(".")[0]


def family_code_version(family: str) -> str:
    """The code version of one claim family: its prepare function's module and what that imports."""
    from ..claims.registry import families

    return module_version(families()[family].prepare.__module__)


# ---- options and the key -------------------------------------------------------------------------------------------

def _plain(value):
    """``value`` as JSON-able settings (scalars, tuples/lists of them, dataclasses of them), else None."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, (bool, int, float, str)) for v in value):
        return list(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        for f in dataclasses.fields(value):
            v = _plain(getattr(value, f.name))
            if v is None and getattr(value, f.name) is not None:
                return None  # holds something that is not a setting (a model, tensors): not an option
            out[f.name] = v
        return out
    return None


def pass_options(prepared) -> dict:
    """Every option of a prepared pass that changes a value: batch size, each plain setting field (e.g. the probes'
    ``settings``: seeds, sizes, learning rates), and torch's intra-op thread count."""
    import torch

    opts = {"threads": torch.get_num_threads()}
    if dataclasses.is_dataclass(prepared):
        for f in dataclasses.fields(prepared):
            value = getattr(prepared, f.name)
            plain = _plain(value)
            if plain is not None or value is None:
                opts[f.name] = plain
    else:
        opts["batch_size"] = getattr(prepared, "batch_size", None)
    return opts


def threads_matter(family: str) -> bool:
    """Whether torch's thread count belongs in a family's key: only where the pass trains (registered with
    ``trains=True``: fine-tunes, probes), as the order of float sums then changes trained values;
    a forward-only pass (attention statistics) reuses a pass computed with another thread count."""
    from ..claims.registry import families

    fam = families().get(family)
    return fam is None or fam.trains


def cache_key(family: str, corpus: str, info, data_paths: list[Path], options: dict,
              index: DigestIndex | None = None) -> str:
    doc = {"family": family, "corpus": corpus, "model": model_fingerprint(info, index),
           "data": data_fingerprint(data_paths, index), "code": family_code_version(family), "options": options}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:20]


def _writable(directory: Path) -> bool:
    """Whether a file can be created in ``directory`` (tried, not guessed from the mode bits: root, read-only mounts)."""
    import tempfile

    try:
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".write-test-"):
            return True
    except OSError:
        return False


def check_cache_dir(directory: Path | None) -> str:
    """Start-up check of the pass-cache folder: ``"off"`` (none), ``"read-write"``, or ``"read-only"`` (it exists and
    nothing can be written in it: its entries are read, new passes are computed and not stored). A folder that
    cannot be used at all (a file in its place, or missing and not creatable) is a BenchError naming it, the option
    and the variable."""
    from ..base.errors import BenchError

    if directory is None:
        return "off"
    directory = Path(directory)
    hint = f"(--cache-dir / {CACHE_ENV}; --no-cache runs without one)"
    if directory.exists() and not directory.is_dir():
        raise BenchError(f"cache folder {directory} is not a folder {hint}")
    if not directory.exists():
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BenchError(f"cache folder {directory} cannot be created ({exc.strerror or exc}) {hint}") from None
    if not os.access(directory, os.R_OK | os.X_OK):
        raise BenchError(f"cache folder {directory} cannot be read {hint}")
    return "read-write" if _writable(directory) else "read-only"


class PassCache:
    def __init__(self, directory: Path | None, read_only: bool | None = None):
        """``read_only``: None finds out (a folder that exists and cannot be written is used read-only, with a
        :class:`CacheWarning` naming it): hits are loaded, misses computed and not stored, no lock taken."""
        self.directory = directory
        self.digests = DigestIndex(Path(directory) / INDEX_NAME) if directory else DEFAULT_INDEX
        if read_only is None:
            read_only = directory is not None and Path(directory).is_dir() and not _writable(Path(directory))
            if read_only:
                warnings.warn(f"cache folder {directory} is read-only: cached passes are read, new ones are computed "
                              f"and not stored", CacheWarning, stacklevel=2)
        self.read_only = bool(read_only)
        if directory is not None:
            self.digests.read_only = self.read_only

    def key(self, family: str, corpus: str, info, prepared, options: dict) -> str:
        """The key of ``prepared``'s pass: its data files, the model, the family's code, ``options`` + its own."""
        opts = {**options, **pass_options(prepared)}
        if not threads_matter(family):
            opts.pop("threads", None)
        return cache_key(family, corpus, info, list(getattr(prepared, "data_paths", [])), opts, self.digests)

    def path(self, slug: str, family: str, corpus: str, key: str) -> Path:
        return self.directory / slug / f"{family}-{corpus}-{key}{RESULT_SUFFIX}"

    def get_or_compute(self, path: Path, compute: Callable[[], object], force: bool = False):
        """Load ``path`` if present (unless ``force``), else compute and store it, under a file lock. An entry that
        cannot be read as this format's data (corrupt, foreign, another format version) is recomputed with a
        :class:`CacheWarning`; nothing in it is ever executed. A result that cannot be stored as data is returned
        uncached (with a warning)."""
        if self.directory is None:
            return compute(), False
        if not self.read_only:  # a file where the model's folder goes, a folder where the entry goes: set aside
            set_aside(path.parent, want_dir=True, what="cache folder")
            set_aside(path, want_dir=False, what="cache entry")
            set_aside(Path(str(path) + ".lock"), want_dir=False, what="cache lock")
        if self.read_only:  # no lock (it is a file), no store
            if path.is_file() and not force:
                try:
                    return load_result(path), True
                except CacheEntryError as exc:
                    warnings.warn(f"{exc}; recomputing it (read-only cache: not stored)", CacheWarning, stacklevel=2)
            return compute(), False
        path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(path) + ".lock"):
            remove_stale_temps(path.parent)  # a killed run's half-written entries and digest index
            remove_stale_temps(self.directory)
            if path.is_file() and not force:
                try:
                    return load_result(path), True
                except CacheEntryError as exc:
                    warnings.warn(f"{exc}; recomputing it", CacheWarning, stacklevel=2)
                    path.unlink(missing_ok=True)
            result = compute()
            try:
                store_result(result, path)
            except TypeError as exc:
                warnings.warn(f"{path}: not cached: {exc}", CacheWarning, stacklevel=2)
            return result, False


# ---- storage: data only, never code (issue 28) ---------------------------------------------------------------------
#
# An entry is one ``.npz`` file (numpy's zip of arrays, read with ``allow_pickle=False``): the arrays and tensors of
# the result as plain numeric/string arrays, and ``__doc__``, a JSON document (UTF-8 bytes) holding the rest as
# tagged JSON and the format name and version. Loading builds only: JSON scalars, lists, tuples, dicts, sets,
# ``Counter``/``defaultdict`` of a few plain factories, paths, numpy arrays and scalars, torch tensors, and instances
# of this package's own classes (dataclasses, NamedTuples and plain classes whose bases are all the package's), made
# with ``cls.__new__`` and their stored attributes (no ``__init__``, no ``__setstate__``). Nothing else is named by the
# file, so a planted entry can at worst give wrong numbers for a key its writer could compute anyway; it cannot run
# code. Old ``.pkl`` entries are never read (another suffix: they are simply misses).

RESULT_SUFFIX = ".npz"
FORMAT_NAME = "bertattn-bench pass result"
FORMAT_VERSION = 1
_DOC = "__doc__"
_TAG = "$t"
_FACTORIES = {"list": list, "set": set, "int": int, "float": float, "dict": dict}


class CacheEntryError(Exception):
    """A cache entry that is not this format's data: never loaded, recomputed."""


def _package_class(cls) -> bool:
    return all(c is object or c is tuple or getattr(c, "__module__", "").split(".")[0] == _PACKAGE_NAME
               for c in cls.__mro__)


def _class_name(cls) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


class _Encoder:
    def __init__(self):
        self.arrays: dict[str, object] = {}

    def _array(self, arr) -> str:
        import numpy as np

        arr = np.ascontiguousarray(arr)
        if arr.dtype.hasobject:
            raise TypeError(f"a numpy array of dtype {arr.dtype} (objects) is not data")
        ref = f"a{len(self.arrays)}"
        self.arrays[ref] = arr
        return ref

    def __call__(self, v):  # noqa: C901 - one branch per stored type
        from collections import Counter, OrderedDict, defaultdict

        import numpy as np
        import torch

        if v is None or isinstance(v, (bool, str)) and type(v) in (bool, str):
            return v
        if type(v) is int or type(v) is float:
            return v
        if isinstance(v, torch.Tensor):
            t = v.detach().cpu()
            dtype = str(t.dtype).removeprefix("torch.")
            if t.dtype == torch.bfloat16:
                t = t.float()  # numpy has no bfloat16; float32 holds every bfloat16 value exactly
            try:
                arr = t.numpy()
            except (RuntimeError, TypeError) as exc:  # sparse, quantized, ...: not plain data
                raise TypeError(f"a {v.layout} {v.dtype} tensor cannot be stored as an array ({exc})") from None
            return {_TAG: "tensor", "dtype": dtype, "device": str(v.device), "ref": self._array(arr)}
        if isinstance(v, np.ndarray):
            return {_TAG: "ndarray", "ref": self._array(v)}
        if isinstance(v, np.generic):
            if v.dtype.hasobject:
                raise TypeError("a numpy object scalar is not data")
            return {_TAG: "npscalar", "dtype": v.dtype.str, "v": v.item() if v.dtype.kind not in "SUV" else str(v)}
        if isinstance(v, Path):
            return {_TAG: "path", "v": str(v)}
        if type(v) is list:
            return [self(x) for x in v]
        if type(v) is tuple:
            return {_TAG: "tuple", "v": [self(x) for x in v]}
        if type(v) in (set, frozenset):
            return {_TAG: type(v).__name__, "v": [self(x) for x in v]}
        if type(v) in (dict, OrderedDict, Counter) or type(v) is defaultdict:
            items = [[self(k), self(x)] for k, x in v.items()]
            out = {_TAG: "dict", "kind": type(v).__name__, "items": items}
            if type(v) is defaultdict:
                name = next((n for n, f in _FACTORIES.items() if v.default_factory is f), None)
                if name is None and v.default_factory is not None:
                    raise TypeError(f"a defaultdict of {v.default_factory!r} is not data")
                out["factory"] = name
            return out
        cls = type(v)
        if _package_class(cls):
            if dataclasses.is_dataclass(v) or hasattr(v, "__dict__") or hasattr(cls, "_fields"):
                return self._instance(v)
        raise TypeError(f"a {cls.__module__}.{cls.__qualname__} is not data this cache can store")

    def _instance(self, v):
        cls = type(v)
        out = {_TAG: "object", "cls": _class_name(cls)}
        if isinstance(v, tuple):  # a NamedTuple
            out["tuple"] = [self(x) for x in v]
            return out
        state = dict(vars(v)) if hasattr(v, "__dict__") else {}
        if dataclasses.is_dataclass(v):
            for f in dataclasses.fields(v):
                if f.name not in state and hasattr(v, f.name):  # __slots__
                    state[f.name] = getattr(v, f.name)
        out["state"] = {k: self(x) for k, x in state.items()}
        return out


def store_result(result, path: Path) -> None:
    """Write ``result`` to ``path`` as data (see above): atomic (temporary file + rename). TypeError (and nothing
    written) when it holds something that is not data (a model, a function, an object array)."""
    import numpy as np

    enc = _Encoder()
    doc = {"format": FORMAT_NAME, "version": FORMAT_VERSION, "value": enc(result)}
    text = json.dumps(doc, ensure_ascii=False, allow_nan=True).encode("utf-8")
    arrays = {**enc.arrays, _DOC: np.frombuffer(text, dtype=np.uint8)}
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _package_class_named(name: str):
    import importlib
    import re

    module, _, qual = name.partition(":")
    if not re.fullmatch(rf"{_PACKAGE_NAME}(\.[A-Za-z_][A-Za-z0-9_]*)*", module) or not re.fullmatch(
            r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", qual):
        raise CacheEntryError(f"class {name!r} is not one of {_PACKAGE_NAME}'s")
    try:
        obj = importlib.import_module(module)
        for part in qual.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        raise CacheEntryError(f"class {name!r} does not exist in this code") from None
    if not isinstance(obj, type) or not _package_class(obj):
        raise CacheEntryError(f"{name!r} is not a class of {_PACKAGE_NAME}")
    return obj


class _Decoder:
    def __init__(self, arrays):
        self.arrays = arrays

    def _array(self, ref):
        if not isinstance(ref, str) or ref == _DOC or ref not in self.arrays:
            raise CacheEntryError(f"array {ref!r} missing")
        return self.arrays[ref]

    def __call__(self, v):  # noqa: C901
        from collections import Counter, OrderedDict, defaultdict

        import numpy as np
        import torch

        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, list):
            return [self(x) for x in v]
        if not isinstance(v, dict) or _TAG not in v:
            raise CacheEntryError(f"untagged value {str(v)[:60]!r}")
        tag = v[_TAG]
        if tag == "tensor":
            arr = self._array(v["ref"])
            dtype = getattr(torch, v["dtype"], None)
            if not isinstance(dtype, torch.dtype):
                raise CacheEntryError(f"unknown tensor dtype {v['dtype']!r}")
            t = torch.from_numpy(np.array(arr)).to(dtype)
            device = str(v.get("device", "cpu"))
            if device.startswith("cuda") and torch.cuda.is_available():
                t = t.to(device)
            return t
        if tag == "ndarray":
            return np.array(self._array(v["ref"]))
        if tag == "npscalar":
            dtype = np.dtype(v["dtype"])
            if dtype.hasobject:
                raise CacheEntryError("object scalar")
            return dtype.type(v["v"])
        if tag == "path":
            return Path(v["v"])
        if tag == "tuple":
            return tuple(self(x) for x in v["v"])
        if tag in ("set", "frozenset"):
            return (set if tag == "set" else frozenset)(self(x) for x in v["v"])
        if tag == "dict":
            kinds = {"dict": dict, "OrderedDict": OrderedDict, "Counter": Counter}
            items = [(self(k), self(x)) for k, x in v["items"]]
            if v.get("kind") == "defaultdict":
                factory = v.get("factory")
                if factory is not None and factory not in _FACTORIES:
                    raise CacheEntryError(f"defaultdict factory {factory!r}")
                return defaultdict(_FACTORIES.get(factory), items)
            if v.get("kind") not in kinds:
                raise CacheEntryError(f"dict kind {v.get('kind')!r}")
            return kinds[v["kind"]](dict(items))  # Counter(list of pairs) would count the pairs
        if tag == "object":
            cls = _package_class_named(v["cls"])
            if "tuple" in v:
                if not (issubclass(cls, tuple) and hasattr(cls, "_fields")):
                    raise CacheEntryError(f"{v['cls']} is not a NamedTuple")
                return cls._make(self(x) for x in v["tuple"])
            obj = cls.__new__(cls)
            for k, x in v["state"].items():
                object.__setattr__(obj, k, self(x))
            return obj
        raise CacheEntryError(f"unknown tag {tag!r}")


def load_result(path: Path):
    """The result stored at ``path`` by :func:`store_result`. :class:`CacheEntryError` (naming the file) for anything
    else: a pickle, a truncated or foreign file, another format version, a class this code does not have."""
    import zipfile

    import numpy as np

    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
        doc = json.loads(arrays.pop(_DOC).tobytes().decode("utf-8"))
    except (OSError, ValueError, KeyError, EOFError, TypeError, AttributeError, zipfile.BadZipFile,
            UnicodeDecodeError) as exc:  # TypeError: a plain .npy (an array, not a zip of them)
        raise CacheEntryError(f"cache entry {path}: not a {FORMAT_NAME} ({type(exc).__name__}: {exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME:
        raise CacheEntryError(f"cache entry {path}: not a {FORMAT_NAME}")
    if doc.get("version") != FORMAT_VERSION:
        raise CacheEntryError(f"cache entry {path}: format version {doc.get('version')!r}, this code reads "
                              f"{FORMAT_VERSION}")
    try:
        return _Decoder(arrays)(doc["value"])
    except CacheEntryError as exc:
        raise CacheEntryError(f"cache entry {path}: {exc}") from None
    except (LookupError, TypeError, ValueError, AttributeError, RuntimeError, RecursionError) as exc:
        raise CacheEntryError(f"cache entry {path}: malformed ({type(exc).__name__}: {exc})") from None
