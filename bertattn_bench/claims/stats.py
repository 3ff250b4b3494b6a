"""The one statistics layer: every standard error, test and noise bar a claim uses is defined here, once.

Units are stated per function: a *proportion* is in [0, 1]; *points* are percent (accuracy 87.5 means 87.5 %).
Each function is tested by hand in ``tests/test_stats.py`` (known answers computed on paper).

* :func:`binomial_se` / :func:`binomial_se_points` — an accuracy over n independent items;
* :func:`difference_se` — a sum/difference of independent accuracies (points);
* :func:`wilson_bounds` / :func:`proportion_difference_bounds` — two-sided bounds (points) on one accuracy (Wilson's
  score interval) and on the difference of two (Agresti & Caffo's), never of width 0 at 0 or n of n right;
* :func:`wilson_counts` — how many items are surely / possibly at least (or at most) a threshold by Wilson's bounds;
* :func:`paired_difference_se` — the difference of two accuracies on the *same* items, from the discordant counts;
* :func:`paired_se` — the same for per-item scores in [0, 1] (correctness averaged over seeds);
* :func:`mcnemar_exact` — the exact two-sided McNemar test of paired correctness;
* :func:`one_sided_t_p` — Student's t (one-sided p) of a mean difference from its sd over n paired units;
* :func:`mann_whitney_null_se` — the SE of a ROC AUC under the null (no separation) for n1 positives, n2 negatives;
* :func:`bootstrap_sd` — the sd of a statistic over seeded resamples of n units (with replacement);
  :func:`bootstrap_bounds` — the percentile bounds of a discrete statistic over the same resamples;
* :func:`permutation_p` — the one-sided permutation p-value (1 + #{null <= observed}) / (1 + n);
* :func:`rank_correlation` — Spearman's rho (and Pearson's r where asked) of two vectors;
* :func:`noise_bar` — the bar a gain or drop must clear: max(one example's step, the seed sd);
* :func:`seed_half_width` — the interval a one-seed value carries from the sd of that value over k seeds (Student's t
  with k - 1 degrees of freedom); :func:`combined_half_width` adds it to the data sample's half-width;
* :func:`binomial_above_p` — the exact one-sided binomial p of ``k`` of ``n`` right against a rate (a model vs
  its majority class: the learned-model guard, :mod:`bertattn_bench.claims.learned`);
* :func:`correlation_above_zero_p` — Pearson's r and its one-sided p against r <= 0 (the guard on regression);
* :func:`tost` / :func:`tost_paired` — two one-sided tests (equivalence within ± a margin) of a difference / of a
  paired accuracy difference from its discordant counts, with the z a Bonferroni family of ``tests`` needs (an
  absence judged by equivalence, not by a failure to reject); :func:`paired_counts_se` its floored SE;
* :func:`paired_gain_bounds` — exact one-sided bounds on a paired accuracy gain from its discordant counts;
  :func:`overlapping_correlation_bounds` — the same for a gain in Pearson's r on the same items (Steiger 1980).
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

# ---- accuracies ------------------------------------------------------------------------------------------------


def binomial_se(p: float, n: int) -> float:
    """Standard error (a proportion) of an accuracy ``p`` (a proportion, clipped to [0, 1]) over ``n`` items."""
    p = min(max(float(p), 0.0), 1.0)
    return math.sqrt(p * (1.0 - p) / max(int(n), 1))


def binomial_se_points(percent: float, n: int) -> float:
    """:func:`binomial_se` in points: the SE of an accuracy of ``percent`` % over ``n`` items."""
    return 100.0 * binomial_se(float(percent) / 100.0, n)


def difference_se(*terms: tuple[float, int]) -> float:
    """Standard error (points) of a sum/difference of accuracies ``(percent, n)``, taken as independent. For
    accuracies on the same items (a head and a baseline on the same anaphors) they are positively correlated, so
    this errs wide; :func:`paired_difference_se` is the paired one."""
    return math.sqrt(sum(binomial_se_points(p, n) ** 2 for p, n in terms))


def wilson_bounds(right: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson's score interval (points) of an accuracy of ``right`` of ``n`` items: a real interval at 0 or n of n
    (where the Wald interval p ± z SE has width 0). No item: (0, 100)."""
    n = int(n)
    if n <= 0:
        return 0.0, 100.0
    p = min(max(right / n, 0.0), 1.0)
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return 100.0 * max(centre - half, 0.0), 100.0 * min(centre + half, 1.0)


