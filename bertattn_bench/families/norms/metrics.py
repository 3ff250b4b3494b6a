"""The norms family's claim metrics (named by reference_numbers/kobayashi2020_norms.toml and kobayashi2021_norms.toml)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch

from ...claims.registry import Measurement, NotApplicable, metric
from ...claims.stats import jackknife_se, rank_correlation
from ...training.glue_pass import result_of
from ..common.surface_stats import resampled_bounds
from .run import NormsResult

JACKKNIFE_GROUPS = 20  # the rank correlations' jackknife over segments (claims.stats.jackknife_se)


_CAT_FIELD = {"special": "to_special", "sep": "to_sep", "cls": "to_cls", "punct": "to_punct"}


def _n(res: NormsResult) -> dict:
    return {"n": res.n_segments, "n_unit": "segments"}


def _with_bounds(m: Measurement, res: NormsResult, again, needs: str = "fx_per_segment") -> Measurement:
    """``m`` with the 95% percentile bounds of ``again(resampled result).value`` over a bootstrap of the segments
    (issue 61: every judged value carries what its sample moves it by); as it is where the pass kept no per-segment
    sums (``needs``: a result from before them) or the readings' (``needs="readings"``)."""
    if needs == "readings":
        if any(r.per_segment is None for r in res.readings.values()):
            return m
    elif getattr(res, needs, None) is None:
        return m
    return resampled_bounds(m, res, again, res.n_segments, "segments")  # m as it is under two segments


@metric("norm_reading")
def norm_reading_metric(pr, metric: str, **params) -> Measurement:
    """A Clark §3 surface metric (by name) on the norm reading: per-head ||alpha f|| normalised per query row."""
    from ...claims.registry import METRICS

    res = result_of(pr)
    fn = METRICS[metric]
    m = fn(SimpleNamespace(result=res.readings["norms"]), **params)
    m.detail = "||alpha f|| reading; " + m.detail
    return m


def _qualifying(res: NormsResult, category: str, min_alpha: float) -> list[int]:
    per_layer = res.readings["weights"].per_layer(_CAT_FIELD[category])
    return [i for i, v in enumerate(per_layer.tolist()) if v >= min_alpha]


@metric("norm_discount")
def norm_discount(pr, category: str, min_alpha: float = 0.30) -> Measurement:
    """The smallest 1 - (norm share / alpha share) to ``category`` over the layers whose head-mean alpha share is at
    least ``min_alpha`` (0 when no layer is: nothing to discount), with the 95% percentile bounds of its bootstrap
    over the segments (both readings resampled together; issue 61: a minimum over qualifying layers, whose set may
    change with the sample, gets bounds, not a standard error)."""
    res = result_of(pr)
    return _with_bounds(_norm_discount(res, category, min_alpha), res,
                        lambda again: _norm_discount(again, category, min_alpha), needs="readings")


def _norm_discount(res, category: str, min_alpha: float) -> Measurement:
    stat = _CAT_FIELD[category]
    a, nrm = res.readings["weights"].per_layer(stat), res.readings["norms"].per_layer(stat)
    layers = _qualifying(res, category, min_alpha)
    text = " ".join(f"L{i + 1}={x:.3f}/{y:.3f}" for i, (x, y) in enumerate(zip(a.tolist(), nrm.tolist())))
    if not layers:
        return Measurement(0.0, detail=f"no layer gives {category} >= {min_alpha} by alpha; alpha/norm by layer: {text}",
                           **_n(res))
    disc = {i: 1 - float(nrm[i]) / float(a[i]) for i in layers}
    worst = min(disc, key=disc.get)
    return Measurement(disc[worst], detail=f"smallest discount at L{worst + 1} of layers "
                       f"{', '.join(str(i + 1) for i in layers)}; alpha/norm by layer: {text}", **_n(res))


@metric("fx_ratio")
def fx_ratio(pr, category: str = "special", min_alpha: float = 0.30) -> Measurement:
    """Mean ||f(x)|| of the category's tokens over that of the other tokens (head means), in the layers where alpha
    gives the category >= ``min_alpha`` (all layers when none does); bounds: a bootstrap over the segments (the layer
    set resampled with the ratio)."""
    res = result_of(pr)
    return _with_bounds(_fx_ratio(res, category, min_alpha), res, lambda again: _fx_ratio(again, category, min_alpha))


def _fx_ratio(res, category: str, min_alpha: float) -> Measurement:
    layers = _qualifying(res, category, min_alpha)
    where = "layers " + ", ".join(str(i + 1) for i in layers) if layers else "all layers (none reaches the alpha bar)"
    sel = layers or list(range(res.fx[category].shape[0]))
    cat, other = res.fx[category][sel].mean(), res.fx["other"][sel].mean()
    if not float(other) > 0:
        raise NotApplicable("no other tokens' ||f(x)|| to compare with")
    by_layer = " ".join(f"L{i + 1}={c:.2f}/{o:.2f}" for i, (c, o) in
                        enumerate(zip(res.fx[category].mean(1).tolist(), res.fx["other"].mean(1).tolist())))
    return Measurement(float(cat / other), detail=f"{where}; {category}/other ||f(x)|| by layer: {by_layer}",
                       unit="ratio", **_n(res))


