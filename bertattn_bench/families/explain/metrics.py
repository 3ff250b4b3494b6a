"""The ``explain`` family's claim metrics (named by reference_numbers/abnar2020_explain.toml and
brunner2020_explain.toml). Every value is a mean over examples (sentences) with the standard error of that mean
(:func:`stats.mean_se`; the claims layer's interval is value +- 1.96 SE), each example's statistic computed first:
the paper's unit (Abnar & Zuidema report the mean and sd of the per-example Spearman's rho)."""
from __future__ import annotations

import numpy as np

from ...claims.registry import DEPTH_BANDS, Measurement, NotApplicable, in_band, metric, relative_depth
from ...claims.stats import mean_se, wilson_bounds
from ...training.glue_pass import result_of


def layers_of(spec, n_layers: int) -> list[int]:
    """0-based layers: a depth band name (registry.DEPTH_BANDS: ``"middle"`` = L3-4 of 6, L5-8 of 12),
    ``"after_first"`` (2..L), ``"first"``, ``"last"``, ``"all"``, or a list of 1-based layers."""
    if spec == "all":
        return list(range(n_layers))
    if spec == "after_first":
        return list(range(1, n_layers))
    if spec == "first":
        return [0]
    if spec == "last":
        return [n_layers - 1]
    if isinstance(spec, str) and spec in DEPTH_BANDS:
        return [i for i in range(n_layers) if in_band(relative_depth(i, n_layers), spec)]
    return [int(k) - 1 for k in spec]


def rho_of(r, reading: str, importance: str) -> np.ndarray:
    key = f"{reading}|{importance}"
    if key not in r.rho:
        why = ("flow from every output node is not computed on this pass at this tier (constants.TIERS)"
               if reading == "flow_max" else "the norm reading is refused on this model")
        raise NotApplicable(f"no {reading} reading: {why}")
    return r.rho[key]


def per_example(values: np.ndarray, what: str, r, layers_text: str, **values_out) -> Measurement:
    """A mean over the examples where ``values`` (S,) is finite, with its SE."""
    ok = np.isfinite(values)
    if ok.sum() < 2:
        raise NotApplicable(f"{what}: fewer than 2 examples with a value")
    v = values[ok]
    mean, se = float(v.mean()), mean_se(v)
    detail = (f"{what}, {layers_text}: mean {mean:+.3f} (sd {v.std(ddof=1):.3f}) over {ok.sum()} {r.task} dev examples "
              f"({r.tier} tier)")
    return Measurement(mean, int(ok.sum()), "examples", detail, standard_error=se,
                       values={"sd": float(v.std(ddof=1)), **values_out})


def per_layer_means(rho: np.ndarray) -> list[float]:
    return [float(np.nanmean(rho[:, i])) if np.isfinite(rho[:, i]).any() else float("nan")
            for i in range(rho.shape[1])]


@metric("explain_layer_contrast")
def explain_layer_contrast(pr, reading: str = "raw_cls", importance: str = "blankout", first: str | list = "first",
                           then: str | list = "after_first", tasks: list | None = None) -> Measurement:
    """Per example: mean rho of ``reading`` over the layers ``first`` minus its mean over the layers ``then``
    (Abnar & Zuidema: raw attention's correlation falls after layer 1, ``first`` = layer 1, ``then`` = 2..L; rollout
    rises with depth, ``first`` = the last layer, ``then`` = layer 1); the mean over examples."""
    r = result_of(pr, tasks)
    rho = rho_of(r, reading, importance)
    a, b = layers_of(first, r.n_layers), layers_of(then, r.n_layers)
    diff = rho[:, a].mean(1) - rho[:, b].mean(1)
    return per_example(diff, f"rho({reading}, {importance}) layers {[i + 1 for i in a]} - layers {[i + 1 for i in b]}",
                       r, "per example", per_layer=per_layer_means(rho))


