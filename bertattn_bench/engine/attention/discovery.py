"""Where a model's attention maps are (:func:`discover`, kept as a :class:`Site` on the base model), and the hooks
that read and edit them when they are not computed by the registered attention function.

Three paths: ``INTERFACE`` (modules that call the registered function), ``OWN_CODE`` (a module whose output is a
layer's probabilities: a forward hook reads and edits them) and ``SEAM`` (a module that returns its map beside its
output: uniform attention and head gates are applied to each head's context at the output projection's input).
Architectures with no softmax map over the input tokens are refused in one line (:data:`NO_SOFTMAX_MAP`,
:data:`OWN_ATTENTION`, :func:`unsupported`).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .interface import ATTN_IMPLEMENTATION, apply_point, calls_collected, observe_point

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
    from ...base.errors import ModelLoadError

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
    c = apply_point(frames, "head_out", layer, c)
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
    probs = apply_point(frames, "probs", layer, probs, key_mask)
    observe_point(frames, layer, probs)
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
    probs = apply_point(frames, "probs", layer, probs, key_mask)
    observe_point(frames, layer, probs)
    return apply_point(frames, "head_out", layer, probs)


def discover(model: torch.nn.Module) -> Site:
    """Find where ``model``'s attention maps are (one forward pass on 8 tokens) and keep it on the base model.

    Modules that call the registered attention function take the interface path. Otherwise the model's own
    ``output_attentions`` maps are matched to the module that outputs them (the same tensor): a forward hook there
    reads and edits them. Refused with one line: no maps, maps not ``(B, H, T, T)`` over the input tokens, or maps
    that leave no module."""
    from ...base.errors import ModelLoadError

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
    try:
        with torch.no_grad(), calls_collected() as calls:
            res = base(input_ids=ids, attention_mask=mask, output_attentions=True)
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        reason = OWN_ATTENTION.get(model_type, "")
        raise ModelLoadError(unsupported(model, f"{reason + '; ' if reason else ''}a forward pass on text failed "
                                                f"({type(exc).__name__}: {first})")) from None
    finally:
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
    from ...base.errors import ModelLoadError

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
