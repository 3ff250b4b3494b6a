"""Removing heads from a model's weights (Michel et al. 2019 §4.3, the pruning speed-up).

transformers 5 has no ``prune_heads``. :func:`prune_heads` removes each pruned head's rows from the query, key and
value projections and its columns from the attention output projection, in place, so the pruned model does less
work. This is weight surgery, not an intervention on attention: the attention itself is still computed by the one
function in :mod:`bertattn_bench.engine.attention` (which finds the modules through :func:`attention.attention_modules`),
and it is kept out of that module so that the fine-tuned checkpoints' cache keys (which cover attention/) do not
change with it.

The pruned model computes exactly what the masked one does (Michel's ξ_h = 0 on the pruned heads; tested in
tests/test_head_pruning.py): a head's output enters the layer only through its columns of the output projection.
A layer whose heads are all pruned keeps one head with zeroed value weights (transformers reshapes with
``view(..., -1, head_size)``, which cannot take zero heads): its output is the projection's bias, as when masked.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Iterable

import torch

from ..base.errors import ModelLoadError
from . import attention

_HEAD_COUNTS = ("num_attention_heads", "n_heads")


def _linear(old: torch.nn.Linear, index: torch.Tensor, dim: int) -> torch.nn.Linear:
    """A copy of ``old`` keeping ``index`` along ``dim`` of its weight (0: output rows, with their bias; 1: inputs)."""
    w = old.weight.detach().index_select(dim, index).clone()
    new = torch.nn.Linear(w.shape[1], w.shape[0], bias=old.bias is not None, device=w.device, dtype=w.dtype)
    new.weight.data.copy_(w)
    if old.bias is not None:
        new.bias.data.copy_(old.bias.detach() if dim == 1 else old.bias.detach().index_select(0, index))
    new.weight.requires_grad_(old.weight.requires_grad)
    return new


def _parent_of(model: torch.nn.Module, child: torch.nn.Module) -> torch.nn.Module | None:
    for m in model.modules():
        if any(c is child for c in m.children()):
            return m
    return None


def _projections(model: torch.nn.Module, mod: torch.nn.Module) -> tuple[tuple[torch.nn.Module, str], ...]:
    """(owner, attribute) of the query, key, value and output projections of one self-attention module."""
    if all(hasattr(mod, a) for a in ("q_lin", "k_lin", "v_lin", "out_lin")):  # DistilBERT
        return (mod, "q_lin"), (mod, "k_lin"), (mod, "v_lin"), (mod, "out_lin")
    if all(hasattr(mod, a) for a in ("query", "key", "value")):
        parent = _parent_of(model, mod)
        out = getattr(getattr(parent, "output", None), "dense", None)
        if isinstance(out, torch.nn.Linear):  # BERT-like: BertAttention.self / BertAttention.output.dense
            return (mod, "query"), (mod, "key"), (mod, "value"), (parent.output, "dense")
    raise ModelLoadError(attention.unsupported(model, "no output projection found beside its self-attention"))


def cannot_prune(model: torch.nn.Module) -> str | None:
    """Why :func:`prune_heads` cannot remove ``model``'s heads (a family's skip reason), or None."""
    try:
        mods = attention.attention_modules(model)
        if getattr(getattr(model, "config", None), "model_type", None) == "albert":
            return "ALBERT shares one attention module across layers: its heads cannot be removed per layer"
        head_counts(model)
        for mod in mods:
            _projections(model, mod)
    except ModelLoadError as exc:
        return str(exc)
    return None


def head_counts(model: torch.nn.Module) -> list[int]:
    """Heads per layer as the model now has them (after pruning, layers may differ)."""
    mods = attention.attention_modules(model)
    if attention.site(model).path != attention.INTERFACE or not all(  # own-code/seam models, ModernBERT's qkv
            any(hasattr(m, a) for a in _HEAD_COUNTS) and hasattr(m, "attention_head_size") for m in mods):
        raise ModelLoadError(f"{type(model).__name__} ({getattr(model.config, 'model_type', '?')}): its heads cannot "
                             f"be removed from the weights here (head pruning knows BERT-like query/key/value "
                             f"modules); its attention is read and its heads masked by gates")
    return [int(next(getattr(m, a) for a in _HEAD_COUNTS if hasattr(m, a))) for m in mods]


def prune_heads(model: torch.nn.Module, heads: Iterable[tuple[int, int]]) -> dict:
    """Remove the given heads (0-based ``(layer, head)`` of the unpruned model) in place; returns a summary
    (heads removed, parameters before/after, layers reduced to one zeroed head). Prune once, from the full model."""
    if getattr(getattr(model, "config", None), "model_type", None) == "albert":
        raise ModelLoadError(attention.unsupported(model, "ALBERT shares one attention module across layers: its "
                                                          "heads cannot be removed per layer"))
    if getattr(model, "_bertattn_pruned", None):
        raise ValueError("prune_heads: this model was already pruned; prune the unpruned model once")
    mods = attention.attention_modules(model)
    drop: dict[int, set[int]] = defaultdict(set)
    counts = head_counts(model)
    for layer, head in heads:
        if not (0 <= layer < len(mods) and 0 <= head < counts[layer]):
            raise ValueError(f"head {attention.head_name(layer, head)} is outside the model's "
                             f"{len(mods)} layers x {counts[layer] if 0 <= layer < len(mods) else '?'} heads")
        drop[layer].add(head)
    before = sum(p.numel() for p in model.parameters())
    emptied = []
    for layer, mod in enumerate(mods):
        if not drop.get(layer):
            continue
        n_h = counts[layer]
        d = int(mod.attention_head_size)
        keep = [h for h in range(n_h) if h not in drop[layer]]
        empty = not keep
        if empty:
            keep = [min(drop[layer])]
            emptied.append(layer)
        dev = next(mod.parameters()).device
        index = torch.cat([torch.arange(h * d, (h + 1) * d, device=dev) for h in keep])
        (q_own, q), (k_own, k), (v_own, v), (o_own, o) = _projections(model, mod)
        for own, name in ((q_own, q), (k_own, k), (v_own, v)):
            setattr(own, name, _linear(getattr(own, name), index, 0))
        setattr(o_own, o, _linear(getattr(o_own, o), index, 1))
        if empty:
            v_lin = getattr(v_own, v)
            v_lin.weight.data.zero_()
            if v_lin.bias is not None:
                v_lin.bias.data.zero_()
        for a in _HEAD_COUNTS:
            if hasattr(mod, a):
                setattr(mod, a, len(keep))
        if hasattr(mod, "all_head_size"):
            mod.all_head_size = len(keep) * d
    after = sum(p.numel() for p in model.parameters())
    summary = {"heads_removed": sum(len(v) for v in drop.values()), "params_before": before, "params_after": after,
               "emptied_layers": emptied, "heads_per_layer": head_counts(model)}
    model._bertattn_pruned = summary
    return summary
