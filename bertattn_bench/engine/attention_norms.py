"""The norm-based reading of attention (Kobayashi et al. 2020) and the mixing ratios (Kobayashi et al. 2021).

A layer's attention output is ``y_i = sum_h sum_j alpha^h_ij f^h(x_j) + b_O`` with ``f^h(x_j) = (x_j W_V + b_V) W_O^h``:
the value vector with its bias times head h's slice of the output projection; b_O is not inside f (the authors'
``BertNormOutput``, gorokoba560/norm-analysis-of-transformer at 5dc8fb3, emnlp2020/transformers/src/transformers/
modeling_bert.py l.293-345 and emnlp2021/.../modeling_bert.py l.299-388). Per layer this module gives
``||f^h(x_j)||`` (B, H, K), the per-head ``||alpha^h_ij f^h(x_j)|| = alpha^h_ij ||f^h(x_j)||`` (alpha >= 0) and the
layer-level ``||sum_h alpha^h_ij f^h(x_j)||`` (B, Q, K), the latter from the (K, H, H) Gram matrix of the f vectors
by einsum, never a (H, Q, K, hidden) tensor; and the 2021 mixing ratios per query token (:func:`mixing_ratios`,
alone where nothing else is needed: the masked sweep).

The value vectors and the output projection are the model's own modules, found once per model (:func:`norm_site`)
by matching tensors on an 8-token forward pass: a linear module whose output V, head by head, times the layer's
attention probabilities is exactly the input of another linear module (the output projection). The residual and
LayerNorm terms (AttnRes-*, AttnResLn-N) need a post-LayerNorm block: a LayerNorm whose input is the output
projection's output plus the value projection's input (the layer input); where there is none (a pre-LayerNorm
block), those ratios are not available and say why. A model whose value vectors leave no module (a fused query /
key / value projection) is refused with one line (:class:`NormsRefused`). This is engine code: it reads attention
only through :mod:`.attention`'s ``observe`` point and forward hooks on the value projection.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

import torch

from .attention import attention_run, site

RATIOS = ("attn_w", "attn_n", "attnres_w", "attnres_n", "attnresln_n")  # the 2021 paper's Table 1 rows, in order
RESIDUAL_RATIOS = ("attnres_n", "attnresln_n")  # need the residual (and the LayerNorm) of a post-LN block


class NormsRefused(ValueError):
    """The model's attention output cannot be split into alpha f(x) from its own modules (the message says why)."""


@dataclass
class NormLayer:
    value: torch.nn.Linear  # its output: x W_V + b_V, (B, K, H * D)
    output: torch.nn.Linear  # W_O (hidden, H * D) and b_O
    layer_norm: torch.nn.Module | None  # the post-attention LayerNorm of LN(output(ctx) + x), or None


@dataclass
class NormSite:
    layers: list[NormLayer]
    n_heads: int
    residual: bool  # every layer has its post-attention LayerNorm over output + layer input
    no_residual_reason: str = ""


@dataclass
class LayerNorms:
    """One layer's norms for a batch (on the model's device, float32)."""

    fx: torch.Tensor  # (B, H, K) ||f^h(x_j)||
    head: torch.Tensor  # (B, H, Q, K) ||alpha^h_ij f^h(x_j)||
    summed: torch.Tensor  # (B, Q, K) ||sum_h alpha^h_ij f^h(x_j)||
    total: torch.Tensor  # (B, Q, hidden) sum_h sum_j alpha^h_ij f^h(x_j): the output projection's output - b_O
    ratios: dict  # name -> (B, Q) mixing ratio (RATIOS; the residual ones only where the block has them)


def _ln_like(m: torch.nn.Module) -> bool:
    return "layernorm" in type(m).__name__.lower() and getattr(m, "weight", None) is not None


def _ln_eps(m) -> float:
    for name in ("eps", "variance_epsilon", "epsilon"):
        if hasattr(m, name):
            return float(getattr(m, name))
    return 1e-12


def _ln_apply(ln, s: torch.Tensor) -> torch.Tensor:
    mean = s.mean(-1, keepdim=True)
    var = (s - mean).pow(2).mean(-1, keepdim=True)
    out = (s - mean) / torch.sqrt(var + _ln_eps(ln)) * ln.weight.float()
    bias = getattr(ln, "bias", None)
    return out + bias.float() if bias is not None else out