@metric("alpha_fx_correlation")
def alpha_fx_correlation(pr) -> Measurement:
    """Median over heads of the Pearson r between the mean alpha a key token receives and its ||f^h(x)||; bounds: a
    bootstrap over the segments (each segment's moments)."""
    res = result_of(pr)
    return _with_bounds(_alpha_fx(res), res, _alpha_fx)


def _alpha_fx(res) -> Measurement:
    r = res.alpha_fx_r
    finite = r[torch.isfinite(r)]
    if finite.numel() == 0:
        raise NotApplicable("no head has a defined correlation (constant alpha or ||f(x)||)")
    return Measurement(float(finite.median()), detail="by layer (head median): " + " ".join(
        f"L{i + 1}={float(row[torch.isfinite(row)].median()):+.2f}" for i, row in enumerate(r)
        if torch.isfinite(row).any()), unit="r", n=res.n_tokens, n_unit="tokens")


def _spearman(res: NormsResult, of: str, without_specials: bool, segments=None) -> tuple[float, int]:
    """rho(rank, ``of``) over the token occurrences (of the ``segments`` given: a jackknife's kept segments)."""
    if res.ranks is None:
        raise NotApplicable(res.rank_note)
    if of not in res.tokens:
        raise NotApplicable(res.residual_note or f"{of} was not measured")
    keep = ~res.token_special if without_specials else torch.ones_like(res.token_special)
    if segments is not None:
        keep = keep & torch.isin(res.token_segment, torch.from_numpy(np.asarray(segments)))
    rho, _ = rank_correlation(res.ranks[keep].numpy(), res.tokens[of][keep].numpy())
    return rho, int(keep.sum())


@metric("freq_spearman")
def freq_spearman(pr, of: str, minus: str | None = None, without_specials: bool = False) -> Measurement:
    """Spearman rho between each token occurrence's frequency rank and its value ``of`` (layer means), minus the
    same for ``minus`` where given (Kobayashi 2020 §4, 2021 Table 2)."""
    res = result_of(pr)
    rho, n = _spearman(res, of, without_specials)
    text = f"rho(rank, {of}) = {rho:+.3f}"
    if minus:
        other, _ = _spearman(res, minus, without_specials)
        text += f", rho(rank, {minus}) = {other:+.3f}"
        rho -= other
    se = None
    if res.token_segment is not None and res.n_segments >= 2:  # occurrences cluster in segments: jackknife over them
        def value(kept):
            v = _spearman(res, of, without_specials, kept)[0]
            return v - _spearman(res, minus, without_specials, kept)[0] if minus else v

        se, groups = jackknife_se(value, res.n_segments, JACKKNIFE_GROUPS)
        se = se if np.isfinite(se) else None
        text += f"; SE by a jackknife over {groups} groups of the {res.n_segments} segments" if se is not None else ""
    return Measurement(rho, detail=text + ("; [CLS]/[SEP] left out" if without_specials else "") + f"; {res.rank_note}",
                       unit="rho", n=n, n_unit="tokens", standard_error=se)


@metric("mixing_mean")
def mixing_mean(pr, ratio: str, minus: str | None = None) -> Measurement:
    """The mean mixing ratio over every real (token, layer) of the masked sweep (2021 Table 1), minus another's;
    bounds: a bootstrap over the segments."""
    res = result_of(pr)
    return _with_bounds(_mixing_mean(res, ratio, minus), res, lambda again: _mixing_mean(again, ratio, minus),
                        needs="mixing_per_segment")


def _mixing_mean(res, ratio: str, minus: str | None) -> Measurement:
    for r in (ratio, minus):
        if r and r not in res.mixing_mean:
            raise NotApplicable(res.residual_note or f"{r} was not measured")
    value = res.mixing_mean[ratio] - (res.mixing_mean[minus] if minus else 0.0)
    table = "; ".join(f"{k} {100 * res.mixing_mean[k]:.2f} ({100 * res.mixing_max[k]:.2f} / {100 * res.mixing_min[k]:.2f})"
                      for k in res.mixing_mean)
    return Measurement(value, detail=f"mean (max / min) %: {table}; {res.n_masked} pieces masked",
                       n=res.n_tokens, n_unit="tokens")


_ORDER = (("attn_w", "attn_n"), ("attnres_w", "attnres_n"), ("attn_n", "attnres_n"), ("attnres_n", "attnresln_n"))


@metric("mixing_order")
def mixing_order(pr) -> Measurement:
    """How many of Table 1's four orderings of the mean mixing ratios hold; bounds: a bootstrap over the segments."""
    res = result_of(pr)
    return _with_bounds(_mixing_order(res), res, _mixing_order, needs="mixing_per_segment")


def _mixing_order(res) -> Measurement:
    missing = [b for _, b in _ORDER if b not in res.mixing_mean]
    if missing:
        raise NotApplicable(res.residual_note or f"{missing} not measured")
    held = [(a, b) for a, b in _ORDER if res.mixing_mean[a] > res.mixing_mean[b]]
    return Measurement(float(len(held)), unit="of 4", n=res.n_tokens, n_unit="tokens", detail="; ".join(
        f"{a} {100 * res.mixing_mean[a]:.2f} {'>' if (a, b) in held else '<='} {b} {100 * res.mixing_mean[b]:.2f}"
        for a, b in _ORDER))
