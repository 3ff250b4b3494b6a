"""The disable family's claim metrics (named by reference_numbers/kovaleva2019_disable.toml)."""
from __future__ import annotations

import numpy as np

from ...claims.registry import Measurement, NotApplicable, metric
from ...claims.stats import binomial_above_p, noise_bar, paired_gain_bounds, sign_test_p
from ...claims.stats import mcnemar_exact as mcnemar_exact  # re-exported (tests read the McNemar test from here)
from ...data import glue
from ...engine.attention import head_name
from ...training.glue_pass import result_of
from ..common.sweep_scoring import (
    correlation_bounds,
    paired_by_correlation,
    pairing_text,
    sweep_of,
)
from .run import DisableResult

# ---- claim metrics (named by reference_numbers/kovaleva2019_disable.toml) ------------------------------------

def _noise(r: DisableResult, seed_sd: dict | None) -> tuple[float, str]:
    """The bar a drop must clear where no paired test exists (:func:`stats.noise_bar`; framenet's STS-B drops): one
    example's step and the seed spread (measured here with >= 2 seeds, else the spread recorded in the claim file)."""
    step = 0.0 if np.isnan(r.step) else r.step
    bar, sd, where = noise_bar(step, r.seeds, r.seed_sd if len(r.seeds) > 1 else float("nan"), r.task, seed_sd)
    return bar, f"bar {bar:.2f} = max(one example {step:.2f}, seed sd {sd:.2f}; {where})"


Z95 = 1.96  # the claims layer's interval: value +- 1.96 SE (Claim.interval_z's default)


def _as_interval(lo: float, hi: float, undecided: bool) -> tuple[float, float]:
    """(value, standard error) whose value +- 1.96 SE is exactly [lo, hi], the way a metric tells the claims layer
    its decision interval; ``undecided`` keeps it open where lo == hi would read as an exact value."""
    if undecided and hi - lo < 1e-9:
        hi = lo + 1e-6
    return (lo + hi) / 2, (hi - lo) / (2 * Z95)


def _paired_bounds(r: DisableResult, s: int, what: str, gained, lost, alpha_lower: float, alpha_upper: float):
    """Seed ``s``'s one-sided bounds (points) on each configuration's gain over the undisabled model on the same dev
    examples: exact (Clopper-Pearson on the flips, :func:`stats.paired_gain_bounds`) for a classification task,
    the normal bounds for two overlapping correlations (:func:`correlation_bounds`) for a regression task."""
    if paired_by_correlation(r, what):
        return correlation_bounds(r, s, what, alpha_lower, alpha_upper)
    return paired_gain_bounds(gained[s], lost[s], r.n_dev, alpha_lower, alpha_upper)


@metric("disable_best_head_margin")
def disable_best_head_margin(pr, tasks: list | None = None, what: str = "head", margin: float = 0.1,
                             alpha: float = 0.025) -> Measurement:
    """Does disabling some single head (``what="layer"``: some whole layer) raise the score? A within-model
    question: each configuration is scored on the same dev examples as the undisabled model, so it is judged by
    the paired (exact McNemar) bounds of :func:`stats.paired_gain_bounds` on its flips, per seed:

    * lo = the best configuration's lower bound, one-sided at ``alpha`` / K (Bonferroni over the K heads or
      layers): lo > 0 is a gain significant after the multiple comparison;
    * hi = the best upper bound (one-sided at ``alpha``; every configuration's, so no correction: to rule out
      any gain each one must be ruled out) minus ``margin`` (points): hi < 0 rules out any gain of ``margin`` or
      more for every configuration (the equivalence side).

    Several seeds (several fine-tuned models, each the paper's one model): the union [min lo, max hi], so the
    claim holds when it holds on every seed and does not hold when every seed rules a gain out; otherwise (and
    where the seeds disagree) inconclusive. Returned as value +- 1.96 SE = [lo, hi] (threshold 0): the value is
    the interval's centre, not a gain; the observed best gains are in the detail and ``values``."""
    r = result_of(pr, tasks)
    delta, gained, lost, names, K, seeds = _seed_bounds(r, what, alpha)
    los, his, parts, best = [], [], [], []
    for s, seed, low, up, i in seeds:
        j = int(np.argmax(low))
        los.append(float(low[j]))
        his.append(float(up.max()) - margin)
        best.append(float(delta[s, i]))
        test = pairing_text(r, what, s, i)
        if not paired_by_correlation(r, what):
            p = float(binomial_above_p(int(gained[s, i]), int(gained[s, i] + lost[s, i]), 0.5))
            test += f", one-sided exact p {p:.3g}, x{K} {min(1.0, p * K):.3g}"
        parts.append(f"seed {seed}: best {names[i]} {delta[s, i]:+.2f} ({test}); best lower bound {names[j]} "
                     f"{low[j]:+.2f}; best upper bound {up.max():+.2f} ({names[int(np.argmax(up))]})")
    lo, hi = min(los), max(his)
    decided = lo > 0 or hi < 0
    hi = max(hi, lo)
    value, se = _as_interval(lo, hi, undecided=not decided)
    verdict = ("a gain significant on every seed" if lo > 0 else "every seed rules out a gain of "
               f"{margin:g} or more" if hi < 0 else "cannot tell: no significant gain, none ruled out")
    return Measurement(value, r.n_dev, "dev examples", unit="points (centre of [lo, hi])", standard_error=se,
                       values={"lower": lo, "upper_minus_margin": hi, "best_gain": float(np.mean(best)),
                               "best_gain_per_seed": best, "margin": margin, "configurations": K,
                               "seeds": len(r.seeds)},  # the union over seeds: its own interval holds them
                       detail=f"{r.task} base {np.mean(r.base):.2f}; {what}s, {K} configurations, {_bounds_kind(r)}; "
                              f"{'; '.join(parts)}; [lo, hi] = [{lo:+.2f}, {hi:+.2f}] (lo: best "
                              f"{what}'s one-sided {1 - alpha:.3g} lower bound, Bonferroni x{K}; hi: best one-sided "
                              f"upper bound - margin {margin:g}): {verdict}")


