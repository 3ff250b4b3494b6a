"""The attention function registered with transformers' ``AttentionInterface``, its intervention points, and the
collector through which :func:`~.discovery.discover` learns which modules call it.

The function computes eager attention, ``softmax(QK^T * scale + mask)``, and applies a module's stack of frames of
:class:`Intervention` s at the four :data:`POINTS` (outer frame first); outside a run it is plain eager attention.
"""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Callable, Iterator

import torch

ATTN_IMPLEMENTATION = "bertattn_eager"
# training reads no map: torch's fused attention (transformers' sdpa function) under a name of ours, whose mask builder
# never asks the device whether a batch has padding (glue_finetune trains with it on a GPU)
TRAINING_ATTN_IMPLEMENTATION = "bertattn_sdpa"

Observer = Callable[[int, torch.Tensor], None]
ProbEditor = Callable[[int, torch.Tensor, torch.Tensor], torch.Tensor]
HeadOutEditor = Callable[[int, torch.Tensor], torch.Tensor]

POINTS = ("scores", "probs", "observe", "head_out")


@dataclass(frozen=True)
class Intervention:
    """A function applied at one point of every layer's attention (see the package docstring)."""

    point: str
    fn: Callable

    def __post_init__(self):
        if self.point not in POINTS:
            raise ValueError(f"intervention point {self.point!r}: expected one of {POINTS}")


class Frame(list):
    """One run's interventions on one module (a list subclass so frames compare by identity on removal)."""

    __eq__ = object.__eq__
    __hash__ = object.__hash__


def apply_point(frames, point: str, layer: int, x, *extra):
    """``x`` through every intervention at ``point`` of the stack ``frames``, outer frame first."""
    for frame in frames:
        for iv in frame:
            if iv.point == point:
                x = iv.fn(layer, x, *extra)
    return x


def observe_point(frames, layer: int, probs: torch.Tensor) -> None:
    """Every ``observe`` intervention of the stack reads ``probs``, outer frame first."""
    for frame in frames:
        for iv in frame:
            if iv.point == "observe":
                iv.fn(layer, probs)


# The modules that called the attention function during a :func:`calls_collected` block: one list per block,
# per thread and per (nested) block, so a discovery inside another's forward pass or in another thread keeps its own.
_COLLECTOR: ContextVar[list | None] = ContextVar("bertattn_attention_calls", default=None)


@contextmanager
def calls_collected() -> Iterator[list]:
    """A fresh list that collects, in call order, each module that calls the attention function in this block (in
    this thread and context); leaving the block restores the enclosing block's list."""
    calls: list = []
    token = _COLLECTOR.set(calls)
    try:
        yield calls
    finally:
        _COLLECTOR.reset(token)


def bertattn_attention_forward(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """Eager attention with the reading/intervention points (same maths as transformers' eager BERT)."""
    calls = _COLLECTOR.get()
    if calls is not None:
        calls.append(module)
    frames = getattr(module, "_bertattn_stack", None)
    layer = getattr(module, "_bertattn_layer", -1)
    if scaling is None:
        scaling = query.size(-1) ** -0.5
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        scores = scores + attention_mask
    key_mask = key_mask_from(attention_mask, scores) if frames else None
    if frames:
        scores = apply_point(frames, "scores", layer, scores, key_mask)
    probs = torch.softmax(scores, dim=-1)
    if frames:
        probs = apply_point(frames, "probs", layer, probs, key_mask)
    probs = torch.nn.functional.dropout(probs, p=dropout, training=module.training)
    if frames:
        observe_point(frames, layer, probs)
    out = torch.matmul(probs, value)  # (B, H, Q, D)
    if frames:
        out = apply_point(frames, "head_out", layer, out)
    return out.transpose(1, 2).contiguous(), probs



def key_mask_from(attention_mask: torch.Tensor | None, probs: torch.Tensor) -> torch.Tensor:
    """Boolean ``(B, 1|Q, K)`` mask of real (non-padded) keys from the additive 4-D mask."""
    if attention_mask is None:
        return torch.ones(probs.shape[0], 1, probs.shape[-1], dtype=torch.bool, device=probs.device)
    if attention_mask.dtype == torch.bool:
        return attention_mask[:, 0]
    # real keys add 0; masked ones finfo.min (transformers' masks) or -10000 (MarkupLM's own mask)
    return attention_mask[:, 0] > -5000.0


_registered = False


def asks_about_padding(device) -> bool:
    """Whether the mask builders keep transformers' skip of a batch without padding on ``device``: on the CPU (the
    question costs nothing there, and the recorded values were measured with it: under bf16 autocast a skipped
    mask leaves the scores in bf16, an added one promotes them), not on an accelerator, where asking is a wait."""
    return torch.device(device).type == "cpu"


def _materialized(builder: Callable) -> Callable:
    """``builder`` (transformers' eager or sdpa mask) building the mask without asking: transformers skips the mask of
    a batch without padding after asking the device ``padding_mask.all()``, a host synchronisation in every forward
    pass on a GPU (issue 47). There the mask is always built; a batch without padding adds 0 to every score (in
    float32 the same maps, bit for bit)."""

    def build(*args, **kwargs):
        if not asks_about_padding(kwargs.get("device", "cpu")):
            kwargs["allow_is_bidirectional_skip"] = False
        return builder(*args, **kwargs)

    return build


def register() -> None:
    """Register the attention function and its (eager) mask builder under ``ATTN_IMPLEMENTATION``, and torch's fused
    attention with its mask builder under ``TRAINING_ATTN_IMPLEMENTATION``.

    The mask must be registered too: transformers 5 gives a custom attention function *no* padding mask
    unless a mask function is registered under the same name (tests/test_attention.py guards this).
    """
    global _registered
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.masking_utils import AttentionMaskInterface, eager_mask, sdpa_mask

    if _registered and ATTN_IMPLEMENTATION in AttentionInterface() and ATTN_IMPLEMENTATION in AttentionMaskInterface():
        return  # (asked of transformers' registries, not only of our flag: a re-imported transformers has lost them)

    AttentionInterface.register(ATTN_IMPLEMENTATION, bertattn_attention_forward)
    AttentionMaskInterface.register(ATTN_IMPLEMENTATION, _materialized(eager_mask))
    AttentionInterface.register(TRAINING_ATTN_IMPLEMENTATION, sdpa_attention_forward)
    AttentionMaskInterface.register(TRAINING_ATTN_IMPLEMENTATION, _materialized(sdpa_mask))
    _registered = True

