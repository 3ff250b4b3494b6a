"""The statistics layer (bertattn_bench/claims/stats.py), each function against a value computed by hand."""
import math

import numpy as np
import pytest

from bertattn_bench.claims import stats


def test_binomial_se_units():
    assert stats.binomial_se(0.5, 100) == pytest.approx(0.05)           # sqrt(.25/100)
    assert stats.binomial_se(0.9, 400) == pytest.approx(0.015)          # sqrt(.09/400)
    assert stats.binomial_se_points(90.0, 400) == pytest.approx(1.5)    # the same in points
    assert stats.binomial_se(1.2, 10) == 0.0 and stats.binomial_se(-0.1, 10) == 0.0  # clipped to [0, 1]


def test_difference_se_adds_variances():
    assert stats.difference_se((50.0, 100), (90.0, 400)) == pytest.approx(math.sqrt(25 + 2.25))


def test_paired_difference_se_from_discordant_counts():
    # 6 items; A right/B wrong on 2, the reverse on 0: sqrt((2 - 4/6) / 36) * 100
    assert stats.paired_difference_se(2, 0, 6) == pytest.approx(100 * math.sqrt(2 - 4 / 6) / 6)
    assert stats.paired_difference_se(3, 3, 10) == pytest.approx(100 * math.sqrt(6) / 10)
    assert stats.paired_difference_se(0, 0, 10) == 0.0


def test_mcnemar_exact_by_hand():
    base = np.array([1, 1, 1, 1, 0, 0, 1, 0], bool)
    other = np.array([0, 0, 0, 1, 0, 1, 1, 0], bool)  # lost 3 (items 0-2), gained 1 (item 5)
    p, lost, gained = stats.mcnemar_exact(base, other)
    assert (lost, gained) == (3, 1)
    assert p == pytest.approx(2 * (1 + 4) / 16)  # two-sided binomial: 2 * P(X <= 1 | 4, 1/2) = 0.625
    assert stats.mcnemar_exact(base, base) == (1.0, 0, 0)
    with pytest.raises(ValueError, match="shape"):
        stats.mcnemar_exact(base, other[:4])


def test_one_sided_t_p_by_hand():
    se, t, p = stats.one_sided_t_p(np.array([1.0, -1.0, 2.0, 0.0]), np.array([2.0, 2.0, 0.0, 0.0]), 16)
    assert se.tolist() == [0.5, 0.5, 0.0, 0.0]
    assert t.tolist() == [2.0, -2.0, math.inf, 0.0]
    from scipy.stats import t as student_t
    assert p[0] == pytest.approx(student_t.sf(2.0, 15)) and p[1] == pytest.approx(1 - student_t.sf(2.0, 15))
    assert p[2] == 0.0 and p[3] == pytest.approx(0.5)


def test_mann_whitney_null_se():
    assert stats.mann_whitney_null_se(10, 20) == pytest.approx(math.sqrt(31 / 2400))
    assert math.isnan(stats.mann_whitney_null_se(0, 5))


def test_rank_correlation():
    r, _ = stats.rank_correlation([1, 2, 3, 4], [10, 20, 30, 1000])
    assert r == pytest.approx(1.0)                 # monotone: Spearman 1
    r, _ = stats.rank_correlation([1, 2, 3, 4], [10, 20, 30, 1000], "pearson")
    assert r < 0.9                                  # not linear
    assert math.isnan(stats.rank_correlation([1, 1, 1], [1, 2, 3])[0])


def test_bootstrap_sd_of_a_mean_matches_theory():
    x = np.arange(100, dtype=float)
    sd, kept = stats.bootstrap_sd(lambda idx: x[idx].mean(), len(x), samples=2000, seed=0)
    assert kept == 2000
    assert sd == pytest.approx(x.std() / math.sqrt(len(x)), rel=0.08)  # SE of a mean, 2.89
    # a statistic that fails on some resamples: those are skipped, and too few kept gives NaN
    sd, kept = stats.bootstrap_sd(lambda idx: 1 / 0, 10, samples=20, skip=(ZeroDivisionError,))
    assert kept == 0 and math.isnan(sd)


def test_permutation_p_counts_observed_once():
    null = np.array([0.5, 0.9, 1.0, 1.1, 1.2])
    assert stats.permutation_p(0.8, null) == pytest.approx(2 / 6)
    assert stats.permutation_p(1.15, null, smaller_is_extreme=False) == pytest.approx(2 / 6)


def test_noise_bar_prefers_measured_then_recorded_sd():
    assert stats.noise_bar(0.5, [0, 1], 2.0, "mrpc", {"mrpc": 9.0})[:2] == (2.0, 2.0)       # measured here
    bar, sd, where = stats.noise_bar(0.5, [0], float("nan"), "mrpc", {"mrpc": 1.5})
    assert (bar, sd) == (1.5, 1.5) and "claim file" in where                                # recorded
    bar, sd, _ = stats.noise_bar(0.5, [0], float("nan"), "rte", {"mrpc": 1.5})
    assert bar == 0.5 and math.isnan(sd)                                                   # one example's step
    assert stats.noise_bar(3.0, [0, 1], 2.0, "mrpc", None)[0] == 3.0                       # step larger than sd


def test_sign_test_and_mean_se_by_hand():
    assert stats.sign_test_p(3, 1) == pytest.approx(0.625)  # 2 * (1 + 4) / 16
    assert stats.sign_test_p(0, 0) == 1.0
    assert stats.mean_se([1.0, 3.0]) == pytest.approx(math.sqrt(2) / math.sqrt(2))  # sd 1.414, n 2
    assert math.isnan(stats.mean_se([1.0]))