def layer_norms(probs: torch.Tensor, values: torch.Tensor, w_out: torch.Tensor, x: torch.Tensor | None = None,
                b_out: torch.Tensor | None = None, layer_norm: torch.nn.Module | None = None) -> LayerNorms:
    """The norms of one layer from its own tensors.

    ``probs`` (B, H, Q, K) the attention probabilities (padded keys 0); ``values`` (B, K, H * D) the value
    projection's output (with b_V); ``w_out`` (hidden, H * D) the output projection's weight; ``x`` (B, K, hidden)
    the layer input (the residual), ``b_out`` the output projection's bias and ``layer_norm`` the post-attention
    LayerNorm, for the residual ratios (:func:`mixing_ratios`)."""
    p = probs.float()
    b, h, q, k = p.shape
    v = values.float().view(b, k, h, -1)
    w = w_out.float().view(w_out.shape[0], h, -1)  # (hidden, H, D)
    f = torch.einsum("bkhd,ohd->bhko", v, w)  # (B, H, K, hidden): f^h(x_j)
    gram = torch.einsum("bhko,bgko->bkhg", f, f)  # (B, K, H, H): <f^h(x_j), f^g(x_j)>
    del f
    fx = gram.diagonal(dim1=-2, dim2=-1).clamp_min(0).sqrt().transpose(1, 2)  # (B, H, K)
    head = p * fx[:, :, None, :]
    pk = p.permute(0, 3, 2, 1)  # (B, K, Q, H)
    summed = (torch.matmul(pk, gram) * pk).sum(-1).clamp_min(0).sqrt().transpose(1, 2)  # (B, Q, K)
    total, ratios = mixing_ratios(probs, values, w_out, x, b_out, layer_norm)
    return LayerNorms(fx=fx, head=head, summed=summed, total=total, ratios=ratios)


def mixing_ratios(probs: torch.Tensor, values: torch.Tensor, w_out: torch.Tensor, x: torch.Tensor | None = None,
                  b_out: torch.Tensor | None = None, layer_norm: torch.nn.Module | None = None
                  ) -> tuple[torch.Tensor, dict]:
    """The 2021 mixing ratios of one layer (arguments as :func:`layer_norms`'s), without the per-pair norms (the
    masked sweep needs only these): ``(total, ratios)``, ``total`` (B, Q, hidden) = sum_h sum_j alpha f, without
    b_O. AttnRes-N needs ``x``; AttnResLn-N also the LayerNorm: each term divided by the real pre-LayerNorm vector's
    sqrt(var + eps) and scaled by gamma, b_O and beta dropped, as the authors."""
    p = probs.float()
    b, h, q, k = p.shape
    v = values.float().view(b, k, h, -1)
    ctx = torch.matmul(p, v.transpose(1, 2))  # (B, H, Q, D): the heads' outputs, as the model computes them
    total = ctx.transpose(1, 2).reshape(b, q, -1) @ w_out.float().t()  # sum_h sum_j alpha f, without b_O
    diag = p.diagonal(dim1=-2, dim2=-1)  # (B, H, Q): alpha_ii (queries and keys are the same tokens)
    own = (diag.transpose(1, 2)[..., None] * v).reshape(b, q, -1) @ w_out.float().t()  # sum_h alpha_ii f^h(x_i)
    mix = total - own
    mix_n, own_n = mix.norm(dim=-1), own.norm(dim=-1)
    attn_w = 1.0 - diag.mean(1)  # head-mean alpha: sum_j alpha_ij - alpha_ii with rows summing to 1
    ratios = {"attn_w": attn_w, "attnres_w": attn_w / 2, "attn_n": mix_n / (mix_n + own_n).clamp_min(1e-30)}
    if x is not None:
        xr = x.float()
        own_r = own + xr
        own_rn = own_r.norm(dim=-1)
        ratios["attnres_n"] = mix_n / (mix_n + own_rn).clamp_min(1e-30)
        if layer_norm is not None:
            pre = total + xr + (b_out.float() if b_out is not None else 0.0)
            sd = torch.sqrt(pre.var(-1, unbiased=False, keepdim=True) + _ln_eps(layer_norm))
            gamma = layer_norm.weight.float()

            def ln_term(t):
                return ((t - t.mean(-1, keepdim=True)) / sd * gamma).norm(dim=-1)

            m_ln, o_ln = ln_term(mix), ln_term(own_r)
            ratios["attnresln_n"] = m_ln / (m_ln + o_ln).clamp_min(1e-30)
    return total, ratios


# Known refusals (keys: config.model_type): why no module carries a layer's value vectors alone / its alpha V
REFUSED_WHY = {
    "modernbert": "its query, key and value come out of one fused projection (Wqkv)",
    "deberta": "its query, key and value come out of one interleaved projection (in_proj)",
    "convbert": "its output projection's input joins the self-attention heads with span-convolution heads",
    "ibert": "its projections are quantised modules (QuantLinear), not linear modules",
    "xlnet": "its value and output projections are raw parameters contracted by einsum, not linear modules",
}


def _refuse(model, why: str) -> NormsRefused:
    model_type = getattr(getattr(model, "config", None), "model_type", "?")
    return NormsRefused(f"{type(model).__name__} ({model_type}) is refused by the norms family: {why}")


