"""Clark et al. §3 surface statistics: relative position (§3.1), special tokens (§3.2), entropy (§3.3).

Token-level, on ``[CLS] A [SEP] B [SEP]`` segments (:mod:`bertattn_bench.data.segments`). As in Clark et al.'s
analysis code, a head's statistic is the mean over the query tokens of one segment, then the mean over segments;
padding never enters (masks). Denominators are Clark's: every real query for the previous/next-token shares
(n, not n - 1), the two [SEP] queries for [SEP] -> [SEP], the n - 2 others for other -> [SEP].
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ..claims.registry import Measurement, NotApplicable, family, in_band, metric, relative_depth
from ..claims.stats import bootstrap_sd
from ..data.segments import CORPORA as SEGMENT_CORPORA
from ..engine.attention import Reducer, head_name
from ..engine.model import LoadedModel
from ..engine.passes import PreparedPass
from .common import SurfaceResult

FIELDS = (
    "to_cls", "to_sep", "to_punct", "to_special", "self", "prev", "next",
    "entropy", "max_weight", "cls_entropy", "sep_to_sep", "other_to_sep",
)


class SurfaceReducer(Reducer):
    """Accumulates every §3 statistic per (layer, head) on the model's device.

    Issue 47: per layer the twelve per-query statistics are stacked and reduced to per-segment means in one masked
    sum (one mask per statistic, built per batch); the per-segment rows stay on the device, and the sums are made
    from them in :meth:`finalize` (the same float32 batch sums as before, so the same numbers). Nothing in the batch
    loop reads a value back to the host."""

    def __init__(self, n_layers: int, n_heads: int, device, vocab_size: int | None = None):
        self.n_layers, self.n_heads = n_layers, n_heads
        self.rows: list[list[torch.Tensor]] = [[] for _ in range(n_layers)]  # per layer: (B, H, FIELDS) per batch
        self.sep_chance_rows = []
        self.n_segments = 0
        self.n_tokens = torch.zeros((), dtype=torch.long, device=device)  # on device: no sync per batch
        self.sep_chance_sum = torch.zeros((), dtype=torch.float64, device=device)
        self.token_counts = torch.zeros(vocab_size, dtype=torch.long, device=device) if vocab_size else None

    def start_batch(self, batch) -> None:
        mask = batch.token_mask
        self.n_segments += mask.shape[0]
        lengths = mask.sum(-1)
        self.n_tokens += lengths.sum()
        if self.token_counts is not None:  # padding adds 0 (a fixed shape: no boolean index, no bincount)
            self.token_counts.index_add_(0, batch.input_ids.flatten(), mask.flatten().long())
        # chance for [SEP] = its share of the segment's tokens: 2 of L for BERT's [CLS] A [SEP] B [SEP], 3 for
        # RoBERTa-style <s> A </s></s> B </s> (counted from the input, never assumed)
        chance = batch.is_sep.sum(-1).double() / lengths.double()
        self.sep_chance_sum += chance.sum()
        self.sep_chance_rows.append(chance)
        # Clark's denominators (General_Analysis.ipynb of clarkkev/attention-analysis, commit b609cfc, the
        # "Computing Average Attention" cell, file lines 132-151): previous/next token ("left"/"right",
        # np.eye(n, n, -1/+1)), self, [CLS], [SEP] and punctuation are divided by n_tokens, all queries; "sep_sep"
        # by the 2 [SEP] queries, "rest_sep" (other -> [SEP]) by the n - 2 others. So the first token's missing
        # previous token (and the last token's missing next one) counts as 0, not as "not asked".
        next_is_real = torch.zeros_like(mask)
        next_is_real[:, :-1] = mask[:, 1:]  # query i has a real next token iff i+1 is real (never padding)
        self.next_is_real = next_is_real.to(torch.float32)
        query = {"all": mask, "cls_query": batch.is_cls, "sep_query": batch.is_sep, "other_query": mask & ~batch.is_sep}
        # which queries each statistic averages over, in FIELDS order (prev/next: every real query, see above)
        per_field = ("all",) * 9 + ("cls_query", "sep_query", "other_query")
        self.query_masks = torch.stack([query[q] for q in per_field], 1).to(torch.float32)  # (B, FIELDS, T)
        self.query_counts = self.query_masks.sum(-1).clamp(min=1)  # (B, FIELDS)
        # the key classes as one (B, 1, T, 3) matrix: attention to [CLS], [SEP], punctuation in one product
        self.key_classes = torch.stack([batch.is_cls, batch.is_sep, batch.is_punct], -1).to(torch.float32)[:, None]

    def update(self, layer: int, probs: torch.Tensor) -> None:
        p = probs.float()
        to = p @ self.key_classes  # (B, H, T, 3)
        to_cls, to_sep, to_punct = to[..., 0], to[..., 1], to[..., 2]
        entropy = -torch.special.xlogy(p, p).sum(-1)
        diag = p.diagonal(dim1=-2, dim2=-1)
        prev = torch.nn.functional.pad(p.diagonal(offset=-1, dim1=-2, dim2=-1), (1, 0))
        nxt = torch.nn.functional.pad(p.diagonal(offset=1, dim1=-2, dim2=-1), (0, 1)) * self.next_is_real[:, None]
        values = torch.stack([to_cls, to_sep, to_punct, to_cls + to_sep + to_punct, diag, prev, nxt, entropy,
                              p.amax(-1), entropy, to_sep, to_sep], 2)  # (B, H, FIELDS, T), in FIELDS order
        per_segment = (values * self.query_masks[:, None]).sum(-1) / self.query_counts[:, None]  # (B, H, FIELDS)
        self.rows[layer].append(per_segment)

    def finalize(self) -> SurfaceResult:
        n = max(self.n_segments, 1)
        sums = {k: torch.zeros(self.n_layers, self.n_heads, dtype=torch.float64) for k in FIELDS}
        per_segment = {}
        for j, k in enumerate(FIELDS):
            for layer, rows in enumerate(self.rows):
                for r in rows:  # each batch's float32 sum over its segments, then the float64 total (as always)
                    sums[k][layer] += r[..., j].contiguous().sum(0).double().cpu()
            if self.n_segments:
                per_segment[k] = torch.stack([torch.cat([r[..., j] for r in rows]) for rows in self.rows],
                                             1).float().cpu()
        return SurfaceResult(
            stats={k: (v / n).float() for k, v in sums.items()},
            n_segments=self.n_segments,
            n_tokens=int(self.n_tokens),
            sep_chance=float(self.sep_chance_sum) / n,
            token_counts=None if self.token_counts is None else self.token_counts.cpu(),
            per_segment=per_segment if self.n_segments else None,
            sep_chance_per_segment=torch.cat(self.sep_chance_rows).float().cpu() if self.n_segments else None,
        )


# ---- claim metrics (named by reference_numbers/clark2019_surface.toml) ----------------------------------------



BOOTSTRAP_SAMPLES = 200  # resamples of the segments behind each claim's standard error (seeded, so repeatable)


def bootstrapped(fn):
    """A metric whose value also gets a standard error: the sd of the metric over ``BOOTSTRAP_SAMPLES`` resamples
    of the segments (with replacement, seed 0), where the pass kept its per-segment statistics. A discrete value
    (a count or share of heads/layers) gets one too: how often a head or layer crosses its bar when the segments
    are redrawn."""
    import functools
    from types import SimpleNamespace

    @functools.wraps(fn)
    def wrapper(pr, **params):
        m = fn(pr, **params)
        res = pr.result
        if m.standard_error is not None or res.per_segment is None or res.n_segments < 2:
            return m
        sd, kept = bootstrap_sd(
            lambda idx: fn(SimpleNamespace(result=res.resample(torch.from_numpy(idx))), **params).value,
            res.n_segments, BOOTSTRAP_SAMPLES, seed=0, skip=(NotApplicable,))
        if np.isfinite(sd):
            m.standard_error = sd
            m.detail += f" [bootstrap over the {res.n_segments} segments, {kept} resamples]"
        return m

    return wrapper


def _n(res: SurfaceResult) -> dict:
    return {"n": res.n_segments, "n_unit": "segments"}


def _layers_text(values: torch.Tensor) -> str:
    return "by layer: " + " ".join(f"L{i + 1}={v:.3f}" for i, v in enumerate(values.tolist()))


def _heads_above(stat: torch.Tensor, threshold: float) -> list[tuple[int, int]]:
    return [tuple(x) for x in (stat > threshold).nonzero().tolist()]


@metric("median_head")
@bootstrapped
def median_head(pr, stat: str) -> Measurement:
    """Median over all heads of a per-head mean (Clark §3.1: most heads put little attention on themselves)."""
    values = pr.result.stats[stat].flatten()
    return Measurement(float(values.median()), detail=f"{(values < 0.3).float().mean():.0%} of heads < 0.30",
                       **_n(pr.result))


@metric("count_heads_above")
@bootstrapped
def count_heads_above(pr, stat: str, threshold: float) -> Measurement:
    """Number of heads whose mean ``stat`` exceeds ``threshold`` (Clark §3.1 offset heads), with their names."""
    heads = _heads_above(pr.result.stats[stat], threshold)
    names = ", ".join(f"{head_name(l, h)} ({pr.result.stats[stat][l, h]:.2f})" for l, h in heads)
    return Measurement(float(len(heads)), detail=f"heads: {names or 'none'}", unit="heads", **_n(pr.result))


@metric("offset_heads_in_band")
def offset_heads_in_band(pr, threshold: float, band: str, min_heads: int = 2) -> Measurement:
    """Share of the previous/next-token heads (> threshold) that sit in a depth band (Clark §3.1)."""
    res = pr.result
    heads = sorted(set(_heads_above(res.stats["prev"], threshold)) | set(_heads_above(res.stats["next"], threshold)))
    if len(heads) < min_heads:
        raise NotApplicable(f"only {len(heads)} head(s) put > {threshold} on the previous/next token "
                            f"(needs {min_heads} to say where they sit)")
    inside = [h for h in heads if in_band(relative_depth(h[0], res.n_layers), band)]
    return Measurement(len(inside) / len(heads), detail=f"{len(inside)} of {len(heads)} in {band}: "
                       + ", ".join(head_name(*h) for h in heads), **_n(res))


@metric("peak_layer_depth")
def peak_layer_depth(pr, stat: str, first_layer: int = 1, min_contrast: float = 0.2) -> Measurement:
    """Relative depth k/L of the layer where the per-layer mean of ``stat`` peaks (Clark §3.2 Fig. 2, §3.3).

    A peak must stand out: at least ``min_contrast`` (20%) above the mean of the other layers; otherwise the
    value is 0 ("no clear peak", in no depth band). Without this a flat profile (a random-init model) would
    put its argmax in some band by chance one time in three.
    """
    per_layer = pr.result.per_layer(stat)
    start = first_layer - 1
    if start >= len(per_layer) - 1:
        raise NotApplicable(f"the model has {len(per_layer)} layers; the claim compares layers {first_layer}..L")
    window = per_layer[start:]
    layer = start + int(torch.argmax(window))
    others = torch.cat([window[: layer - start], window[layer - start + 1:]]).mean()
    contrast = float(per_layer[layer] / others - 1) if float(others) > 0 else float("inf")
    depth = relative_depth(layer, len(per_layer))
    band = next((b for b in ("early", "middle", "late") if in_band(depth, b)), "?")
    text = (f"peak L{layer + 1} of {len(per_layer)} ({band}), {contrast:+.0%} over the other layers' mean; "
            f"{_layers_text(per_layer)}")
    if contrast < min_contrast:
        depth, text = 0.0, f"no clear peak (< {min_contrast:+.0%}): " + text
    return Measurement(depth, detail=text, unit="rel. depth", **_n(pr.result))


@metric("peak_layer_value")
@bootstrapped
def peak_layer_value(pr, stat: str) -> Measurement:
    """The highest per-layer mean of ``stat`` and its layer."""
    per_layer = pr.result.per_layer(stat)
    layer = int(torch.argmax(per_layer))
    return Measurement(float(per_layer[layer]), detail=f"at L{layer + 1}; {_layers_text(per_layer)}", **_n(pr.result))


@metric("sep_peak_over_chance")
@bootstrapped
def sep_peak_over_chance(pr) -> Measurement:
    """Peak-layer attention to [SEP] divided by the separators' share of the tokens, n_sep/L, i.e. chance (§3.2;
    2/L for ``[CLS] A [SEP] B [SEP]``, 3/L for RoBERTa's ``<s> A </s></s> B </s>``)."""
    per_layer = pr.result.per_layer("to_sep")
    layer = int(torch.argmax(per_layer))
    ratio = float(per_layer[layer]) / pr.result.sep_chance
    return Measurement(ratio, detail=f"L{layer + 1}: {per_layer[layer]:.3f} vs chance {pr.result.sep_chance:.3f}",
                       unit="x chance", **_n(pr.result))


