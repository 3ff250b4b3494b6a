"""One example's readings for the ``explain`` family: the classifier's attention across layers (raw, rollout, flow,
the norm map's rollout), the token importance the classifier really uses (Captum: blank-out and input gradient), and
Brunner et al.'s raw vs effective attention on the encoder. Batches of one example: no padding anywhere."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ...claims.stats import rank_correlation
from ...engine import across_layers, attention
from ...engine.attention_norms import NormsRefused, norm_reading, norm_site
from ...engine.batching import model_inputs


def inputs_of(model, ids: list[int], types: list[int], device) -> dict:
    """One example as the model's keyword arguments (token types only where it takes them)."""
    t = torch.tensor([ids], device=device)
    return model_inputs(model, t, torch.ones_like(t), torch.tensor([types], device=device))


def norm_reason(encoder) -> str | None:
    """Why the norm readings (the norm map, effective attention) cannot be had on ``encoder``, or None."""
    try:
        norm_site(encoder)
    except NormsRefused as exc:
        return str(exc)
    return None


def layer_maps(model, encoder, inputs: dict, with_norms: bool, with_transforms: bool = False
               ) -> tuple[torch.Tensor, torch.Tensor | None, list]:
    """(maps (L, H, n, n), norm maps (L, n, n) or None, per layer (probs, T) for effective attention or []): one
    forward pass of ``model`` (whose attention modules are ``encoder``'s) read at the ``observe`` point; the norm maps
    where ``with_norms``, the value transforms T where ``with_transforms`` (both need the norm reading)."""
    maps: dict = {}
    norms: dict = {}
    transforms: dict = {}

    def run(reader):
        def observe(layer, probs):
            maps[layer] = probs[0].detach().double()
            if reader is not None and with_norms:
                norms[layer] = reader.layer(layer, probs).summed[0].double()
            if reader is not None and with_transforms:
                nl = reader.site.layers[layer]
                values = reader.pending[id(nl.value)][1]
                transforms[layer] = across_layers.value_transforms(values, nl.output.weight, reader.site.n_heads)

        for _ in attention.forward(model, [inputs], observe=observe):
            pass

    if with_norms or with_transforms:
        with norm_reading(encoder) as reader:
            run(reader)
    else:
        run(None)
    n_layers = len(maps)
    stacked = torch.stack([maps[i] for i in range(n_layers)])
    norm = torch.stack([norms[i] for i in range(n_layers)]) if norms else None
    pairs = [(maps[i], transforms[i]) for i in range(n_layers)] if transforms else []
    return stacked, norm, pairs


def relevance(maps: torch.Tensor, norm: torch.Tensor | None, flow: bool, flow_max: bool = False
              ) -> dict[str, np.ndarray]:
    """Per reading (constants.READINGS) an (L, n) array: layer l's relevance of each input token. ``maps`` (L, H, n,
    n) the raw maps, ``norm`` (L, n, n) the layer-level norm maps (None: no norm reading). ``flow``: the [CLS] node's
    flow; ``flow_max``: the flow from every output node of the layer, its maximum over them per input token, as the
    authors' ``get_flow_relevance`` (compute_corel_distilbert_sst.py l.72-96: ``compute_node_flow`` over all output
    nodes, then ``.max(axis=0)`` l.95), n times the max-flows of ``flow`` (the [CLS] row comes from the same flows)."""
    mean = maps.mean(1)  # the authors' head average (compute_corel_distilbert_sst.py l.48, l.70, l.101)
    joint = across_layers.rollout(mean)
    out = {"raw_cls": mean[:, 0].numpy(), "raw_max": mean.max(1).values.numpy(),
           "rollout_cls": joint[:, 0].numpy(), "rollout_max": joint.max(1).values.numpy()}
    if flow or flow_max:
        mixed = across_layers.residual_mixed(mean).numpy()
        queries = range(mean.shape[-1]) if flow_max else (0,)
        f = across_layers.flow(mixed, queries=queries)  # (L, len(queries), n)
        out["flow_cls"] = f[:, 0]
        if flow_max:
            out["flow_max"] = f.max(1)
    if norm is not None:
        rows = norm / norm.sum(-1, keepdim=True).clamp_min(1e-300)
        out["norm_rollout_cls"] = across_layers.rollout(rows)[:, 0].numpy()
    return out