def discover_norms(model: torch.nn.Module) -> NormSite:
    """Find each layer's value projection, output projection and post-attention LayerNorm (see the module doc)."""
    s = site(model)
    config: Any = model.config
    n_layers, heads = int(config.num_hidden_layers), s.n_heads
    dev = next(model.parameters()).device
    t = 8
    ids = (torch.arange(t, device=dev)[None] + 5) % int(getattr(model.config, "vocab_size", 100) or 100)
    calls: list = []  # (module, input, output) of every linear / LayerNorm call, in call order
    probs: dict = {}
    hooks = [m.register_forward_hook(lambda mod, a, o: calls.append((mod, a[0] if a else None, o)))
             for m in model.modules() if isinstance(m, torch.nn.Linear) or _ln_like(m)]

    def observe(layer, p):
        probs.setdefault(layer, []).append((len(calls), p.detach().clone()))

    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), attention_run(model, observe=observe):
            model(input_ids=ids, attention_mask=torch.ones_like(ids))
    finally:
        for hk in hooks:
            hk.remove()
        model.train(was_training)
    layers, no_res = [], ""
    for layer in range(n_layers):
        if layer not in probs:
            raise _refuse(model, f"layer {layer + 1}'s attention was not observed")
        at, p = probs[layer][0]
        p = p.float()
        b = p.shape[0]
        found = None
        # the output projection after the observed map; else (the seam path observes after the module's output)
        # between the values and the map
        for after in (True, False):
            for i, (vm, vin, vout) in enumerate(calls[:at]):
                if not isinstance(vm, torch.nn.Linear) or not isinstance(vout, torch.Tensor) or vout.dim() != 3 \
                        or vout.shape[1] != t or vout.shape[-1] % heads:
                    continue
                vh = vout.float().view(b, t, heads, -1).transpose(1, 2)
                ctx = (p @ vh).transpose(1, 2).reshape(b, t, -1)
                for j in (range(at, len(calls)) if after else range(i + 1, at)):
                    om, oin, oout = calls[j]
                    if isinstance(om, torch.nn.Linear) and isinstance(oin, torch.Tensor) and oin.shape == ctx.shape \
                            and torch.allclose(oin.float(), ctx, atol=1e-5, rtol=1e-4):
                        found = (i, j)
                        break
                if found:
                    break
            if found:
                break
        if not found:
            known = REFUSED_WHY.get(str(getattr(model.config, "model_type", "")))
            raise _refuse(model, f"{known + ': ' if known else ''}no linear module outputs layer {layer + 1}'s value "
                                 f"vectors V on their own with alpha V the input of another (the output projection), "
                                 f"so f(x) = (x W_V + b_V) W_O cannot be taken from the model's own modules")
        (vm, vin, _), (om, _, oout) = calls[found[0]], calls[found[1]]
        ln = None
        for lm, lin, lout in calls[found[1] + 1:]:
            if isinstance(lm, torch.nn.Linear):
                break  # the next projection: no LayerNorm right after the attention output
            if _ln_like(lm) and isinstance(lin, torch.Tensor) and lin.shape == oout.shape \
                    and torch.allclose(lin.float(), oout.float() + vin.float(), atol=1e-5, rtol=1e-4) \
                    and torch.allclose(_ln_apply(lm, lin.float()), lout.float(), atol=1e-4, rtol=1e-4):
                ln = lm
                break
        if ln is None and not no_res:
            no_res = (f"layer {layer + 1} has no LayerNorm over its attention output plus its layer input (a "
                      f"pre-LayerNorm block, or another normalisation): the residual ratios need a post-LN block")
        layers.append(NormLayer(vm, om, ln))
    return NormSite(layers, heads, residual=not no_res, no_residual_reason=no_res)


def norm_site(model: torch.nn.Module) -> NormSite:
    """The model's :class:`NormSite`, found once and kept with the model; raises :class:`NormsRefused`."""
    cached = model.__dict__.get("_bertattn_norm_site")
    if isinstance(cached, NormsRefused):
        raise cached
    if cached is None:
        try:
            cached = discover_norms(model)
        except NormsRefused as exc:
            cached = exc
        model.__dict__["_bertattn_norm_site"] = cached
        if isinstance(cached, NormsRefused):
            raise cached
    return cached


class NormReader:
    """While active (:func:`norm_reading`), keeps each value projection's latest input and output so that the
    layer's norms can be computed from the ``observe`` point's probabilities (:meth:`layer`)."""

    def __init__(self, ns: NormSite):
        self.site = ns
        self.pending: dict = {}

    def _hook(self, mod, args, out):
        self.pending[id(mod)] = (args[0], out)

    def _args(self, layer: int, probs: torch.Tensor) -> tuple:
        nl = self.site.layers[layer]
        x, v = self.pending[id(nl.value)]
        res = self.site.residual
        return probs, v, nl.output.weight, x if res else None, nl.output.bias, nl.layer_norm if res else None

    def layer(self, layer: int, probs: torch.Tensor) -> LayerNorms:
        return layer_norms(*self._args(layer, probs))

    def ratios(self, layer: int, probs: torch.Tensor) -> dict:
        """The layer's mixing ratios alone (:func:`mixing_ratios`; the same numbers as :meth:`layer`'s)."""
        return mixing_ratios(*self._args(layer, probs))[1]


@contextmanager
def norm_reading(model: torch.nn.Module) -> Iterator[NormReader]:
    """Hooks on the model's value projections for the block's duration (removed on exit, also on an exception)."""
    reader = NormReader(norm_site(model))
    hooks = [m.register_forward_hook(reader._hook) for m in {id(nl.value): nl.value for nl in reader.site.layers}.values()]
    try:
        yield reader
    finally:
        for hk in hooks:
            hk.remove()
