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
from ..engine.attention import head_name
from ..engine.model import LoadedModel
from ..engine.passes import PreparedPass
from .common.surface_stats import BOOTSTRAP_SAMPLES, SurfaceResult, segments_pass, with_percentile_bounds
from .common.surface_stats import FIELDS as FIELDS  # re-exported: the statistics' names
from .common.surface_stats import SurfaceReducer as SurfaceReducer  # re-exported: the reducer's old home

# ---- claim metrics (named by reference_numbers/clark2019_surface.toml) ----------------------------------------



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


def bootstrap_bounded(fn):
    """A discrete metric (a share of heads in a band, the depth of a peak layer) gets percentile bounds over
    ``BOOTSTRAP_SAMPLES`` resamples of the segments (seed 0), where the pass kept its per-segment statistics: how
    far the count or the peak moves when the segments are redrawn (issue 61: counts, ranks and depths get bounds)."""
    import functools
    from types import SimpleNamespace

    @functools.wraps(fn)
    def wrapper(pr, **params):
        m = fn(pr, **params)
        res = pr.result
        if m.bounds is not None or m.standard_error is not None or res.per_segment is None or res.n_segments < 2:
            return m
        return with_percentile_bounds(
            m, lambda idx: fn(SimpleNamespace(result=res.resample(torch.from_numpy(idx))), **params).value,
            res.n_segments, "segments")

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
@bootstrap_bounded
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
@bootstrap_bounded
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
@bootstrap_bounded
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
    return segments_pass(loaded, data_dir, corpus, max_tokens=max_tokens, limit=limit, batch_size=batch_size)