def importance(model, inputs: dict, target: int, blank_id: int) -> dict[str, np.ndarray]:
    """The token importance the classifier uses, by Captum, on the gold class ``target``:

    * ``blankout``: ``FeatureAblation`` over the input ids, each token in turn replaced by ``blank_id`` (the
      tokenizer's mask token, else its unknown token): the drop of the gold class's probability (Abnar & Zuidema
      §4: blank-out);
    * ``gradient``: input x gradient on the word-embedding lookup's output e (``LayerGradientXActivation``, Captum's
      layer form of ``InputXGradient``): per token |sum over embedding dimensions of e_d dlogit/de_d|, the gold
      class's logit (the authors' target, compute_corel_distilbert_sst.py l.140-142), reduced as the authors reduce
      (|sum over dimensions|, l.145).

    The authors' reduction of the gradient alone, |sum_d dlogit/de_d|, is not taken: where a LayerNorm follows the
    embedding (BERT, MiniLM, DistilBERT) that sum is 0 by the LayerNorm's invariance to adding a constant to every
    dimension, float noise (tests/test_explain.py shows it); input x gradient is their reduction of a non-zero
    quantity (docs/families/explain.md)."""
    from captum.attr import FeatureAblation, LayerGradientXActivation

    names = [k for k in ("attention_mask", "token_type_ids") if k in inputs]
    extra = tuple(inputs[k] for k in names)

    def logits(ids, *rest):
        return model(ids, **dict(zip(names, rest)))

    def probs(ids, *rest):
        return torch.softmax(logits(ids, *rest).float(), -1)

    ids = inputs["input_ids"]
    n = ids.shape[1]
    with torch.no_grad():
        drop = FeatureAblation(probs).attribute(ids, baselines=blank_id, target=target, additional_forward_args=extra,
                                                perturbations_per_eval=n)
    emb = model.encoder.get_input_embeddings()
    out = {"blankout": drop[0].detach().double().cpu().numpy()}
    with torch.enable_grad():
        g = LayerGradientXActivation(logits, emb, multiply_by_inputs=True).attribute(
            ids, target=target, additional_forward_args=extra)
    out["gradient"] = g[0].detach().double().sum(-1).abs().cpu().numpy()
    return out


