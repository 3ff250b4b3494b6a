"""The one checkpoint cache of fine-tuned models (GLUE in ``finetune``, ARCT in ``arct_ft``).

A checkpoint is a folder ``<cache>/<kind>/<model slug>/<name>-<key>/`` named by a hash of everything its weights
depend on (model, data, recipe, seed, code); ``model.safetensors`` and ``meta.json`` mark it complete. Training
writes its resumable state into the same folder; a file lock lets two workers share one checkpoint (the second
waits, then loads). Weights are written to a temporary file and renamed, so an interrupted save never leaves a
checkpoint that looks complete.

:func:`trained` is the whole sequence both fine-tunes go through (lock, find a complete checkpoint or train —
resuming from the state the trainer left in the folder — save, drop the state); :func:`sources_version` is the code
part of their keys. This module only names, locks and stores what the trainers compute: it is not part of their
code version (:data:`NOT_IN_KEY`), so the alias table :data:`SAME_CODE_AS` can live here.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

WEIGHTS, META = "model.safetensors", "meta.json"
STATE = "partial-state.pt"  # the trainer's resumable state (train_loop.train), in the checkpoint's folder
NOT_IN_KEY = (__name__,)  # this module: it stores weights, it computes none

# Code versions of trainers whose code was moved between modules, not changed: the version after the move -> the
# version before it, so that the checkpoints trained before the move keep their folders (a retrain would give the
# same weights). An entry applies to that exact code only: any later edit of the trainers' closure gives a version
# not in this table, and so a new key. Issue 62 (glue_finetune.py split into task_model, train_loop and the cached
# fine-tune; the sequence around the checkpoint moved here), measured at the commit that split it:
# then the name ``Encoded_`` dropped (EncodedSplit only) at the merge: the versions after that edit, same targets.
SAME_CODE_AS = {
    "1-74cf448c4952a9c6": "1-2701557f78d13f9c",  # glue_finetune (its closure without this module), main at 4f86657..fc94089
    "1-ab31188fee255709": "1-3eee73093792c8c3",  # arct_finetune, main at fc94089 (its claims.stats changed since 4f86657)
    "1-56e268e3de82f826": "1-3eee73093792c8c3",  # arct_finetune, stop 67: claims.stats gained wilson_counts (not called)
}


def checkpoint_dir(cache_dir: Path, kind: str, slug: str, name: str, doc: dict) -> Path:
    """The folder of the checkpoint that ``doc`` (what its weights depend on) describes."""
    key = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]
    return Path(cache_dir) / kind / slug / f"{name}-{key}"


@contextlib.contextmanager
def locked(directory: Path):
    """Hold the checkpoint's lock (two workers training the same checkpoint: one trains, the other loads)."""
    from filelock import FileLock

    from ..base.documents import remove_stale_temps
    from ..base.hashing import set_aside

    set_aside(directory.parent, want_dir=True, what="checkpoint folder")  # a file in the way: moved, one warning
    set_aside(directory, want_dir=True, what="checkpoint")
    directory.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(directory) + ".lock"):
        if directory.is_dir():  # under the lock: what a killed trainer left (a partial state's temporary file)
            remove_stale_temps(directory)
        yield directory


def complete_meta(directory: Path, need_weights: bool = True) -> dict | None:
    """The checkpoint's meta where it is complete (meta, and the weights unless ``need_weights`` is False); a meta
    that is not a JSON object (truncated, edited) counts as incomplete: retrained, with a CacheWarning naming it."""
    meta = directory / META
    if meta.is_file() and (not need_weights or (directory / WEIGHTS).is_file()):
        try:
            doc = json.loads(meta.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError, OSError) as exc:
            doc = exc
        if isinstance(doc, dict):
            return doc
        import warnings

        from ..base.errors import CacheWarning

        warnings.warn(f"checkpoint {meta}: malformed ({doc if isinstance(doc, Exception) else type(doc).__name__}); "
                      f"retraining it", CacheWarning, stacklevel=2)
    return None


def start(directory: Path, force: bool, leftovers: tuple[str, ...]) -> None:
    """Make the folder for training; ``force``: drop the resumable state of an earlier run first."""
    directory.mkdir(parents=True, exist_ok=True)
    if force:
        for name in leftovers:
            (directory / name).unlink(missing_ok=True)


def save(directory: Path, model, meta: dict, leftovers: tuple[str, ...] = ()) -> None:
    """Write the weights (atomically), then the meta that marks the checkpoint complete; drop the training state.
    ``model`` None: a run kept by its meta alone (the gates' runs: :func:`trained` with ``load`` None)."""
    from safetensors.torch import save_file

    if model is not None:
        tmp = directory / f"{WEIGHTS}.tmp{os.getpid()}"
        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(tmp))
        os.replace(tmp, directory / WEIGHTS)
    (directory / META).write_text(json.dumps(meta, indent=1))
    for name in leftovers:
        (directory / name).unlink(missing_ok=True)


def load_weights(directory: Path, model, device) -> None:
    from safetensors.torch import load_file

    model.load_state_dict(load_file(str(directory / WEIGHTS), device=str(device)))


def sources_version(module: str, version: str, exclude: tuple[str, ...] = ()) -> str:
    """The code part of a checkpoint's key: ``version`` (the trainer's, bumped when a change changes the weights)
    and the hash of ``module`` and every package module it imports (:func:`~bertattn_bench.base.hashing.module_version`)
    except ``exclude``, the key-only modules and this one; a version in :data:`SAME_CODE_AS` reads as the one it
    names."""
    from ..base.hashing import KEY_ONLY_MODULES, module_version

    ours = f"{version}-{module_version(module, exclude=KEY_ONLY_MODULES + NOT_IN_KEY + tuple(exclude))}"
    return SAME_CODE_AS.get(ours, ours)


@dataclass
class Trained:
    """A fine-tune from :func:`trained`: the model (None: a checkpoint found and read without its weights), its
    meta, and whether it came from the cache."""

    model: Any
    meta: dict
    cached: bool


def trained(directory: Path | None, train: Callable[[Path | None], tuple[object, dict]],
            load: Callable[[Path], object] | None = None, force: bool = False,
            state_files: tuple[str, ...] = (STATE,), kept: tuple[str, ...] = ()) -> Trained:
    """The whole sequence of a cached fine-tune, under the checkpoint's lock (:func:`locked`): the complete
    checkpoint in ``directory`` where there is one (:func:`complete_meta`; its weights read by ``load``, or not read
    where ``load`` is None: a run judged by the scores in its meta), else ``train(directory)``, which resumes from
    the ``state_files`` it left there, then the weights and the meta saved (:func:`save`) and the state files
    dropped except ``kept``. ``force``: trained again from the first epoch (the state files dropped first).
    ``directory`` None (no cache): ``train(None)``, nothing read or kept."""
    if directory is None:
        model, meta = train(None)
        return Trained(model, meta, False)
    with locked(directory):
        meta = None if force else complete_meta(directory, need_weights=load is not None)
        if meta is not None:
            return Trained(load(directory) if load is not None else None, meta, True)
        start(directory, force, state_files)
        model, meta = train(directory)
        save(directory, model, meta, tuple(name for name in state_files if name not in kept))
        return Trained(model, meta, False)
