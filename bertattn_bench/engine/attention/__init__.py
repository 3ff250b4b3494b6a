"""The only code that touches attention: read it, reduce it, intervene on it (a package, one module per job).

A function registered with transformers' ``AttentionInterface`` (and its mask with ``AttentionMaskInterface``)
computes eager attention, ``softmax(QK^T * scale + mask)``. While an :func:`attention_run` is active on a model,
each self-attention module carries a stack of frames of :class:`Intervention` s, one frame per (nested) run.
The attention function applies them at four points, outer frame first:

* ``"scores"``   ``fn(layer, scores, key_mask) -> scores`` — the pre-softmax scores ``(B, H, Q, K)``;
* ``"probs"``    ``fn(layer, probs, key_mask) -> probs`` — the probabilities (Kovaleva §4.6: uniform attention);
* ``"observe"``  ``fn(layer, probs) -> None`` — read the (edited, post-dropout) probabilities; reducers
  accumulate statistics on the model's device;
* ``"head_out"`` ``fn(layer, out) -> out`` — each head's output ``(B, H, Q, D)``, the attention-weighted values
  after dropout (Michel §3: a masked head has ξ_h = 0; a gate ξ_h = 1 that requires grad gives ∂L/∂ξ_h).

``key_mask`` is the boolean ``(B, 1|Q, K)`` mask of real (unpadded) keys. Outside a run the function is plain
eager attention. Interventions are functions passed in, never a fork of the model code; nested runs stack and
each ``with`` block removes exactly its own frame on exit (also on an exception), leaving the outer ones.

The modules, one job each (lowest first): :mod:`.interface` (the registered attention function, its intervention
points and ``register()``), :mod:`.head_names` (the papers' ``layer-head`` names), :mod:`.discovery` (where a
model's maps are: :func:`discover`, :class:`Site`, the own-code and seam hooks, the refused architectures),
:mod:`.interventions` (the stack, :func:`attention_run`, and the papers' interventions) and :mod:`.core` (the
batched forward loop and the reducers' interface). Every public name is importable from this package.
"""
from .core import Reducer, forward, run_reducers
from .discovery import (
    INTERFACE,
    NO_SOFTMAX_MAP,
    OWN_ATTENTION,
    OWN_CODE,
    SEAM,
    SUPPORTED,
    Site,
    attention_modules,
    discover,
    layers_heads,
    own_attention_reason,
    seam_reason,
    site,
    unsupported,
)
from .head_names import head_name, parse_head_name
from .interface import (
    ATTN_IMPLEMENTATION,
    POINTS,
    TRAINING_ATTN_IMPLEMENTATION,
    HeadOutEditor,
    Intervention,
    Observer,
    ProbEditor,
    bertattn_attention_forward,
    key_mask_from,
    register,
)
from .interventions import UniformRows, attention_run, gate_heads, head_gate_gradients, uniform_attention, zero_heads

__all__ = [
    "ATTN_IMPLEMENTATION", "INTERFACE", "NO_SOFTMAX_MAP", "OWN_ATTENTION", "OWN_CODE", "POINTS", "SEAM", "SUPPORTED",
    "TRAINING_ATTN_IMPLEMENTATION", "HeadOutEditor", "Intervention", "Observer", "ProbEditor", "Reducer", "Site",
    "UniformRows", "attention_modules", "attention_run", "bertattn_attention_forward", "discover", "forward",
    "gate_heads", "head_gate_gradients", "head_name", "key_mask_from", "layers_heads", "own_attention_reason",
    "parse_head_name", "register", "run_reducers", "seam_reason", "site", "uniform_attention", "unsupported",
    "zero_heads",
]