def correlations(rel: dict[str, np.ndarray], imp: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``"<reading>|<importance>"`` -> (L,) Spearman's rho over the example's tokens (scipy, via stats), per layer."""
    return {f"{r}|{i}": np.array([rank_correlation(layer, iv)[0] for layer in rv]) for r, rv in rel.items()
            for i, iv in imp.items()}


@dataclass
class EffectiveReading:
    """Brunner et al.'s readings of one sequence, per layer (L,)."""

    n: int
    agreement: np.ndarray  # mean over heads of Pearson's r between the raw and the effective map (all n x n cells)
    raw_special: np.ndarray  # share of each query row's raw attention on [CLS]/[SEP] (mean over heads and queries)
    eff_special: np.ndarray  # the same of |effective attention|, each row's |A_eff| normalised to sum 1
    raw_sep: np.ndarray  # the same on [SEP] alone
    eff_sep: np.ndarray
    min_rank: int  # the smallest rank of a head's T over the layers (<= d_head)


def effective_reading(pairs: list, ids: list[int], cls_id: int, sep_id: int) -> EffectiveReading:
    """:class:`EffectiveReading` from each layer's (raw maps (H, n, n), value transforms (1, H, n, hidden))."""
    idt = torch.tensor(ids)
    special, sep = (idt == cls_id) | (idt == sep_id), idt == sep_id
    probs = torch.stack([p for p, _ in pairs])  # (L, H, n, n): every layer in one decomposition call
    eff, rank = across_layers.effective_attention(probs, torch.cat([t for _, t in pairs]), with_rank=True)
    eff, raw = eff.cpu(), probs.cpu()
    agree, rs, es, rp, ep = [], [], [], [], []
    for layer in range(raw.shape[0]):
        a, e = raw[layer], eff[layer]
        agree.append(np.mean([rank_correlation(a[h].reshape(-1).numpy(), e[h].reshape(-1).numpy(), "pearson")[0]
                              for h in range(a.shape[0])]))
        mag = e.abs() / e.abs().sum(-1, keepdim=True).clamp_min(1e-300)
        rs.append(float(a[..., special].sum(-1).mean()))
        es.append(float(mag[..., special].sum(-1).mean()))
        rp.append(float(a[..., sep].sum(-1).mean()))
        ep.append(float(mag[..., sep].sum(-1).mean()))
    ranks = [int(rank.min())]
    return EffectiveReading(len(ids), np.array(agree), np.array(rs), np.array(es), np.array(rp), np.array(ep),
                            min(ranks))


def first_segment(ids: list[int], types: list[int], sep_id: int) -> tuple[list[int], list[int]]:
    """``[CLS] a [SEP]`` of an encoded pair ``[CLS] a [SEP] b [SEP]``: the first sentence alone (a shorter sequence
    for Brunner's length comparison); the whole example where it has no [SEP] before its last piece."""
    cut = ids.index(sep_id) + 1 if sep_id in ids[:-1] else len(ids)
    return ids[:cut], [0] * cut if cut < len(ids) else types


def hidden_states(encoder, inputs: dict) -> list[torch.Tensor]:
    """The embedding layer's output and each layer's hidden states of one sequence, float64: L + 1 tensors (n, d)."""
    with torch.no_grad():
        return [h[0].double() for h in encoder(**inputs, output_hidden_states=True).hidden_states]


def _with_ones(h: torch.Tensor) -> torch.Tensor:
    """``[h, 1]``: the hidden states with the constant column the learned map's bias reads."""
    return torch.cat([h, torch.ones(len(h), 1, dtype=h.dtype, device=h.device)], 1)


def identity_maps(states: list[list[torch.Tensor]]) -> list[torch.Tensor]:
    """Brunner et al.'s learned mapping back to the input (§5), linear: per layer l = 1..L the least-squares map
    ``[h^l, 1] W_l ≈ h^0`` over every token of the given sequences (``states``: per sequence, :func:`hidden_states`;
    sequences the readings are not taken on). (L,) matrices (d + 1, d), by ``torch.linalg.lstsq``."""
    n_layers = len(states[0]) - 1
    target = torch.cat([s[0] for s in states])
    maps = []
    for layer in range(1, n_layers + 1):
        x = _with_ones(torch.cat([s[layer] for s in states]))
        maps.append(torch.linalg.lstsq(x.cpu(), target.cpu(), driver="gelsd").solution.to(x.device))
    return maps


def identified(states: list[torch.Tensor], maps: list[torch.Tensor] | None = None) -> np.ndarray:
    """Brunner et al.'s token identifiability of one sequence (``states``: :func:`hidden_states`): per layer
    l = 1..L, how many positions i have their own input embedding (``states[0]``) as the nearest, by cosine, of the
    sequence's input embeddings to layer l's hidden state at i (``maps`` None: the cheap reading, no learned map) or
    to its image under the learned map (``maps``: :func:`identity_maps`). (L,) counts."""
    unit0 = torch.nn.functional.normalize(states[0], dim=-1)
    own = torch.arange(unit0.shape[0], device=unit0.device)
    out = []
    for layer, h in enumerate(states[1:]):
        if maps is not None:
            h = _with_ones(h) @ maps[layer]
        out.append(int(((torch.nn.functional.normalize(h, dim=-1) @ unit0.T).argmax(-1) == own).sum()))
    return np.array(out)