def _bounds_kind(r: DisableResult) -> str:
    if glue.task(r.task).is_regression:
        return f"paired bounds on Δ {r.metric} for two overlapping correlations (Steiger 1980) on {r.n_dev} examples"
    return f"one example = {r.step:.2f} points, exact paired bounds on the flips"


def _seed_bounds(r: DisableResult, what: str, alpha: float):
    """The sweep of ``what`` (head/layer) and, per seed, its configurations' exact paired gain bounds: (delta,
    gained, lost, names, K, [(seed index, seed, lower bounds one-sided at alpha / K, upper bounds at alpha, the
    best configuration's index)]); a regression task's bounds by :func:`_paired_bounds`."""
    delta, gained, lost, names = sweep_of(r, what)
    K = delta.shape[1]
    seeds = []
    for s, seed in enumerate(r.seeds):
        low, up = _paired_bounds(r, s, what, gained, lost, alpha / K, alpha)
        seeds.append((s, seed, low, up, int(np.argmax(delta[s]))))
    return delta, gained, lost, names, K, seeds


@metric("disable_best_gain")
def disable_best_gain(pr, tasks: list | None = None, what: str = "head", alpha: float = 0.025) -> Measurement:
    """The best single-head (layer) gain, as the interval [lo, hi] a range claim on it is judged by: lo = the
    best exact paired lower bound, one-sided at ``alpha`` / K (Bonferroni over the K configurations: the largest
    true gain exceeds lo unless a level-``alpha`` error), hi = the best upper bound, one-sided at ``alpha`` (to
    bound every configuration's gain below a value each must be bounded: no correction). A range [a, b] holds when
    lo > a and hi < b (a significant gain above a, every gain bounded below b), does not hold when hi < a or
    lo > b, else inconclusive: the best of K noisy deltas reads inconclusive, not "in range". Several seeds: the
    union of the seeds' intervals (holds on every seed, does not hold on every seed on the same side). The value is
    the interval's centre (value +- 1.96 SE = [lo, hi]); the observed best gains are in the detail and ``values``."""
    r = result_of(pr, tasks)
    delta, gained, lost, names, K, seeds = _seed_bounds(r, what, alpha)
    los, his, best, parts = [], [], [], []
    for s, seed, low, up, i in seeds:
        los.append(float(low.max()))
        his.append(float(up.max()))
        best.append(float(delta[s, i]))
        parts.append(f"seed {seed}: {names[i]} {delta[s, i]:+.2f} ({pairing_text(r, what, s, i)}), best "
                     f"gain in [{low.max():+.2f}, {up.max():+.2f}]")
    lo, hi = min(los), max(his)
    value, se = _as_interval(lo, hi, undecided=False)
    return Measurement(value, r.n_dev, "dev examples", unit="points (centre of [lo, hi])", standard_error=se,
                       values={"lower": lo, "upper": hi, "best_gain": float(np.mean(best)),
                               "best_gain_per_seed": best, "configurations": K,
                               "seeds": len(r.seeds)},  # the union over seeds: its own interval holds them
                       detail=f"{r.task}: best single-{what} gain per seed: {'; '.join(parts)} ({_bounds_kind(r)}, "
                              f"one-sided {1 - alpha:.3g}, the lower ones Bonferroni x{K}); [lo, hi] = "
                              f"[{lo:+.2f}, {hi:+.2f}]")


