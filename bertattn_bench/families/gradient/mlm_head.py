"""The gradient family's MLM head: whether a checkpoint has trained head weights (from its tensors' names, headers
only: transformers would silently initialise a random head) and the MLM variant of a loaded model."""
from __future__ import annotations

import weakref
from pathlib import Path

import torch

# ---- finding (or refusing) the MLM head ---------------------------------------------------------------------

_WEIGHT_FILES = ("model.safetensors.index.json", "model.safetensors", "pytorch_model.bin.index.json",
                 "pytorch_model.bin")


def checkpoint_keys(source: str) -> list[str] | None:
    """Tensor names in a checkpoint (folder or cached hub name), read from headers only; None if none found."""
    import json

    from transformers.utils import cached_file

    from ...engine.model import LOCAL_ONLY

    for name in _WEIGHT_FILES:
        try:
            path = cached_file(source, name, _raise_exceptions_for_missing_entries=False,
                               _raise_exceptions_for_connection_errors=False, **LOCAL_ONLY.kwargs())
        except Exception:  # noqa: BLE001 - any failure to resolve a file means: not available here
            path = None
        if not path:
            continue
        if name.endswith(".index.json"):
            return list(json.loads(Path(path).read_text(encoding="utf-8"))["weight_map"])
        if name.endswith(".safetensors"):
            from safetensors import safe_open

            with safe_open(path, "pt") as f:
                return list(f.keys())
        try:
            return list(torch.load(path, map_location="meta", weights_only=True, mmap=True))
        except RuntimeError:  # a legacy (non-zip) .bin cannot be memory-mapped
            return list(torch.load(path, map_location="cpu", weights_only=True))
    return None


def missing_head_weights(config, keys: list[str]) -> list[str]:
    """The MLM head's parameters that ``keys`` lack (old ``gamma``/``beta`` names and tied aliases count)."""
    from transformers import AutoModelForMaskedLM

    with torch.device("meta"):
        skeleton = AutoModelForMaskedLM.from_config(config)
    base = skeleton.base_model_prefix
    tied = getattr(skeleton, "all_tied_weights_keys", None) or getattr(skeleton, "_tied_weights_keys", None) or {}
    aliases: dict[str, set[str]] = {}
    if isinstance(tied, dict):
        for a, b in tied.items():
            aliases.setdefault(a, set()).add(b)
            aliases.setdefault(b, set()).add(a)
    norm = {k.replace(".gamma", ".weight").replace(".beta", ".bias") for k in keys}
    head = [n for n, _ in skeleton.named_parameters() if not n.startswith(base + ".")]
    return [n for n in head if n not in norm and not (aliases.get(n, set()) & norm)]


def mlm_head_problem(info, config) -> str | None:
    """Why this (trained) model has no usable MLM head, or None when its checkpoint has one."""
    keys = checkpoint_keys(info.source)
    if keys is None:
        return f"{info.name}: no safetensors/PyTorch weights found to check for an MLM head"
    missing = missing_head_weights(config, keys)
    if missing:
        return (f"{info.name} has no masked-LM head weights (checkpoint lacks {', '.join(missing[:3])}"
                f"{', ...' if len(missing) > 3 else ''}); a head would be randomly initialised")
    return None


_MLM_MODELS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def mlm_model(loaded):
    """The MLM variant of ``loaded`` (memoised per session model): the checkpoint's head, or for a random-init
    twin a random head (same seed). Its parameters need no gradients: only the attention's are taken."""
    if loaded.model in _MLM_MODELS:
        return _MLM_MODELS[loaded.model]
    from ...engine.model import load_model, model_from_config

    info = loaded.info
    if info.random_init_seed is not None:
        mlm = model_from_config(loaded.model.config, loaded.tokenizer, info.name, info.slug, seed=info.random_init_seed,
                                device=info.device, with_mlm_head=True, source=info.source)
    else:
        mlm = load_model(info.source, device=info.device, with_mlm_head=True)
    mlm.model.requires_grad_(False)
    _MLM_MODELS[loaded.model] = mlm
    return mlm