@metric("explain_reading_gap")
def explain_reading_gap(pr, reading: str = "rollout_cls", other: str = "raw_cls", importance: str = "blankout",
                        layers: str | list = "after_first", tasks: list | None = None) -> Measurement:
    """Per example: the mean over ``layers`` of rho(``reading``) - rho(``other``), on the examples that have both
    (flow: the first ``n_flow``); the mean over examples (rollout > raw from layer 2; flow >= rollout in the middle
    layers)."""
    r = result_of(pr, tasks)
    a, b = rho_of(r, reading, importance), rho_of(r, other, importance)
    ls = layers_of(layers, r.n_layers)
    if not ls:
        raise NotApplicable(f"no layer of {r.n_layers} is in {layers!r}")
    diff = (a[:, ls] - b[:, ls]).mean(1)
    return per_example(diff, f"rho({reading}) - rho({other}) vs {importance}", r,
                       f"layers {[i + 1 for i in ls]}", reading=per_layer_means(a), other=per_layer_means(b))


@metric("explain_strongest_layer")
def explain_strongest_layer(pr, reading: str = "raw_max", importance: str = "gradient", tasks: list | None = None
                            ) -> Measurement:
    """The largest |mean rho| of ``reading`` over the layers (Table 3: every reading's correlation with the gradient
    importance is weak on a fine-tuned pre-trained model), with the SE at that layer (the layer is chosen on the
    same data: the interval is optimistic by that choice)."""
    r = result_of(pr, tasks)
    rho = rho_of(r, reading, importance)
    means = per_layer_means(rho)
    k = int(np.nanargmax(np.abs(means)))
    m = per_example(rho[:, k], f"rho({reading}, {importance})", r, f"layer {k + 1}",
                    per_layer=means, layer=k + 1)
    m.value = abs(m.value)
    m.detail = f"largest |mean rho| over layers at layer {k + 1}: " + m.detail
    return m


@metric("explain_layer_rho")
def explain_layer_rho(pr, reading: str = "rollout_cls", importance: str = "blankout", layers: str | list = "last",
                      tasks: list | None = None) -> Measurement:
    """Per example: the mean over ``layers`` of rho(``reading``, ``importance``); the mean over examples (how
    strongly a reading tracks the importance, Tables 1-2's cells)."""
    r = result_of(pr, tasks)
    rho = rho_of(r, reading, importance)
    ls = layers_of(layers, r.n_layers)
    if not ls:
        raise NotApplicable(f"no layer of {r.n_layers} is in {layers!r}")
    return per_example(rho[:, ls].mean(1), f"rho({reading}, {importance})", r, f"layers {[i + 1 for i in ls]}",
                       per_layer=per_layer_means(rho))


def effective_of(r) -> dict:
    if r.effective is None:
        raise NotApplicable(r.effective_note or "no effective attention on this model")
    return r.effective


@metric("brunner_divergence_gap")
def brunner_divergence_gap(pr) -> Measurement:
    """1 - Pearson r(raw, effective attention) (mean over layers and heads) of the sequences longer than the head
    dimension minus that of the sequences no longer than it (there effective attention is the raw map: 0 by
    construction, up to float error). SE: the two groups' SEs combined (independent sequences)."""
    r = result_of(pr)
    e = effective_of(r)
    div = 1.0 - e["agreement"].mean(1)
    long, short = e["n"] > r.d_head, e["n"] <= r.d_head
    if long.sum() < 2 or short.sum() < 1:
        raise NotApplicable(f"{long.sum()} sequences longer than d_head {r.d_head} and {short.sum()} not: both needed")
    lo, sh = div[long], div[short]
    se_s = mean_se(sh) if short.sum() > 1 else 0.0
    se = float(np.hypot(mean_se(lo), se_s))
    value = float(lo.mean() - sh.mean())
    detail = (f"1 - r(raw, effective): {lo.mean():.4f} over {long.sum()} sequences longer than d_head = {r.d_head} "
              f"pieces vs {sh.mean():.2e} over {short.sum()} not ({r.effective_note}; smallest rank of T "
              f"{int(e['min_rank'].min())})")
    return Measurement(value, int(len(div)), "sequences", detail, standard_error=se,
                       values={"long": float(lo.mean()), "short": float(sh.mean()), "d_head": r.d_head})