@metric("fraction_heads_above")
@bootstrapped
def fraction_heads_above(pr, stat: str, threshold: float) -> Measurement:
    values = pr.result.stats[stat]
    heads = _heads_above(values, threshold)
    return Measurement(len(heads) / values.numel(), detail=f"{len(heads)} of {values.numel()} heads > {threshold}",
                       **_n(pr.result))


@metric("stat_at_peak_layer")
@bootstrapped
def stat_at_peak_layer(pr, stat: str, peak_of: str) -> Measurement:
    """Per-layer mean of ``stat`` in the layer where ``peak_of`` peaks (Clark §3.2: [SEP]→[SEP] where [SEP] is high)."""
    layer = int(torch.argmax(pr.result.per_layer(peak_of)))
    per_layer = pr.result.per_layer(stat)
    return Measurement(float(per_layer[layer]), detail=f"L{layer + 1} (peak of {peak_of}); {_layers_text(per_layer)}",
                       **_n(pr.result))


@metric("fraction_layers_greater")
@bootstrapped
def fraction_layers_greater(pr, stat: str, other: str) -> Measurement:
    a, b = pr.result.per_layer(stat), pr.result.per_layer(other)
    wins = int((a > b).sum())
    return Measurement(wins / len(a), detail=f"{wins} of {len(a)} layers; {stat} {_layers_text(a)}", **_n(pr.result))