def wilson_counts(rights, n: int, threshold: float, at_least: bool = True, z: float = 1.96) -> tuple[int, int]:
    """How many items (each ``right`` of the same ``n``) are surely and possibly on one side of ``threshold``
    (points) by :func:`wilson_bounds`: ``at_least``, lower bound >= threshold (surely) and upper bound (possibly);
    else at most it, upper bound <= threshold (surely) and lower bound (possibly). Possibly counts the sure ones."""
    edges = [wilson_bounds(int(k), n, z) for k in rights]
    if at_least:
        return sum(lo >= threshold for lo, _ in edges), sum(hi >= threshold for _, hi in edges)
    return sum(hi <= threshold for _, hi in edges), sum(lo <= threshold for lo, _ in edges)

def proportion_difference_bounds(right1: int, n1: int, right2: int, n2: int, z: float = 1.96) -> tuple[float, float]:
    """Two-sided bounds (points) on acc1 − acc2, two accuracies (``right_i`` of ``n_i``) taken as independent, by
    Agresti & Caffo (2000): one right and one wrong item added to each, then the difference ± z SE. A tie (0 of 2
    against 0 of 2, or n of n against n of n) gives an interval around 0, never one of width 0. For accuracies on the
    same items (positively correlated) it errs wide. Elementwise over arrays (numpy broadcasting)."""
    m1, m2 = np.asarray(n1, float) + 2, np.asarray(n2, float) + 2
    p1, p2 = (np.asarray(right1, float) + 1) / m1, (np.asarray(right2, float) + 1) / m2
    se = np.sqrt(p1 * (1 - p1) / m1 + p2 * (1 - p2) / m2)
    lo, hi = 100.0 * (p1 - p2 - z * se), 100.0 * (p1 - p2 + z * se)
    return (float(lo), float(hi)) if lo.ndim == 0 else (lo, hi)


def binomial_above_p(k: int, n: int, rate: float) -> float:
    """Exact one-sided binomial p: P(X >= ``k``) for X ~ Bin(``n``, ``rate``) (``rate`` a proportion). 1 when
    ``n`` is 0; 0 < p <= 1 otherwise (a rate of 1 can never be beaten: p = 1)."""
    from scipy.stats import binomtest

    if n <= 0:
        return 1.0
    rate = min(max(float(rate), 0.0), 1.0)
    if rate >= 1.0:
        return 1.0
    return float(binomtest(int(k), int(n), rate, alternative="greater").pvalue)