@metric("brunner_special_drop")
def brunner_special_drop(pr, category: str = "sep", layers: str | list = "middle") -> Measurement:
    """Per sequence longer than the head dimension: the share of attention on ``category`` ("sep": [SEP];
    "special": [CLS] and [SEP]) under raw attention minus under effective attention (|A_eff| normalised per row),
    mean over ``layers``; the mean over sequences."""
    r = result_of(pr)
    e = effective_of(r)
    ls = layers_of(layers, r.n_layers)
    long = e["n"] > r.d_head
    raw, eff = e[f"raw_{category}"][long][:, ls], e[f"eff_{category}"][long][:, ls]
    m = per_example((raw - eff).mean(1), f"{category} share raw - effective", r, f"layers {[i + 1 for i in ls]}, "
                    f"sequences > d_head {r.d_head}", raw=float(raw.mean()), effective=float(eff.mean()))
    m.n_unit = "sequences"
    m.detail += f"; raw {raw.mean():.3f}, effective {eff.mean():.3f} ({r.effective_note})"
    return m


MAPPINGS = {"none": "identified", "linear": "identified_linear"}  # the reading -> its ExplainResult field


def identified_of(r, mapping: str = "none") -> tuple[np.ndarray, np.ndarray]:
    """(identified (S, L) token counts, tokens (S,)) of Brunner's identifiability reading (``mapping``: "none", the
    nearest input embedding by cosine; "linear", through the learned linear map), or NotApplicable."""
    if mapping not in MAPPINGS:
        raise ValueError(f"mapping {mapping!r}: one of {sorted(MAPPINGS)}")
    ident = getattr(r, MAPPINGS[mapping], None)
    if ident is None:
        raise NotApplicable("no identifiability reading on this pass (read on the GLUE passes' encoder)"
                            if getattr(r, "identified", None) is None else r.identity_note or "no learned map")
    return np.asarray(ident, dtype=float), np.asarray(r.lengths, dtype=float)


@metric("brunner_identifiability_share")
def brunner_identifiability_share(pr, layers: str | list = "last", mapping: str = "none") -> Measurement:
    """The share of all tokens (pooled over sequences) identified at ``layers`` (mean over them): layer l's hidden
    state at i (``mapping`` "linear": its image under the learned map) nearest (cosine) to input embedding i among
    the sequence's; Wilson's 95% bounds on the pooled count."""
    r = result_of(pr)
    ident, n = identified_of(r, mapping)
    ls = layers_of(layers, r.n_layers)
    right, total = float(ident[:, ls].sum()), float(n.sum() * len(ls))
    lo, hi = wilson_bounds(int(round(right)), int(total))
    per_layer = [float(ident[:, i].sum() / n.sum()) for i in range(r.n_layers)]
    how = "" if mapping == "none" else f" through the learned {mapping} map ({r.identity_note})"
    return Measurement(right / total, int(n.sum()), "tokens",
                       f"tokens identified at layers {[i + 1 for i in ls]}{how}: {int(right)} of {int(total)} over "
                       f"{len(n)} sequences; per layer {[round(x, 3) for x in per_layer]}", bounds=(lo / 100, hi / 100),
                       values={"per_layer": per_layer})


@metric("brunner_identifiability_learned_gain")
def brunner_identifiability_learned_gain(pr) -> Measurement:
    """Per sequence: the share of its tokens identified at the last layer through the learned linear map minus by
    cosine alone; the mean over sequences."""
    r = result_of(pr)
    plain, n = identified_of(r)
    learned, _ = identified_of(r, "linear")
    m = per_example((learned[:, -1] - plain[:, -1]) / n, "share identified at the last layer, learned map - cosine",
                    r, "per sequence", learned=float(learned[:, -1].sum() / n.sum()),
                    cosine=float(plain[:, -1].sum() / n.sum()))
    m.n_unit = "sequences"
    m.detail += f"; {r.identity_note}"
    return m


@metric("brunner_identifiability_drop")
def brunner_identifiability_drop(pr) -> Measurement:
    """Per sequence: the share of its tokens identified at layer 1 minus at the last layer; the mean over sequences."""
    r = result_of(pr)
    ident, n = identified_of(r)
    drop = (ident[:, 0] - ident[:, -1]) / n
    m = per_example(drop, "share identified, layer 1 - last layer", r, "per sequence",
                    per_layer=[float(ident[:, i].sum() / n.sum()) for i in range(r.n_layers)])
    m.n_unit = "sequences"
    return m