@metric("top_heads_in_band")
def top_heads_in_band(pr, stat: str, k: int, band: str) -> Measurement:
    """Share of the k heads with the highest ``stat`` that sit in a depth band (Clark §3.3 broad heads)."""
    values = pr.result.stats[stat]
    n_heads = values.shape[1]
    if values.numel() < 2 * k:
        raise NotApplicable(f"the model has {values.numel()} heads: its top {k} would be most of them")
    top = torch.topk(values.flatten(), k).indices.tolist()
    heads = [divmod(i, n_heads) for i in top]
    inside = [h for h in heads if in_band(relative_depth(h[0], values.shape[0]), band)]
    names = ", ".join(f"{head_name(*h)} ({values[h]:.2f})" for h in heads)
    return Measurement(len(inside) / k, detail=f"{len(inside)} of {k} in {band}: {names}", **_n(pr.result))


@metric("median_of_top_heads")
@bootstrapped
def median_of_top_heads(pr, stat: str, by: str, k: int) -> Measurement:
    """Median of ``stat`` over the k heads with the highest ``by`` (Clark §3.3: broad heads' max weight)."""
    if pr.result.stats[by].numel() < 2 * k:
        raise NotApplicable(f"the model has {pr.result.stats[by].numel()} heads: its top {k} would be most of them")
    ranked = torch.topk(pr.result.stats[by].flatten(), k).indices
    values = pr.result.stats[stat].flatten()[ranked]
    return Measurement(float(values.median()), detail="values: " + ", ".join(f"{v:.3f}" for v in values.tolist()),
                       **_n(pr.result))