def correlation_above_zero_p(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """(Pearson's r, one-sided p against r <= 0); (0, 1) where either side is constant (a constant predictor)."""
    from scipy.stats import pearsonr

    a, b = np.asarray(a, float).reshape(-1), np.asarray(b, float).reshape(-1)
    if a.size < 3 or np.std(a) == 0 or np.std(b) == 0:
        return 0.0, 1.0
    res = pearsonr(a, b, alternative="greater")
    return float(res[0]), float(res[1])


def pearson_se(r: float, n: int) -> float:
    """Large-sample standard error of Pearson's r over n pairs: (1 - r²) / √(n - 3), the delta method on Fisher's
    z (whose SE is 1 / √(n - 3)); NaN for n <= 3."""
    return float((1.0 - r * r) / math.sqrt(n - 3)) if n > 3 else float("nan")


def paired_difference_se(b: float, c: float, n: int) -> float:
    """Standard error (points) of acc_A − acc_B on the same ``n`` items, from the discordant counts ``b`` (A right,
    B wrong) and ``c`` (the reverse): sqrt(((b + c) − (b − c)² / n) / n²) × 100."""
    n = max(int(n), 1)
    return 100.0 * math.sqrt(max((b + c) - (b - c) ** 2 / n, 0.0)) / n


def paired_se(a, b) -> float:
    """Standard error (points) of mean(a) − mean(b) over the same n items, ``a`` and ``b`` per-item scores in [0, 1]
    (correctness, or its mean over seeds): 100 × sd(a − b) / √n (ddof 0; for 0/1 items this is
    :func:`paired_difference_se` of the discordant counts). NaN for no items."""
    d = np.asarray(a, float).reshape(-1) - np.asarray(b, float).reshape(-1)
    return float(100.0 * np.std(d) / math.sqrt(d.size)) if d.size else float("nan")


def sign_test_p(plus: int, minus: int) -> float:
    """Two-sided exact sign test: P of a split at least as uneven as ``plus`` : ``minus`` under p = 1/2 (ties
    dropped before calling); 1 when there is nothing to test."""
    from scipy.stats import binomtest

    if plus + minus == 0:
        return 1.0
    return float(binomtest(int(plus), int(plus + minus), 0.5).pvalue)


def mean_se(x) -> float:
    """Standard error of a mean over independent units: sd (ddof 1) / sqrt(n); NaN for fewer than 2 units."""
    x = np.asarray(x, float).reshape(-1)
    return float(np.std(x, ddof=1) / math.sqrt(x.size)) if x.size > 1 else float("nan")


def mcnemar_exact(base_correct: np.ndarray, other_correct: np.ndarray) -> tuple[float, int, int]:
    """Two-sided exact McNemar p on paired boolean correctness; returns (p, #lost, #gained) of ``other`` against
    ``base`` (lost: right in base, wrong in other)."""
    base_correct, other_correct = np.asarray(base_correct, bool), np.asarray(other_correct, bool)
    if base_correct.shape != other_correct.shape:
        raise ValueError(f"mcnemar_exact: paired arrays differ in shape {base_correct.shape} vs {other_correct.shape}")
    lost = int((base_correct & ~other_correct).sum())
    gained = int((~base_correct & other_correct).sum())
    return sign_test_p(gained, lost), lost, gained


def length_matched_difference(x1, len1, x2, len2) -> tuple[float, float, int, int, int]:
    """Mean of ``x1`` minus mean of ``x2`` on length-matched units: the units are grouped by exact length (``len1``,
    ``len2``: e.g. input tokens), only lengths present in both groups count, and the per-length differences of
    means are averaged with weights n1·n2/(n1+n2) (the Cochran–Mantel–Haenszel weights, precision-like: a length
    with many units on both sides counts most). A score that depends on length alone (same at equal length) gives
    exactly 0 whatever the two length distributions. SE: from each group's pooled within-length variance (units of
    one length of one group are exchangeable), 0 when every matched unit of a length is identical, NaN when no
    length has two units of a group. Returns (difference, SE, matched units of group 1, of group 2, lengths
    matched); (NaN, NaN, 0, 0, 0) when no length is shared."""
    x1, x2 = np.asarray(x1, float).reshape(-1), np.asarray(x2, float).reshape(-1)
    l1, l2 = np.asarray(len1).reshape(-1), np.asarray(len2).reshape(-1)
    shared = np.intersect1d(l1, l2)
    if shared.size == 0:
        return float("nan"), float("nan"), 0, 0, 0
    num = wsum = 0.0
    ss, df = [0.0, 0.0], [0, 0]
    terms = []
    for length in shared:
        a, b = x1[l1 == length], x2[l2 == length]
        w = a.size * b.size / (a.size + b.size)
        num += w * (a.mean() - b.mean())
        wsum += w
        terms.append((w, a.size, b.size))
        for g, v in enumerate((a, b)):
            ss[g] += float(((v - v.mean()) ** 2).sum())
            df[g] += v.size - 1
    var = [ss[g] / df[g] if df[g] > 0 else float("nan") for g in (0, 1)]
    se = math.sqrt(sum(w * w * (var[0] / n1 + var[1] / n2) for w, n1, n2 in terms)) / wsum
    n1 = int(np.isin(l1, shared).sum())
    n2 = int(np.isin(l2, shared).sum())
    return float(num / wsum), float(se), n1, n2, int(shared.size)


def one_sided_z(alpha: float, tests: int = 1) -> float:
    """The standard normal quantile a one-sided test at ``alpha`` needs, Bonferroni over ``tests``: z_(1 - alpha/m)."""
    from scipy.stats import norm

    return float(norm.isf(float(alpha) / max(int(tests), 1)))


def tost(delta: float, se: float, margin: float, alpha: float = 0.05, tests: int = 1) -> dict:
    """Two one-sided tests (TOST) of a difference ``delta`` with standard error ``se`` (same units, e.g. points)
    against ± ``margin``, each one-sided at ``alpha`` / ``tests`` (Bonferroni), normal approximation.

    Returns ``delta``, ``se``, ``z`` (the critical z), ``p_lower`` (H0: Δ <= −margin; small = no drop beyond the
    margin: non-inferiority), ``p_upper`` (H0: Δ >= +margin), ``p`` (TOST: max of the two; small = equivalent) and
    ``lower``: "within" (Δ − z·SE > −margin: no drop beyond the margin, shown), "beyond" (Δ + z·SE < −margin: a
    drop significantly larger than the margin) or "undecided"."""
    from scipy.stats import norm

    delta, se = float(delta), float(se)
    z = one_sided_z(alpha, tests)
    if se > 0:
        p_lower, p_upper = float(norm.sf((delta + margin) / se)), float(norm.sf((margin - delta) / se))
    else:
        p_lower, p_upper = float(delta <= -margin), float(delta >= margin)
    lower = "within" if delta - z * se > -margin else ("beyond" if delta + z * se < -margin else "undecided")
    return {"delta": delta, "se": se, "z": z, "p_lower": p_lower, "p_upper": p_upper, "p": max(p_lower, p_upper),
            "lower": lower}


def paired_counts_se(lost: int, gained: int, n: int) -> float:
    """:func:`paired_difference_se` floored at one discordant pair's (≈ one example's step, 100/n): with no
    discordant item the estimate would be 0, but n items cannot resolve a difference finer than one of them."""
    return max(paired_difference_se(gained, lost, n), paired_difference_se(1, 0, n))


def tost_paired(lost: int, gained: int, n: int, margin: float, alpha: float = 0.05, tests: int = 1) -> dict:
    """:func:`tost` of a paired accuracy difference Δ = acc_B − acc_A (points) on the same ``n`` items, from the
    discordant counts ``lost`` (A right, B wrong) and ``gained`` (the reverse); SE :func:`paired_counts_se`."""
    n = max(int(n), 1)
    return tost(100.0 * (int(gained) - int(lost)) / n, paired_counts_se(lost, gained, n), margin, alpha, tests)


# ---- means, ranks, AUCs ------------------------------------------------------------------------------------------


def one_sided_t_p(mean, sd, n: int):
    """Student's t test that a mean paired difference is > 0, elementwise over arrays (e.g. one per head): returns
    (SE, t, one-sided p) from the difference's ``sd`` over ``n`` paired units (n − 1 degrees of freedom). Where the
    sd is 0, t is +inf for a positive mean and 0 otherwise (p 0 or 0.5)."""
    from scipy.stats import t as student_t

    mean, sd = np.asarray(mean, float), np.asarray(sd, float)
    if n < 2:
        nan = np.full(np.broadcast(mean, sd).shape, np.nan)
        return nan, nan, nan
    se = sd / math.sqrt(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        tstat = np.where(se > 0, mean / se, np.where(mean > 0, np.inf, 0.0))
    return se, tstat, student_t.sf(tstat, n - 1)


def mann_whitney_null_se(n_pos: int, n_neg: int) -> float:
    """SE (a proportion) of a ROC AUC under the null of no separation: sqrt((n1 + n2 + 1) / (12 n1 n2))."""
    if n_pos < 1 or n_neg < 1:
        return float("nan")
    return math.sqrt((n_pos + n_neg + 1) / (12.0 * n_pos * n_neg))


def rank_correlation(a: Sequence[float], b: Sequence[float], method: str = "spearman") -> tuple[float, float]:
    """(coefficient, two-sided p) of Spearman's rho (default) or Pearson's r; NaN where either side is constant."""
    from scipy.stats import pearsonr, spearmanr

    a, b = np.asarray(a, float).reshape(-1), np.asarray(b, float).reshape(-1)
    if a.shape != b.shape:
        raise ValueError(f"rank_correlation: vectors of {a.size} and {b.size} values")
    if a.size < 2 or np.std(a) == 0 or np.std(b) == 0:
        return float("nan"), float("nan")
    fn = {"spearman": spearmanr, "pearson": pearsonr}[method]
    r, p = fn(a, b)
    return float(r), float(p)


# ---- resampling --------------------------------------------------------------------------------------------------


def _resampled(statistic: Callable[[np.ndarray], float], n: int, samples: int, seed: int,
               skip: tuple[type[BaseException], ...]) -> list[float]:
    """``statistic(indices)`` over ``samples`` resamples of ``n`` units with replacement
    (``numpy.random.default_rng(seed)``); a resample whose statistic raises one of ``skip`` or is not finite is
    dropped."""
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(samples):
        idx = rng.integers(0, n, n)
        try:
            v = float(statistic(idx))
        except skip:
            continue
        if np.isfinite(v):
            values.append(v)
    return values


def bootstrap_sd(statistic: Callable[[np.ndarray], float], n: int, samples: int = 200, seed: int = 0,
                 min_valid: int | None = None, skip: tuple[type[BaseException], ...] = ()) -> tuple[float, int]:
    """The sd (ddof 1) of ``statistic(indices)`` over ``samples`` resamples of ``n`` units with replacement
    (``numpy.random.default_rng(seed)``); a resample whose statistic raises one of ``skip`` or is not finite is
    dropped. Returns (sd, resamples kept); the sd is NaN when fewer than ``min_valid`` (default half) are kept."""
    values = _resampled(statistic, n, samples, seed, skip)
    need = samples // 2 if min_valid is None else min_valid
    if len(values) < max(need, 2):
        return float("nan"), len(values)
    return float(np.std(values, ddof=1)), len(values)


def bootstrap_bounds(statistic: Callable[[np.ndarray], float], n: int, samples: int = 200, seed: int = 0,
                     level: float = 0.95, skip: tuple[type[BaseException], ...] = ()) -> tuple[float, float, int]:
    """Percentile bounds (the central ``level`` of the resampled values) of ``statistic(indices)`` over the same
    resamples as :func:`bootstrap_sd`: for a discrete value (a count or share of heads or layers, the depth of a peak
    layer) whose resamples are lopsided, where value ± z sd would reach values it cannot take. NaN bounds when fewer
    than half are kept. Returns (lo, hi, resamples kept)."""
    values = _resampled(statistic, n, samples, seed, skip)
    if len(values) < max(samples // 2, 2):
        return float("nan"), float("nan"), len(values)
    tail = 100 * (1 - level) / 2
    lo, hi = np.percentile(values, [tail, 100 - tail])
    return float(lo), float(hi), len(values)


def jackknife_se(statistic: Callable[[np.ndarray], float], n: int, groups: int = 20) -> tuple[float, int]:
    """Delete-a-group jackknife standard error of ``statistic(kept unit indices)`` over ``n`` units (segments) split
    into ``groups`` consecutive groups: sqrt((G - 1) / G x sum of (theta_-g - mean)^2) (Efron & Tibshirani 1993,
    §11.5). For a statistic too costly to bootstrap (a rank correlation over every token occurrence), the units its
    observations cluster in. Returns (SE, G); NaN for fewer than 2 groups or a statistic that is NaN on some group's
    complement."""
    g = min(int(groups), int(n))
    if g < 2:
        return float("nan"), g
    edges = np.linspace(0, n, g + 1).round().astype(int)
    units = np.arange(n)
    theta = np.array([statistic(np.concatenate([units[:edges[i]], units[edges[i + 1]:]])) for i in range(g)], float)
    if not np.all(np.isfinite(theta)):
        return float("nan"), g
    return float(np.sqrt((g - 1) / g * np.sum((theta - theta.mean()) ** 2))), g


def permutation_p(observed: float, null: np.ndarray, smaller_is_extreme: bool = True) -> float:
    """One-sided permutation p-value with the observed statistic counted once: (1 + #{null at least as extreme})
    / (1 + len(null)); "extreme" is <= observed (default) or >= observed."""
    null = np.asarray(null, float)
    hits = (null <= observed) if smaller_is_extreme else (null >= observed)
    return (1 + int(hits.sum())) / (1 + null.size)


# ---- seed noise ------------------------------------------------------------------------------------------------


def noise_bar(step: float, seeds: Sequence[int], measured_sd: float, task: str,
              recorded_sd: dict | None) -> tuple[float, float, str]:
    """The bar a gain or drop of a trained score must clear: max(one example's ``step``, the seed sd), the sd
    measured here when >= 2 seeds ran, else the one recorded for ``task`` in the claim file (the full tier's).
    Returns (bar, sd, where the sd comes from); sd NaN (bar = step) when neither exists."""
    step = 0.0 if step is None or np.isnan(step) else float(step)
    if len(seeds) > 1:
        sd, where = float(measured_sd), f"sd over seeds {list(seeds)} measured here"
    elif recorded_sd and task in recorded_sd:
        sd, where = float(recorded_sd[task]), "sd over seeds recorded from the full tier (claim file)"
    else:
        sd, where = float("nan"), "seed spread not measured for this task"
    return max(step, 0.0 if np.isnan(sd) else sd), sd, where


def seed_half_width(sd: float, k: int, z: float = 1.96) -> float:
    """Half-width of the interval a single run's value carries for the seed it was trained with, from the sd (ddof 1)
    of the same value over ``k`` >= 2 seeds measured on the same data: Student's t with k - 1 degrees of freedom at
    the two-sided level ``z`` stands for (1.96: 95%) times the sd. The t, not z: three seeds estimate an sd poorly, and
    the interval must hold for seeds it was not measured on (t(2) = 4.30 for k = 3, t(4) = 2.78 for k = 5)."""
    from scipy import stats as st

    if k < 2 or not math.isfinite(sd):
        return float("nan")
    level = 1 - 2 * (1 - st.norm.cdf(z))  # the two-sided coverage z stands for (0.95 for 1.96)
    return float(st.t.ppf(0.5 + level / 2, k - 1)) * float(sd)


def combined_half_width(data_half: float | None, seed_half: float) -> float:
    """One interval's half-width from two independent sources of randomness (the data sample's and the seed's):
    their root sum of squares."""
    return float(math.hypot(data_half or 0.0, seed_half))


# ---- paired gains (a configuration against the undisabled model on the same items) ------------------------------


def paired_gain_bounds(gained, lost, n: int, alpha_lower: float, alpha_upper: float):
    """One-sided confidence bounds (points) on the gain of configuration B over A on the same ``n`` items, from
    the discordant counts (``gained``: wrong in A, right in B; ``lost``: the reverse), elementwise over arrays.

    Conditional on the d = gained + lost discordant items (the exact McNemar argument), gained ~ Bin(d, pi) and the
    gain is (2 pi - 1) d / n x 100; pi's exact Clopper-Pearson bounds give (lower at level ``alpha_lower``, upper
    at level ``alpha_upper``), each one-sided. d = 0 gives [0, 0] (nothing changed on these items). The lower
    bound is > 0 exactly when the one-sided exact sign test P(X >= gained | d, 1/2) is < ``alpha_lower``."""
    from scipy.stats import beta

    g, lo_ = np.asarray(gained, float), np.asarray(lost, float)
    d = g + lo_
    with np.errstate(invalid="ignore", divide="ignore"):
        p_lo = np.where(g > 0, beta.ppf(alpha_lower, np.maximum(g, 1e-12), lo_ + 1), 0.0)
        p_hi = np.where(lo_ > 0, beta.ppf(1 - alpha_upper, g + 1, np.maximum(lo_, 1e-12)), 1.0)
    scale = 100.0 * d / max(int(n), 1)
    lower = np.where(d > 0, (2 * p_lo - 1) * scale, 0.0)
    upper = np.where(d > 0, (2 * p_hi - 1) * scale, 0.0)
    return lower, upper



def overlapping_correlation_bounds(r_yb, r_ya, r_ab, n: int, alpha_lower: float, alpha_upper: float):
    """One-sided confidence bounds on r(y, b) − r(y, a), two correlations with a common variable y measured on the
    same ``n`` items (overlapping, dependent: a configuration's predictions b against the undisabled model's a on
    one dev set), elementwise, by the normal approximation with the two estimates' asymptotic covariance (Pearson &
    Filon 1898; Steiger 1980, Psychological Bulletin 87:245, eq. 3):

        ψ = r_ab (1 − r_yb² − r_ya²) − r_yb r_ya (1 − r_yb² − r_ya² − r_ab²) / 2
        var(r_yb − r_ya) = ((1 − r_yb²)² + (1 − r_ya²)² − 2 ψ) / n
        lower = Δ − z_(alpha_lower) sd,   upper = Δ + z_(alpha_upper) sd

    The more alike a and b (r_ab → 1), the tighter the bounds: identical predictions give [0, 0], the paired
    analogue of no discordant item. In correlation units (x 100 for points). (Zou's 2007 interval for the same case
    is asymmetric and keeps a width of Fisher-z skew, ~0.1 points at n = 1500, where nothing changed: no margin that
    small could ever be shown.)"""
    from scipy.stats import norm

    b, a, ab = (np.asarray(x, float) for x in (r_yb, r_ya, r_ab))
    psi = ab * (1 - b ** 2 - a ** 2) - b * a * (1 - b ** 2 - a ** 2 - ab ** 2) / 2
    sd = np.sqrt(np.maximum((1 - b ** 2) ** 2 + (1 - a ** 2) ** 2 - 2 * psi, 0.0) / max(int(n), 1))
    delta = b - a
    return delta - norm.isf(alpha_lower) * sd, delta + norm.isf(alpha_upper) * sd