def test_overlapping_correlation_bounds_by_hand():
    # r(y,b) = .8, r(y,a) = .7, r(a,b) = .9, n = 100: psi = .9 (1 - .64 - .49) - .28 (1 - .64 - .49 - .81) = .1462,
    # var = (.36^2 + .51^2 - 2 x .1462) / 100 = .0009730, sd = .031193; z_.025 = 1.959964
    lo, hi = stats.overlapping_correlation_bounds(0.8, 0.7, 0.9, 100, 0.025, 0.025)
    assert float(lo) == pytest.approx(0.1 - 1.959964 * 0.031193, abs=1e-5)
    assert float(hi) == pytest.approx(0.1 + 1.959964 * 0.031193, abs=1e-5)

def _trivariate(r_yb, r_ya, r_ab, n, sims, seed=0):
    """``sims`` samples of n items of (y, b, a) with the given population correlations: the sample r's."""
    cov = np.array([[1, r_yb, r_ya], [r_yb, 1, r_ab], [r_ya, r_ab, 1]])
    x = np.random.default_rng(seed).multivariate_normal(np.zeros(3), cov, size=(sims, n))
    x = (x - x.mean(1, keepdims=True)) / x.std(1, keepdims=True)
    r = lambda i, j: (x[..., i] * x[..., j]).mean(1)  # noqa: E731
    return r(0, 1), r(0, 2), r(1, 2)


def test_overlapping_correlation_bounds_cover_at_their_level():
    # population r(y, b) = .8, r(y, a) = .7, r(a, b) = .9: Δ = .1. Each one-sided 97.5% bound misses about 2.5% of
    # the time; with psi = 0 (the correlations treated as independent) the bounds are ~3x too wide and miss ~0.1%.
    yb, ya, ab = _trivariate(0.8, 0.7, 0.9, n=200, sims=4000)
    lo, hi = stats.overlapping_correlation_bounds(yb, ya, ab, 200, 0.025, 0.025)
    assert 0.012 < float(np.mean(lo > 0.1)) < 0.045
    assert 0.012 < float(np.mean(hi < 0.1)) < 0.045
    # the estimates' correlation that the bounds use (psi / ((1 - r_yb^2)(1 - r_ya^2))) is the one seen over samples
    b, a, r_ab = 0.8, 0.7, 0.9
    c = ((r_ab - b * a / 2) * (1 - b * b - a * a - r_ab * r_ab) + r_ab ** 3) / ((1 - b * b) * (1 - a * a))
    assert float(np.corrcoef(yb, ya)[0, 1]) == pytest.approx(c, abs=0.04)


def test_overlapping_correlation_bounds_tighten_with_the_pairing():
    # identical predictions: nothing changed, the bounds close on 0; unrelated ones: as wide as two Fisher bounds
    lo, hi = stats.overlapping_correlation_bounds(0.8, 0.8, 1.0, 1500, 0.025, 0.025)
    assert float(lo) == 0.0 and float(hi) == 0.0
    lo0, hi0 = stats.overlapping_correlation_bounds(0.8, 0.8, 0.95, 1500, 0.025, 0.025)
    lo1, hi1 = stats.overlapping_correlation_bounds(0.8, 0.8, 0.5, 1500, 0.025, 0.025)
    assert float(lo1) < float(lo0) < 0 < float(hi0) < float(hi1)
    # a gain of .05 on 1500 items with r(a, b) = .5 is significant; the same on 100 items is not, unless more alike
    assert float(stats.overlapping_correlation_bounds(0.85, 0.8, 0.5, 1500, 0.025, 0.025)[0]) > 0
    assert float(stats.overlapping_correlation_bounds(0.85, 0.8, 0.95, 100, 0.025, 0.025)[0]) > 0
    assert float(stats.overlapping_correlation_bounds(0.85, 0.8, 0.5, 100, 0.025, 0.025)[0]) < 0


def test_wilson_counts_by_hand():
    """0, 5 and 10 right of 10: Wilson's 95% bounds by hand (z = 1.96, z^2/n = 0.38416): 5 of 10 centre 0.5, half
    1.96 sqrt(0.025 + 0.009604) / 1.38416 = 0.2634 -> [23.66, 76.34]; 0 of 10 centre = half = 0.19208 / 1.38416 =
    0.1388 -> [0, 27.75]; 10 of 10 -> [72.25, 100]. At least 50: surely 1 (only 10/10's lower bound), possibly 2
    (5/10's upper bound 76.3 too); at least 25: surely 1 (5/10's lower bound 23.7 is short), possibly 3 (0/10's upper
    bound 27.8 reaches it); at most 25: surely 0, possibly 2 (0/10 and 5/10 by their lower bounds); at most 30: surely
    1 (0/10's upper bound 27.8)."""
    assert stats.wilson_counts([0, 5, 10], 10, 50.0) == (1, 2)
    assert stats.wilson_counts([0, 5, 10], 10, 25.0) == (1, 3)
    assert stats.wilson_counts([0, 5, 10], 10, 25.0, at_least=False) == (0, 2)
    assert stats.wilson_counts([0, 5, 10], 10, 30.0, at_least=False) == (1, 2)
    assert stats.wilson_counts([], 10, 50.0) == (0, 0)