@metric("fraction_layers_close")
@bootstrapped
def fraction_layers_close(pr, stat: str, other: str, tolerance: float, exclude_last: bool = True) -> Measurement:
    """Share of layers where the per-layer means of two statistics differ by at most ``tolerance``."""
    a, b = pr.result.per_layer(stat), pr.result.per_layer(other)
    if exclude_last:
        a, b = a[:-1], b[:-1]
    if len(a) == 0:
        raise NotApplicable("the model has one layer: no layer is left once the last is excluded")
    close = int(((a - b).abs() <= tolerance).sum())
    diffs = " ".join(f"L{i + 1}={d:+.2f}" for i, d in enumerate((a - b).tolist()))
    return Measurement(close / len(a), detail=f"{close} of {len(a)} layers; differences {diffs}", **_n(pr.result))



@metric("frequency_rank")
def frequency_rank(pr, pieces: tuple) -> Measurement:
    """Worst frequency rank of ``pieces`` among the segments' word pieces, specials excluded (Clark §3.2:
    "." and "," are the most frequent tokens after "the")."""
    top = pr.result.top_tokens or []
    ranks = {p: next((i + 1 for i, (t, _) in enumerate(top) if t == p), None) for p in pieces}
    missing = [p for p, r in ranks.items() if r is None]
    worst = float("inf") if missing else float(max(ranks.values()))
    return Measurement(worst, n=int(pr.result.n_tokens), n_unit="pieces", unit="rank",
                       detail="ranks " + ", ".join(f"{p!r}={r}" for p, r in ranks.items())
                       + "; top: " + " ".join(f"{t}({c})" for t, c in top[:6]))


