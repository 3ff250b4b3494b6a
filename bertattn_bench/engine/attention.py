"""The only code that touches attention: read it, reduce it, intervene on it.

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
"""
from __future__ import annotations

from contextlib import closing, contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import torch

ATTN_IMPLEMENTATION = "bertattn_eager"

Observer = Callable[[int, torch.Tensor], None]
ProbEditor = Callable[[int, torch.Tensor, torch.Tensor], torch.Tensor]
HeadOutEditor = Callable[[int, torch.Tensor], torch.Tensor]

POINTS = ("scores", "probs", "observe", "head_out")


@dataclass(frozen=True)
class Intervention:
    """A function applied at one point of every layer's attention (see the module docstring)."""

    point: str
    fn: Callable

    def __post_init__(self):
        if self.point not in POINTS:
            raise ValueError(f"intervention point {self.point!r}: expected one of {POINTS}")


class _Frame(list):
    """One run's interventions on one module (a list subclass so frames compare by identity on removal)."""

    __eq__ = object.__eq__
    __hash__ = object.__hash__


def _apply(frames, point: str, layer: int, x, *extra):
    for frame in frames:
        for iv in frame:
            if iv.point == point:
                x = iv.fn(layer, x, *extra)
    return x


def bertattn_attention_forward(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """Eager attention with the reading/intervention points (same maths as transformers' eager BERT)."""
    if _DISCOVERY is not None:
        _DISCOVERY.append(module)
    frames = getattr(module, "_bertattn_stack", None)
    layer = getattr(module, "_bertattn_layer", -1)
    if scaling is None:
        scaling = query.size(-1) ** -0.5
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        scores = scores + attention_mask
    key_mask = key_mask_from(attention_mask, scores) if frames else None
    if frames:
        scores = _apply(frames, "scores", layer, scores, key_mask)
    probs = torch.softmax(scores, dim=-1)
    if frames:
        probs = _apply(frames, "probs", layer, probs, key_mask)
    probs = torch.nn.functional.dropout(probs, p=dropout, training=module.training)
    if frames:
        for frame in frames:
            for iv in frame:
                if iv.point == "observe":
                    iv.fn(layer, probs)
    out = torch.matmul(probs, value)  # (B, H, Q, D)
    if frames:
        out = _apply(frames, "head_out", layer, out)
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
_DISCOVERY: list | None = None  # while :func:`discover` runs: the modules that called the attention function


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


# Projection names of a self-attention module that calls transformers' attention interface (BERT-like, DistilBERT).
_PROJECTIONS = (("query", "key", "value"), ("q_lin", "k_lin", "v_lin"))
_HEAD_COUNTS = ("num_attention_heads", "n_heads")

# Architectures that compute attention in their own code (never through the attention interface), and why: their
# maps cannot be read here, nor intervened on. Keys are ``config.model_type``.
OWN_ATTENTION = {
    "deberta-v2": "disentangled attention (content-to-position and position-to-content scores) in its own code",
    "deberta": "disentangled attention (content-to-position and position-to-content scores) in its own code",
    "mpnet": "a relative-position bias added to the scores in its own attention code",
    "megatron-bert": "its own eager attention code, not transformers' attention interface",
    "rembert": "its own eager attention code, not transformers' attention interface",
    "roformer": "rotary position embeddings inside its own attention code",
    "convbert": "mixed attention (span-based dynamic convolution heads beside self-attention) in its own code",
    "nystromformer": "a Nystrom approximation of softmax attention (no full attention map)",
    "big_bird": "block-sparse attention in its own code",
    "luke": "entity-aware attention in its own code",
    "ibert": "integer-only (quantised) softmax in its own attention code",
    "longformer": "sliding-window and global attention in its own code",
    "fnet": "Fourier mixing instead of attention (it has no attention maps)",
    "squeezebert": "grouped-convolution self-attention in its own code",
    "funnel": "relative-position attention with sequence pooling in its own code",
    "canine": "character-level attention stacks (local, downsampled, deep) in its own code",
    "mra": "multi-resolution approximate attention in its own code",
    "yoso": "LSH-sampled approximate attention in its own code",
    "xlm": "its own multi-head attention code",
    "flaubert": "its own multi-head attention code",
    "tapas": "its own attention code over table-structured inputs",
    "xlnet": "two-stream relative attention in its own code",
    "lilt": "its own attention code over coupled text and layout streams",
    "bros": "its own attention code with bounding-box relative positions",
}
SUPPORTED = ("encoders whose self-attention calls transformers' attention interface (BERT, RoBERTa, DistilBERT, "
             "ALBERT with one attention layer per hidden layer, ModernBERT, ...) or computes a (batch, heads, tokens, "
             "tokens) softmax map that its own code passes through a module (DeBERTa, DeBERTa-v2/v3, MPNet, "
             "MegatronBERT, RoFormer, XLNet, ...); docs/architectures.md lists them")


def own_attention_reason(model: torch.nn.Module) -> str:
    """Why a model's attention does not reach the attention interface (known architectures), else the general why."""
    model_type = getattr(getattr(model, "config", None), "model_type", "?")
    return OWN_ATTENTION.get(model_type, "its self-attention does not call transformers' attention interface "
                                         "(attention computed in its own code)")


def unsupported(model: torch.nn.Module, reason: str | None = None) -> str:
    """One line: the architecture, why its attention cannot be read here, and what is supported."""
    model_type = getattr(getattr(model, "config", None), "model_type", "?")
    reason = reason or own_attention_reason(model)
    return (f"{type(model).__name__} ({model_type}) is not supported: {reason}, so its attention maps cannot be "
            f"read or intervened on here (supported: {SUPPORTED})")


class _CallCounter:
    """Attention calls since the encoder's forward began: the layer index of a module shared by layers (ALBERT)."""

    def __init__(self, n_layers: int):
        self.n_layers, self.calls = n_layers, 0


def _reset_calls(encoder, args):
    encoder._bertattn_calls.calls = 0


def _count_call(module, args):
    c = module._bertattn_calls
    module._bertattn_layer = c.calls % c.n_layers  # read by bertattn_attention_forward for this call
    c.calls += 1


def _shared_layers(model: torch.nn.Module, mods: list, n_layers: int) -> None:
    """ALBERT shares one attention module among the layers of a group (``AlbertTransformer`` calls group
    ``int(i / (L / G))`` for layer i): each call's layer is counted from the encoder's start (pre-forward hooks,
    registered once), so observation, uniform attention and head gates see the true layer."""
    from ..base.errors import ModelLoadError

    cfg = model.config
    inner = int(getattr(cfg, "inner_group_num", 1))
    if inner != 1:
        raise ModelLoadError(unsupported(model, f"inner_group_num={inner} runs {inner} attention layers per hidden "
                                                f"layer, so its {n_layers} layers have no single attention map each "
                                                f"(ALBERT with inner_group_num=1 is supported)"))
    encoders = [m for m in model.modules() if hasattr(m, "albert_layer_groups")]
    if len(encoders) != 1:
        raise ModelLoadError(unsupported(model, "its shared attention layers are not under one ALBERT encoder"))
    (encoder,) = encoders
    if "_bertattn_calls" in encoder.__dict__:
        return
    counter = _CallCounter(n_layers)
    encoder._bertattn_calls = counter
    encoder.register_forward_pre_hook(_reset_calls)
    for m in mods:
        m._bertattn_calls = counter
        m.register_forward_pre_hook(_count_call)


INTERFACE, OWN_CODE, SEAM = "interface", "own-code", "seam"

# Architectures refused whatever their code looks like: no softmax map over the input tokens (keys: model_type).
NO_SOFTMAX_MAP = {
    "fnet": "Fourier mixing instead of attention (it has no attention maps)",
    "nystromformer": "a Nystrom approximation of softmax attention (no exact attention map)",
    "mra": "multi-resolution approximate attention (no exact attention map)",
    "yoso": "LSH-sampled approximate attention (no exact attention map)",
    "longformer": "sliding-window attention: its maps are over a window of keys, not over the input tokens",
}


@dataclass
class Site:
    """Where a model's attention maps are: ``INTERFACE`` (modules that call the registered attention function,
    distinct, in layer order; ``calls`` per forward pass) or ``OWN_CODE`` (for each layer, the module whose output
    is that layer's post-dropout probabilities ``(B, H, T, T)``, e.g. the attention dropout; found by matching the
    model's own ``output_attentions``)."""

    path: str
    modules: list
    calls: int
    n_heads: int


def _base_model(model: torch.nn.Module) -> torch.nn.Module:
    """The transformers base model inside ``model`` (itself, a task model's ``base_model``, or a wrapper's)."""
    for m in model.modules():
        if hasattr(m, "base_model_prefix") and hasattr(m, "config"):
            return m.base_model
    return model


def _site_of(model: torch.nn.Module) -> Site | None:
    for m in model.modules():
        site = m.__dict__.get("_bertattn_site")
        if site is not None:
            return site
    return None


class _KeyMask:
    """The 2-D attention mask of the base model's current forward pass (own-code path: real keys for the editors)."""

    mask: torch.Tensor | None = None


def _keep_mask(base, args, kwargs):
    holder = base.__dict__["_bertattn_keymask"]
    mask = kwargs.get("attention_mask")
    if mask is None and len(args) > 1:  # positional (input_ids, attention_mask, ...), as every encoder's forward
        mask = args[1]
    holder.mask = mask if isinstance(mask, torch.Tensor) and mask.dim() == 2 else None


def _record_4d(store: list, tuples: list, module, args, out) -> None:
    if isinstance(out, torch.Tensor) and out.dim() == 4:  # a module whose whole output is the map: it can be edited
        store.append((module, out.data_ptr(), tuple(out.shape)))
    elif isinstance(out, tuple):  # a module that returns the map beside its output (the seam path)
        for i, o in enumerate(out):
            if isinstance(o, torch.Tensor) and o.dim() == 4:
                tuples.append((module, i, o.data_ptr(), tuple(o.shape)))


# Names of an attention module's value and output projections (the seam path: each head's context is the output
# projection's input, the head's slice of it).
_VALUE_NAMES = ("v_lin", "value", "v", "v_proj", "value_proj")
_OUTPUT_NAMES = ("out_lin", "o", "o_proj", "out_proj", "dense", "out")


def _uniform_context(mod, ctx_heads: torch.Tensor, uniform: torch.Tensor) -> torch.Tensor:
    """Heads where ``uniform (B, H)`` is True get the mean of their value vectors over the example's real keys."""
    values = mod.__dict__.get("_bertattn_values")
    if values is None:
        raise RuntimeError(f"{type(mod).__name__}: the value projection's output was not seen before the output "
                           f"projection")
    b, h, t, d = ctx_heads.shape
    v = values.view(b, -1, h, d).transpose(1, 2)  # (B, H, K, D)
    mask = mod.__dict__["_bertattn_keymask"].mask
    if mask is None or mask.shape != (b, v.shape[2]):
        real = torch.ones(b, v.shape[2], dtype=v.dtype, device=v.device)
    else:
        real = mask.to(v.dtype)
    mean = (v * real[:, None, :, None]).sum(2) / real.sum(-1)[:, None, None]  # (B, H, D)
    return torch.where(uniform[:, :, None, None], mean[:, :, None, :].to(ctx_heads.dtype), ctx_heads)


def _seam_values_hook(lin, args, out):
    mod = lin.__dict__["_bertattn_seam_owner"]
    if mod.__dict__.get("_bertattn_stack"):
        mod.__dict__["_bertattn_values"] = out


def _seam_context_hook(lin, args):
    """Pre-hook on the output projection: each head's context (its slice of the input) uniform or gated."""
    mod = lin.__dict__["_bertattn_seam_owner"]
    frames = mod.__dict__.get("_bertattn_stack")
    if not frames:
        return None
    ctx = args[0]
    b, t, hd = ctx.shape
    h = mod.__dict__["_bertattn_heads"]
    c = ctx.view(b, t, h, hd // h).transpose(1, 2)  # (B, H, T, D)
    layer = mod._bertattn_layer
    for frame in frames:
        for iv in frame:
            if iv.point == "probs":
                uniform = iv.fn.uniform_mask(layer, b, h, ctx.device)
                if uniform is not None and bool(uniform.any()):
                    c = _uniform_context(mod, c, uniform)
    c = _apply(frames, "head_out", layer, c)
    return (c.transpose(1, 2).reshape(b, t, hd),) + tuple(args[1:])


def _seam_ask_maps(mod, args, kwargs):
    if mod.__dict__.get("_bertattn_stack"):
        kwargs["output_attentions"] = True
    return args, kwargs


def _seam_observe_hook(mod, args, out):
    """The module returned its map beside its output: observe it, edited as the context was (uniform rows)."""
    frames = mod.__dict__.get("_bertattn_stack")
    mod.__dict__.pop("_bertattn_values", None)
    if not frames:
        return None
    probs = out[mod.__dict__["_bertattn_map_index"]]
    mask = mod.__dict__["_bertattn_keymask"].mask
    if mask is not None and mask.shape[0] == probs.shape[0] and mask.shape[-1] == probs.shape[-1]:
        key_mask = mask.bool()[:, None, :]
    else:
        key_mask = torch.ones(probs.shape[0], 1, probs.shape[-1], dtype=torch.bool, device=probs.device)
    layer = mod._bertattn_layer
    probs = _apply(frames, "probs", layer, probs, key_mask)
    for frame in frames:
        for iv in frame:
            if iv.point == "observe":
                iv.fn(layer, probs)
    return None


def _find_seam(mod, a: torch.Tensor, lin_io: dict, heads: int):
    """(value projection, output projection) of ``mod`` whose recorded input is ``a @ V`` head by head, or None."""
    import inspect

    try:
        params = inspect.signature(mod.forward).parameters
    except (TypeError, ValueError):
        return None
    if "output_attentions" not in params:
        return None
    for vn in _VALUE_NAMES:
        v_lin = getattr(mod, vn, None)
        if not isinstance(v_lin, torch.nn.Linear) or v_lin not in lin_io:
            continue
        for on in _OUTPUT_NAMES:
            o_lin = getattr(mod, on, None)
            if not isinstance(o_lin, torch.nn.Linear) or o_lin not in lin_io:
                continue
            v, ctx = lin_io[v_lin][1], lin_io[o_lin][0]
            b, k, hd = v.shape
            if ctx.shape[-1] != hd or hd % heads:
                continue
            expect = (a @ v.view(b, k, heads, hd // heads).transpose(1, 2)).transpose(1, 2).reshape(b, -1, hd)
            if expect.shape == ctx.shape and torch.allclose(expect, ctx, atol=1e-5, rtol=1e-4):
                return v_lin, o_lin
    return None


def _own_probs_hook(mod, args, probs):
    """Forward hook on an own-code model's attention-probability module: the ``probs``, ``observe`` and ``head_out``
    points (a head's output ξ·(P V) is (ξ·P) V, so gates scale its probabilities)."""
    frames = mod.__dict__.get("_bertattn_stack")
    if not frames or not isinstance(probs, torch.Tensor) or probs.dim() != 4:  # e.g. XLNet's dropout, reused later
        return None
    layer = mod._bertattn_layer
    mask = mod.__dict__["_bertattn_keymask"].mask
    if mask is not None and mask.shape[0] == probs.shape[0] and mask.shape[-1] == probs.shape[-1]:
        key_mask = mask.bool()[:, None, :]
    else:
        key_mask = torch.ones(probs.shape[0], 1, probs.shape[-1], dtype=torch.bool, device=probs.device)
    probs = _apply(frames, "probs", layer, probs, key_mask)
    for frame in frames:
        for iv in frame:
            if iv.point == "observe":
                iv.fn(layer, probs)
    return _apply(frames, "head_out", layer, probs)


def discover(model: torch.nn.Module) -> Site:
    """Find where ``model``'s attention maps are (one forward pass on 8 tokens) and keep it on the base model.

    Modules that call the registered attention function take the interface path. Otherwise the model's own
    ``output_attentions`` maps are matched to the module that outputs them (the same tensor): a forward hook there
    reads and edits them. Refused with one line: no maps, maps not ``(B, H, T, T)`` over the input tokens, or maps
    that leave no module."""
    from ..base.errors import ModelLoadError

    global _DISCOVERY
    base = _base_model(model)
    cfg = base.config
    model_type = getattr(cfg, "model_type", None)
    if model_type in NO_SOFTMAX_MAP:
        raise ModelLoadError(unsupported(model, NO_SOFTMAX_MAP[model_type]))
    if getattr(cfg, "_attn_implementation", None) != ATTN_IMPLEMENTATION:
        raise ModelLoadError(
            f"{type(model).__name__} uses attention implementation {cfg._attn_implementation!r}; load it with "
            f"bertattn_bench.engine.model.load_model (attn_implementation={ATTN_IMPLEMENTATION!r})")
    dev = next(base.parameters()).device
    t = 8
    ids = (torch.arange(t, device=dev)[None] + 5) % int(getattr(cfg, "vocab_size", 100) or 100)
    mask = torch.ones_like(ids)
    outs: list = []
    tuples: list = []
    lin_io: dict = {}  # linear module -> (input, output) of its first call
    hooks = [m.register_forward_hook(lambda mod, a, o: _record_4d(outs, tuples, mod, a, o)) for m in base.modules()]
    hooks += [m.register_forward_hook(lambda mod, a, o: None if mod in lin_io else lin_io.update({mod: (a[0], o)}))
              for m in base.modules() if isinstance(m, torch.nn.Linear)]
    _DISCOVERY = []
    try:
        with torch.no_grad():
            res = base(input_ids=ids, attention_mask=mask, output_attentions=True)
        calls = _DISCOVERY
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        reason = OWN_ATTENTION.get(model_type, "")
        raise ModelLoadError(unsupported(model, f"{reason + '; ' if reason else ''}a forward pass on text failed "
                                                f"({type(exc).__name__}: {first})")) from None
    finally:
        _DISCOVERY = None
        for h in hooks:
            h.remove()
    if calls:
        mods = list(dict.fromkeys(calls))
        heads = {int(getattr(res, "attentions", None)[0].shape[1])} if getattr(res, "attentions", None) else set()
        site = Site(INTERFACE, mods, len(calls), heads.pop() if heads else int(cfg.num_attention_heads))
    else:
        maps = getattr(res, "attentions", None)
        if not maps or any(a is None for a in maps):
            raise ModelLoadError(unsupported(model, f"{OWN_ATTENTION.get(model_type, 'its own attention code')}, "
                                                    f"and it returns no attention maps with output_attentions"))
        mods, seams = [], []
        for i, a in enumerate(maps):
            if not isinstance(a, torch.Tensor) or a.dim() != 4:
                raise ModelLoadError(unsupported(model, f"layer {i + 1}'s attention is not one (batch, heads, "
                                                        f"queries, keys) map"))
            if a.shape[-2:] != (t, t):
                raise ModelLoadError(unsupported(model, f"layer {i + 1}'s map is {a.shape[-2]}x{a.shape[-1]} for "
                                                        f"{t} input tokens, not a softmax map over its input tokens"))
            hit = next((m for m, ptr, shape in outs if ptr == a.data_ptr() and shape == tuple(a.shape)), None)
            if hit is None:  # the seam: a module that returns the map, its value and output projections
                owner = next(((m, j) for m, j, ptr, shape in tuples
                              if ptr == a.data_ptr() and shape == tuple(a.shape)), None)
                seam = owner and _find_seam(owner[0], a, lin_io, int(a.shape[1]))
                if seam:
                    hit = owner[0]
                    seams.append((owner[1], *seam))
            if hit is None:
                raise ModelLoadError(unsupported(model, f"{OWN_ATTENTION.get(model_type, 'its own attention code')}"
                                                        f": layer {i + 1}'s probabilities leave no module, so they "
                                                        f"cannot be read or edited at a module boundary"))
            mods.append(hit)
        heads = {int(a.shape[1]) for a in maps}
        if len(heads) != 1 or len(set(map(id, mods))) != len(mods):
            raise ModelLoadError(unsupported(model, f"its layers have different head counts {sorted(heads)} or "
                                                    f"share an attention module"))
        if seams and len(seams) != len(mods):
            raise ModelLoadError(unsupported(model, "only some of its layers' maps reach a module boundary"))
        holder = _KeyMask()
        base.__dict__["_bertattn_keymask"] = holder
        base.register_forward_pre_hook(_keep_mask, with_kwargs=True)
        n_heads = heads.pop()
        for layer, m in enumerate(mods):
            m.__dict__["_bertattn_keymask"] = holder
            m._bertattn_layer = layer
            if not seams:
                m.register_forward_hook(_own_probs_hook)
                continue
            index, v_lin, o_lin = seams[layer]
            m.__dict__.update(_bertattn_map_index=index, _bertattn_heads=n_heads)
            for lin in (v_lin, o_lin):
                lin.__dict__["_bertattn_seam_owner"] = m
            v_lin.register_forward_hook(_seam_values_hook)
            o_lin.register_forward_pre_hook(_seam_context_hook)
            m.register_forward_pre_hook(_seam_ask_maps, with_kwargs=True)
            m.register_forward_hook(_seam_observe_hook)
        site = Site(SEAM if seams else OWN_CODE, mods, len(mods), n_heads)
    base.__dict__["_bertattn_site"] = site
    return site


def site(model: torch.nn.Module) -> Site:
    """The model's :class:`Site` (found once by :func:`discover`, then kept with the model and its deep copies)."""
    return _site_of(model) or discover(model)


def seam_reason(model: torch.nn.Module) -> str:
    """Why a seam-path model takes no probability edits other than uniform attention."""
    return ("its attention probabilities never leave its own attention code, so the only edits applied are at the "
            "output projection's input (each head's context): uniform attention and head gates; other probability "
            "edits (e.g. the attention-gradient family's) cannot be applied")


def layers_heads(model: torch.nn.Module) -> tuple[int, int]:
    """(layers, heads) of the attention maps: heads are the softmax heads the maps have (ConvBERT: its
    self-attention heads, not the config's total with the convolution heads)."""
    return int(model.config.num_hidden_layers), site(model).n_heads


def attention_modules(model: torch.nn.Module, n_layers: int | None = None) -> list[torch.nn.Module]:
    """The modules where each layer's attention is read and edited, in layer order (:func:`site`): modules that
    call the attention interface, or own-code models' probability modules. ALBERT's interface modules are shared
    by layers: each distinct module once, the layer of each call counted (:func:`_shared_layers`). A model whose
    maps cannot be found is refused with :func:`unsupported`."""
    from ..base.errors import ModelLoadError

    s = site(model)
    mods = s.modules
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if s.path == INTERFACE and s.calls != len(mods):
        if model_type != "albert":
            raise ModelLoadError(unsupported(model, f"{len(mods)} attention modules are called {s.calls} times "
                                                    f"per forward pass (shared layers)"))
        layers = n_layers if n_layers is not None else int(model.config.num_hidden_layers)
        _shared_layers(model, mods, layers)
    elif n_layers is not None and len(mods) != n_layers:
        raise ModelLoadError(unsupported(model, f"found {len(mods)} attention maps for {n_layers} layers"))
    if s.path == INTERFACE and getattr(model.config, "_attn_implementation", None) != ATTN_IMPLEMENTATION:
        raise ModelLoadError(
            f"{type(model).__name__} uses attention implementation {model.config._attn_implementation!r}; "
            f"load it with bertattn_bench.engine.model.load_model (attn_implementation={ATTN_IMPLEMENTATION!r})"
        )
    return mods


@contextmanager
def attention_run(
    model: torch.nn.Module,
    observe: Observer | None = None,
    edit_probs: ProbEditor | None = None,
    head_gates: torch.Tensor | None = None,
    interventions: Sequence[Intervention] = (),
) -> Iterator[None]:
    """Activate reading/interventions on ``model`` for the duration of the block.

    ``observe``, ``edit_probs`` and ``head_gates`` are shorthands for ``Intervention("observe"|"probs", fn)`` and
    :func:`gate_heads`; ``interventions`` lists any others. Runs nest: the inner run's frame is applied after the
    outer one's, and leaving a block removes its own frame only.
    """
    mods = attention_modules(model)
    frame = _Frame(interventions)
    if edit_probs is not None:
        frame.append(Intervention("probs", edit_probs))
    if observe is not None:
        frame.append(Intervention("observe", observe))
    if head_gates is not None:
        frame.append(gate_heads(head_gates))
    path = site(model).path
    if path != INTERFACE and any(iv.point == "scores" for iv in frame):
        raise ValueError(f"{type(model).__name__}: its attention is its own code; the 'scores' point is not "
                         f"reachable there (probs, observe and head_out are)")
    if path == SEAM:
        bad = [iv for iv in frame if iv.point == "probs" and not hasattr(iv.fn, "uniform_mask")]
        if bad:
            raise ValueError(f"{type(model).__name__}: {seam_reason(model)}")
    for layer, mod in enumerate(mods):
        if "_bertattn_stack" not in mod.__dict__:
            mod._bertattn_stack = []
        mod._bertattn_layer = layer
        mod._bertattn_stack.append(frame)
    try:
        yield
    finally:
        for mod in mods:
            stack = mod.__dict__.get("_bertattn_stack", [])
            for i in range(len(stack) - 1, -1, -1):
                if stack[i] is frame:
                    del stack[i]
                    break
            if not stack:
                mod.__dict__.pop("_bertattn_stack", None)


# ---- interventions (functions passed in) -------------------------------------------------------------------------

def _uniform_over_real_keys(probs: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
    """``(B, 1, Q|1, K)``: 1/n over each example's n real (unpadded) keys, 0 on padding (Kovaleva's stub)."""
    uniform = key_mask.to(probs.dtype)
    return (uniform / uniform.sum(-1, keepdim=True)).unsqueeze(1)


def uniform_attention(heads: Sequence[tuple[int, int]]) -> ProbEditor:
    """Kovaleva et al. §4.6 "disabling" a head: its attention becomes uniform 1/L over the real tokens.

    ``heads``: 0-based ``(layer, head)`` pairs; a layer is disabled by listing all its heads.
    """
    by_layer: dict[int, list[int]] = {}
    for layer, head in heads:
        by_layer.setdefault(layer, []).append(head)

    def edit(layer: int, probs: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
        hs = by_layer.get(layer)
        if not hs:
            return probs
        uniform = _uniform_over_real_keys(probs, key_mask).expand(-1, 1, probs.shape[2], -1)
        probs = probs.clone()
        probs[:, hs] = uniform.expand(-1, len(hs), -1, -1)
        return probs

    def uniform_mask(layer: int, b: int, h: int, device) -> torch.Tensor | None:
        """(B, H) True where the head's attention is uniform (the seam path applies it to the context)."""
        hs = by_layer.get(layer)
        if not hs:
            return None
        m = torch.zeros(b, h, dtype=torch.bool, device=device)
        m[:, hs] = True
        return m

    edit.uniform_mask = uniform_mask
    return edit


class UniformRows:
    """Kovaleva's disabling with a configuration per batch row: ``set(mask)`` with ``mask (B, L, H)`` boolean,
    True where row b's head (l, h) is disabled. Lets one forward pass evaluate many configurations (the sweep):
    each row is one (example, configuration), and a row equals :func:`uniform_attention` of its own heads alone.
    """

    def __init__(self):
        self.mask: torch.Tensor | None = None

    def set(self, mask: torch.Tensor) -> "UniformRows":
        self.mask = mask
        return self

    def __call__(self, layer: int, probs: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
        if self.mask is None:
            raise RuntimeError("UniformRows: set(mask) before the forward pass")
        if self.mask.shape[0] != probs.shape[0] or self.mask.shape[2] != probs.shape[1]:
            raise ValueError(f"UniformRows: mask {tuple(self.mask.shape)} does not fit probs {tuple(probs.shape)}")
        rows = self.mask[:, layer]  # (B, H)
        if not bool(rows.any()):
            return probs
        return torch.where(rows[:, :, None, None], _uniform_over_real_keys(probs, key_mask), probs)

    def uniform_mask(self, layer: int, b: int, h: int, device) -> torch.Tensor:
        if self.mask is None:
            raise RuntimeError("UniformRows: set(mask) before the forward pass")
        if self.mask.shape[0] != b or self.mask.shape[2] != h:
            raise ValueError(f"UniformRows: mask {tuple(self.mask.shape)} does not fit {b} rows x {h} heads")
        return self.mask[:, layer].to(device)

    def intervention(self) -> Intervention:
        return Intervention("probs", self)


def gate_heads(gates: torch.Tensor) -> Intervention:
    """Michel et al. §3: multiply head h's output by ξ_h. ``gates``: ``(L, H)`` for every row, or ``(B, L, H)``
    one configuration per batch row. A gate tensor that requires grad gives ∂L/∂ξ_h (importance)."""
    if gates.dim() not in (2, 3):
        raise ValueError(f"head gates must be (layers, heads) or (batch, layers, heads), got {tuple(gates.shape)}")

    def apply(layer: int, out: torch.Tensor) -> torch.Tensor:
        g = gates[layer] if gates.dim() == 2 else gates[:, layer]
        if g.shape[-1] != out.shape[1]:
            raise ValueError(f"head gates have {g.shape[-1]} heads, the layer has {out.shape[1]}")
        g = g.to(out.dtype)
        return out * (g.view(1, -1, 1, 1) if gates.dim() == 2 else g.view(out.shape[0], -1, 1, 1))

    return Intervention("head_out", apply)


def zero_heads(n_layers: int, n_heads: int, heads: Sequence[tuple[int, int]], device=None) -> torch.Tensor:
    """Michel et al. §3 head masking: gates ξ with ξ_h = 0 for the given 0-based heads, 1 elsewhere."""
    gates = torch.ones(n_layers, n_heads, device=device)
    for layer, head in heads:
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise ValueError(f"head {head_name(layer, head)} is outside the model's {n_layers}x{n_heads} heads")
        gates[layer, head] = 0.0
    return gates


def head_gate_gradients(model: torch.nn.Module, batches, loss_fn: Callable, n_layers: int, n_heads: int,
                        per_example: bool = True) -> tuple[torch.Tensor, int]:
    """Michel et al. §3.3 importance: the sum over examples of |∂L/∂ξ_h| with every gate ξ_h = 1.

    ``loss_fn(model, batch) -> (loss per example (B,), ...)`` runs the forward pass (inside the gated run).
    ``per_example``: one gate per (row, layer, head), so |∂L(x)/∂ξ_h| is taken per example as the paper's
    E_x |∂L(x)/∂ξ_h|; else the absolute gradient of the batch's summed loss (the authors' code). Returns the
    ``(L, H)`` sum and the number of examples. One forward/backward per batch; the model's weights get no
    gradient (their ``requires_grad`` is restored on exit).
    """
    params = [p for p in model.parameters() if p.requires_grad]
    dtype = next(model.parameters()).dtype
    for p in params:
        p.requires_grad_(False)
    total, n = None, 0
    try:
        with torch.inference_mode(False), torch.enable_grad():
            for batch in batches:
                b = batch.input_ids.shape[0] if hasattr(batch, "input_ids") else batch["input_ids"].shape[0]
                dev = batch.input_ids.device if hasattr(batch, "input_ids") else batch["input_ids"].device
                shape = (b, n_layers, n_heads) if per_example else (n_layers, n_heads)
                gates = torch.ones(shape, device=dev, dtype=dtype, requires_grad=True)
                with attention_run(model, head_gates=gates):
                    losses = loss_fn(model, batch)
                (grad,) = torch.autograd.grad(losses.sum(), gates)
                g = grad.abs().sum(0) if per_example else grad.abs()
                total = g.detach() if total is None else total + g.detach()
                n += b
    finally:
        for p in params:
            p.requires_grad_(True)
    if total is None:
        raise ValueError("head_gate_gradients: no batches")
    return total, n


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


def forward(model: torch.nn.Module, batches, observe: Observer | None = None, edit_probs: ProbEditor | None = None,
            head_gates: torch.Tensor | None = None, interventions: Sequence[Intervention] = (), hidden: bool = False,
            progress: bool = False, desc: str = "attention") -> Iterator[tuple[object, object]]:
    """The one forward loop: ``(batch, output)`` per batch, the model run in inference mode under one
    :func:`attention_run` (observers and interventions as there) on ``batch.model_inputs(model)`` (a ``Batch``;
    a dict is taken as the model's inputs as they are). ``hidden``: also every layer's hidden states.

    A generator: the run is active while the caller handles a batch's output, and is left when the loop ends or
    the generator is closed (``contextlib.closing`` around a loop that may stop early or raise)."""
    if progress:
        from tqdm.auto import tqdm

        batches = tqdm(batches, desc=desc, unit="batch", leave=False, disable=None)  # quiet when not a TTY
    extra = {"output_hidden_states": True} if hidden else {}
    with torch.inference_mode(), attention_run(model, observe, edit_probs, head_gates, interventions):
        for batch in batches:
            inputs = batch if isinstance(batch, dict) else batch.model_inputs(model)
            yield batch, model(**inputs, **extra)


def run_reducers(model: torch.nn.Module, batches, reducers: Sequence[Reducer], edit_probs: ProbEditor | None = None,
                 head_gates: torch.Tensor | None = None, progress: bool = False, desc: str = "attention",
                 interventions: Sequence[Intervention] = ()) -> list:
    """:func:`forward` feeding every reducer every layer's attention, one batch at a time; maps are never kept."""

    def observe(layer: int, probs: torch.Tensor) -> None:
        for r in reducers:
            r.update(layer, probs)

    def announced(batches):  # each reducer hears of a batch before its forward pass
        for batch in batches:
            for r in reducers:
                r.start_batch(batch)
            yield batch

    hidden = any(getattr(r, "wants_hidden_states", False) for r in reducers)
    with closing(forward(model, announced(batches), observe, edit_probs, head_gates, interventions, hidden, progress,
                         desc)) as outputs:  # a reducer that raises leaves the run at once, not when collected
        for _, out in outputs:
            for r in reducers:
                if hasattr(r, "end_batch"):
                    r.end_batch(out.hidden_states if hidden else None)
    return [r.finalize() for r in reducers]
