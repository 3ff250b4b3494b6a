"""The only code that touches attention: read it, reduce it, intervene on it.

A function registered with transformers' ``AttentionInterface`` (and its mask with ``AttentionMaskInterface``)
computes eager attention, ``softmax(QK^T * scale + mask)``. While an :func:`attention_run` is active on a model,
each self-attention module carries a small :class:`AttentionHooks` object; the function then

1. lets ``edit_probs(layer, probs, key_mask)`` replace the probabilities (Kovaleva §4.6: uniform attention),
2. hands the (possibly edited) probabilities ``(batch, heads, query, key)`` to ``observe(layer, probs)``
   (reducers accumulate statistics on the model's device),
3. multiplies each head's output by ``head_gates[layer, head]`` (Michel §3: a masked head has ξ_h = 0).

Outside a run the function is plain eager attention. Interventions are functions passed in, never a fork of
the model code, and nothing outlives the ``with`` block.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import torch

ATTN_IMPLEMENTATION = "bertattn_eager"

Observer = Callable[[int, torch.Tensor], None]
ProbEditor = Callable[[int, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass
class AttentionHooks:
    layer: int
    observe: Observer | None = None
    edit_probs: ProbEditor | None = None
    head_gates: torch.Tensor | None = None  # (n_layers, n_heads)


def bertattn_attention_forward(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """Eager attention with the reading/intervention points (same maths as transformers' eager BERT)."""
    hooks: AttentionHooks | None = getattr(module, "_bertattn_hooks", None)
    if scaling is None:
        scaling = query.size(-1) ** -0.5
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        scores = scores + attention_mask
    probs = torch.softmax(scores, dim=-1)
    if hooks is not None and hooks.edit_probs is not None:
        probs = hooks.edit_probs(hooks.layer, probs, key_mask_from(attention_mask, probs))
    probs = torch.nn.functional.dropout(probs, p=dropout, training=module.training)
    if hooks is not None and hooks.observe is not None:
        hooks.observe(hooks.layer, probs)
    out = torch.matmul(probs, value)  # (B, H, Q, D)
    if hooks is not None and hooks.head_gates is not None:
        out = out * hooks.head_gates[hooks.layer].to(out.dtype).view(1, -1, 1, 1)
    return out.transpose(1, 2).contiguous(), probs


def key_mask_from(attention_mask: torch.Tensor | None, probs: torch.Tensor) -> torch.Tensor:
    """Boolean ``(B, 1|Q, K)`` mask of real (non-padded) keys from the additive 4-D mask."""
    if attention_mask is None:
        return torch.ones(probs.shape[0], 1, probs.shape[-1], dtype=torch.bool, device=probs.device)
    if attention_mask.dtype == torch.bool:
        return attention_mask[:, 0]
    return attention_mask[:, 0] > torch.finfo(attention_mask.dtype).min / 2


_registered = False


def register() -> None:
    """Register the attention function and its (eager) mask builder under ``ATTN_IMPLEMENTATION``.

    The mask must be registered too: transformers 5 gives a custom attention function *no* padding mask
    unless a mask function is registered under the same name (tests/test_attention.py guards this).
    """
    global _registered
    if _registered:
        return
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask

    AttentionInterface.register(ATTN_IMPLEMENTATION, bertattn_attention_forward)
    AttentionMaskInterface.register(ATTN_IMPLEMENTATION, eager_mask)
    _registered = True


def attention_modules(model: torch.nn.Module, n_layers: int | None = None) -> list[torch.nn.Module]:
    """The self-attention modules, in layer order (BERT-like: they own query/key/value projections)."""
    mods = [m for m in model.modules() if all(hasattr(m, a) for a in ("query", "key", "value", "num_attention_heads"))]
    if not mods:
        from .errors import ModelLoadError

        raise ModelLoadError(f"{type(model).__name__}: no BERT-like self-attention modules found (unsupported model)")
    if n_layers is not None and len(mods) != n_layers:
        from .errors import ModelLoadError

        raise ModelLoadError(f"{type(model).__name__}: found {len(mods)} attention modules for {n_layers} layers")
    if getattr(model.config, "_attn_implementation", None) != ATTN_IMPLEMENTATION:
        from .errors import ModelLoadError

        raise ModelLoadError(
            f"{type(model).__name__} uses attention implementation {model.config._attn_implementation!r}; "
            f"load it with bertattn_bench.model.load_model (attn_implementation={ATTN_IMPLEMENTATION!r})"
        )
    return mods


@contextmanager
def attention_run(
    model: torch.nn.Module,
    observe: Observer | None = None,
    edit_probs: ProbEditor | None = None,
    head_gates: torch.Tensor | None = None,
) -> Iterator[None]:
    """Activate reading/interventions on ``model`` for the duration of the block."""
    mods = attention_modules(model)
    for layer, mod in enumerate(mods):
        mod._bertattn_hooks = AttentionHooks(layer, observe, edit_probs, head_gates)
    try:
        yield
    finally:
        for mod in mods:
            mod.__dict__.pop("_bertattn_hooks", None)


# ---- interventions (functions passed in) -------------------------------------------------------------------------

def uniform_attention(heads: Sequence[tuple[int, int]]) -> ProbEditor:
    """Kovaleva et al. §4.6 "disabling" a head: its attention becomes uniform 1/L over the real tokens.

    ``heads``: 0-based ``(layer, head)`` pairs.
    """
    by_layer: dict[int, list[int]] = {}
    for layer, head in heads:
        by_layer.setdefault(layer, []).append(head)

    def edit(layer: int, probs: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
        hs = by_layer.get(layer)
        if not hs:
            return probs
        uniform = key_mask.to(probs.dtype)
        uniform = (uniform / uniform.sum(-1, keepdim=True)).unsqueeze(1).expand(-1, 1, probs.shape[2], -1)
        probs = probs.clone()
        probs[:, hs] = uniform.expand(-1, len(hs), -1, -1)
        return probs

    return edit


def zero_heads(n_layers: int, n_heads: int, heads: Sequence[tuple[int, int]], device=None) -> torch.Tensor:
    """Michel et al. §3 head masking: gates ξ with ξ_h = 0 for the given 0-based heads, 1 elsewhere."""
    gates = torch.ones(n_layers, n_heads, device=device)
    for layer, head in heads:
        gates[layer, head] = 0.0
    return gates


def head_name(layer: int, head: int) -> str:
    """0-based indices → the papers' ``layer-head`` name, 1-based."""
    return f"{layer + 1}-{head + 1}"


def parse_head_name(name: str) -> tuple[int, int]:
    """The papers' 1-based ``layer-head`` name → 0-based ``(layer, head)``; the inverse of :func:`head_name`."""
    try:
        layer, head = (int(x) for x in name.split("-"))
    except ValueError:
        raise ValueError(f"head {name!r}: expected 'layer-head', 1-based (e.g. '5-4')") from None
    if layer < 1 or head < 1:
        raise ValueError(f"head {name!r}: layers and heads are numbered from 1")
    return layer - 1, head - 1


# ---- the batched core ------------------------------------------------------------------------------------------

class Reducer:
    """A statistic accumulated batch by batch on the model's device; ``finalize()`` returns a small result.

    A reducer that sets ``wants_hidden_states`` also gets the batch's hidden states (embeddings + every layer) from
    the same forward pass through ``end_batch``."""

    wants_hidden_states = False

    def start_batch(self, batch) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def end_batch(self, hidden_states: tuple[torch.Tensor, ...] | None) -> None:
        """After the forward pass of the batch; ``hidden_states`` only when some reducer wants them."""

    def update(self, layer: int, probs: torch.Tensor) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def finalize(self):  # pragma: no cover - interface
        raise NotImplementedError


def run_reducers(model: torch.nn.Module, batches, reducers: Sequence[Reducer], edit_probs: ProbEditor | None = None,
                 head_gates: torch.Tensor | None = None, progress: bool = False, desc: str = "attention") -> list:
    """One forward pass per batch feeds every reducer every layer's attention; maps are never kept."""

    def observe(layer: int, probs: torch.Tensor) -> None:
        for r in reducers:
            r.update(layer, probs)

    if progress:
        from tqdm.auto import tqdm

        batches = tqdm(batches, desc=desc, unit="batch", leave=False, disable=None)  # quiet when not a TTY
    hidden = any(getattr(r, "wants_hidden_states", False) for r in reducers)
    with torch.inference_mode(), attention_run(model, observe, edit_probs, head_gates):
        for batch in batches:
            for r in reducers:
                r.start_batch(batch)
            out = model(**batch.model_inputs(), output_hidden_states=hidden)
            for r in reducers:
                if hasattr(r, "end_batch"):
                    r.end_batch(out.hidden_states if hidden else None)
    return [r.finalize() for r in reducers]