@metric("example_heads_bert_base")
def example_heads_bert_base(pr) -> Measurement:
    """Clark Fig. 1's example heads (bert-base ids): 1-1 broad, 3-1 next token, 8-7 [SEP], 11-6 punctuation.
    Counts how many of the four behave as shown."""
    st = pr.result.stats
    shape = tuple(st["entropy"].shape)
    if shape[0] < 11 or shape[1] < 7:  # heads 11-6 and 8-7 must exist (also under BERTATTN_ASSUME_SHAPE)
        raise NotApplicable(f"Fig. 1's heads 1-1, 3-1, 8-7, 11-6 need at least 11 layers x 7 heads; "
                            f"the model has {shape[0]}x{shape[1]}")
    entropy = st["entropy"].flatten()
    checks = {
        "1-1 in the top entropy quartile": bool(st["entropy"][0, 0] >= entropy.quantile(0.75)),
        "3-1 next token > 0.5": bool(st["next"][2, 0] > 0.5),
        "8-7 [SEP] > 0.5": bool(st["to_sep"][7, 6] > 0.5),
        "11-6 mostly punctuation": bool(st["to_punct"][10, 5] > max(st["to_sep"][10, 5], st["to_cls"][10, 5])),
    }
    return Measurement(float(sum(checks.values())), unit="of 4", detail="; ".join(
        f"{k}: {'yes' if v else 'no'}" for k, v in checks.items()), **_n(pr.result))


# ---- the pass ---------------------------------------------------------------------------------------------------

@family("surface", corpora=tuple(SEGMENT_CORPORA), default_corpus="wikitext2", quick_limit=300)
def prepare_surface(loaded: LoadedModel, data_dir: Path, corpus: str = "wikitext2", max_tokens: int = 128,
                    limit: int | None = None, batch_size: int = 32) -> PreparedPass:
    """Clark §3: segments of at most ``max_tokens`` pieces, by default built as the authors' preprocess_unlabeled.py
    builds them (see :mod:`bertattn_bench.data.segments` for the recipe and the named alternatives)."""
    from ..data.segments import load_segment_set

    max_tokens = min(max_tokens, loaded.info.max_positions)
    segs = load_segment_set(data_dir, corpus, loaded.tokenizer, max_tokens, limit)
    info, tok = loaded.info, loaded.tokenizer

    def finish(result):
        counts = result.token_counts.clone()
        counts[tok.all_special_ids] = 0
        top = torch.topk(counts, 20)
        result.top_tokens = list(zip(tok.convert_ids_to_tokens(top.indices.tolist()), top.values.tolist()))
        return result

    return PreparedPass("surface", corpus, segs.description, loaded, segs.encoded, segs.skipped,
                        lambda: SurfaceReducer(info.n_layers, info.n_heads, info.device, len(tok)),
                        finish=finish, batch_size=batch_size, data_paths=[data_dir / SEGMENT_CORPORA[corpus]])
