"""The one checkpoint cache of fine-tuned models (GLUE in ``finetune``, ARCT in ``arct_ft``).

A checkpoint is a folder ``<cache>/<kind>/<model slug>/<name>-<key>/`` named by a hash of everything its weights
depend on (model, data, recipe, seed, code); ``model.safetensors`` and ``meta.json`` mark it complete. Training
writes its resumable state into the same folder; a file lock lets two workers share one checkpoint (the second
waits, then loads). Weights are written to a temporary file and renamed, so an interrupted save never leaves a
checkpoint that looks complete.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path

WEIGHTS, META = "model.safetensors", "meta.json"


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
    """Write the weights (atomically), then the meta that marks the checkpoint complete; drop the training state."""
    from safetensors.torch import save_file

    tmp = directory / f"{WEIGHTS}.tmp{os.getpid()}"
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(tmp))
    os.replace(tmp, directory / WEIGHTS)
    (directory / META).write_text(json.dumps(meta, indent=1))
    for name in leftovers:
        (directory / name).unlink(missing_ok=True)


def load_weights(directory: Path, model, device) -> None:
    from safetensors.torch import load_file

    model.load_state_dict(load_file(str(directory / WEIGHTS), device=str(device)))