@metric("disable_mean_head_delta")
def disable_mean_head_delta(pr, tasks: list | None = None) -> Measurement:
    """Mean Δ over all heads (a head disabled at random), mean over seeds; share of heads with Δ > 0."""
    r = result_of(pr, tasks)
    mean = float(r.head_delta.mean())
    pos = int((r.head_delta > 0).sum())
    neg = int((r.head_delta < 0).sum())
    p = sign_test_p(pos, neg)
    return Measurement(mean, r.n_dev, "dev examples", unit="points",
                       detail=f"{r.task}: mean Δ over {r.head_delta[0].size} heads x {len(r.seeds)} seed(s) {mean:+.3f} "
                              f"(one example = {r.step:.2f}); {pos} up, {neg} down (sign test p {p:.3g})")


@metric("disable_layer_delta")
def disable_layer_delta(pr, layer: int = 1, tasks: list | None = None) -> Measurement:
    """Δ with every head of layer ``layer`` (1-based) disabled, mean over seeds."""
    r = result_of(pr, tasks)
    if layer > r.n_layers:
        raise NotApplicable(f"the model has {r.n_layers} layers")
    d = r.layer_delta[:, layer - 1]
    p = r.layer_p[:, layer - 1]
    ptxt = "" if np.isnan(p).all() else f"; McNemar p {', '.join(f'{x:.3g}' for x in p)}"
    return Measurement(float(d.mean()), r.n_dev, "dev examples", unit="points",
                       detail=f"{r.task}: layer {layer} disabled: {', '.join(f'{x:+.2f}' for x in d)} per seed "
                              f"(one example = {r.step:.2f}){ptxt}; all layers: "
                              + " ".join(f"L{i + 1} {x:+.2f}" for i, x in enumerate(r.layer_delta.mean(0))))

def _most_harmful(res: DisableResult, top: int) -> list[str]:
    """The ``top`` heads whose disabling costs most (most negative Δ, mean over seeds; ties by head order)."""
    d = res.head_delta.mean(0).reshape(-1)
    return [head_name(*divmod(int(i), res.n_heads)) for i in np.argsort(d, kind="stable")[:top]]


@metric("disable_shared_harmful_heads")
def disable_shared_harmful_heads(pr, passes: list, top: int = 5) -> Measurement:
    """Kovaleva §5: STS-B and RTE rely on the same heads. This task's ``top`` most harmful heads to disable (most
    negative Δ, mean over seeds) shared with the first other task's (``passes[0]``), minus the most that either of
    the two shares with a control task's ``top`` (``passes[1:]``): heads critical to the base model are harmful to
    disable on any task, so they make any two tasks share heads without task-specific reliance. Positive: the two
    tasks share more heads with each other than either does with any control task. Without a control pass the
    value is not measured (NotApplicable)."""
    r = result_of(pr)
    if not passes:
        raise NotApplicable("needs the other task's sweep")
    other, controls = passes[0].result, [p.result for p in passes[1:]]
    if not controls:
        raise NotApplicable("needs a control task's sweep (heads harmful on every task are no shared reliance)")
    a, b = _most_harmful(r, top), _most_harmful(other, top)
    shared = [h for h in a if h in b]
    ctrl = {c.task: _most_harmful(c, top) for c in controls}
    with_ctrl = {f"{t1}&{c}": len(set(h1) & set(hc)) for c, hc in ctrl.items()
                 for t1, h1 in ((r.task, a), (other.task, b))}
    worst = max(with_ctrl, key=with_ctrl.get)
    specific = [h for h in shared if not any(h in hc for hc in ctrl.values())]
    chance = top * top / (r.n_layers * r.n_heads)
    return Measurement(len(shared) - with_ctrl[worst], min(r.n_dev, other.n_dev), "dev examples (smaller set)",
                       unit=f"heads of top {top} (pair minus its largest control overlap)",
                       values={"shared": len(shared), "control_overlaps": with_ctrl, "specific": specific},
                       detail=f"most harmful on {r.task}: {', '.join(a)}; on {other.task}: {', '.join(b)}; shared: "
                              f"{len(shared)} ({', '.join(shared) or 'none'}; chance {chance:.2f}); with the controls "
                              + ", ".join(f"{k} {v}" for k, v in with_ctrl.items())
                              + f"; control top-{top}: "
                              + "; ".join(f"{c} {', '.join(h)}" for c, h in ctrl.items())
                              + f"; shared and in no control's top {top}: {', '.join(specific) or 'none'}")
