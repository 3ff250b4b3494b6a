"""A GLUE sweep's configurations (disabled or masked heads and layers) scored against the undisabled model on the same
dev examples, and the paired bounds on their gains: shared by the disable family (Kovaleva §4.6), the prune family
(Michel §4) and the FrameNet family's disabling claim (Kovaleva §5) (issue 44: no family imports another's module).

A sweep result here is the disable pass's :class:`~bertattn_bench.families.disable.DisableResult` (read by its
fields: task, seeds, base, n_dev, n_layers, n_heads, head/layer deltas, flips and correlations with the base).
"""
from __future__ import annotations

import numpy as np

from ...claims.registry import NotApplicable
from ...claims.stats import (
    mcnemar_exact,
    one_sided_z,
    overlapping_correlation_bounds,
    paired_counts_se,
    rank_correlation,
)
from ...data import glue
from ...engine.attention import head_name
from ...training import glue_finetune as finetune


def score_configs(t: glue.Task, logits: np.ndarray, labels: np.ndarray):
    """Per configuration (axis 0 of ``logits``): the primary score (points), the exact McNemar p against
    configuration 0 and the (lost, gained) counts (nan / 0 for regression)."""
    preds = np.stack([finetune.to_predictions(t, lg) for lg in logits])
    scores = np.array([glue.scores(t, p, labels)[t.metric] for p in preds])
    if t.is_regression:
        return scores, np.full(len(preds), np.nan), np.zeros((len(preds), 2), dtype=int)
    correct = preds == labels.astype(int)[None, :]
    tests = [mcnemar_exact(correct[0], correct[c]) for c in range(len(preds))]
    return scores, np.array([x[0] for x in tests]), np.array([[x[1], x[2]] for x in tests])


def with_base(t: glue.Task, logits: np.ndarray) -> np.ndarray:
    """Regression: per configuration (axis 0 of ``logits``), the Pearson r of its dev predictions with
    configuration 0's, what pairs the two correlations with the labels (1 for identical predictions, 0 where one is
    constant); nan for classification (its pairing is in the flips)."""
    if not t.is_regression:
        return np.full(len(logits), np.nan)
    preds = np.stack([finetune.to_predictions(t, lg) for lg in logits])
    return np.array([1.0 if np.array_equal(p, preds[0]) else 0.0 if np.ptp(p) == 0 or np.ptp(preds[0]) == 0
                     else rank_correlation(p, preds[0], "pearson")[0] for p in preds])


def sweep_of(r, what: str):
    """(Δ, gained, lost, names) of the head or layer configurations, per seed: (S, K) each (the flips are 0 for a
    regression task)."""
    if what not in ("head", "layer"):
        raise ValueError(f"what = {what!r}: 'head' or 'layer'")
    S = len(r.seeds)
    delta = (r.head_delta if what == "head" else r.layer_delta).reshape(S, -1)
    flips = (r.head_flips if what == "head" else r.layer_flips).reshape(S, -1, 2)
    names = ([head_name(*divmod(i, r.n_heads)) for i in range(r.n_layers * r.n_heads)] if what == "head"
             else [f"L{i + 1}" for i in range(r.n_layers)])
    return delta, flips[..., 1], flips[..., 0], names


def paired_by_correlation(r, what: str = "head") -> bool:
    """Whether ``r`` is a regression task's sweep, whose gains are paired by each configuration's correlation with
    the undisabled predictions, not by flips; a regression sweep stored before the pass kept that correlation
    raises NotApplicable (not judged)."""
    if not glue.task(r.task).is_regression:
        return False
    if r.head_with_base is None or r.layer_with_base is None:
        raise NotApplicable(
            f"{r.task} ({r.metric}): this stored sweep predates the correlation with the undisabled model's "
            f"predictions that pairs a {what}'s gain (run the pass again): not judged")
    return True


def with_base_of(r, what: str) -> np.ndarray:
    """The head or layer configurations' r with the undisabled predictions, per seed: (S, K)."""
    return (r.head_with_base if what == "head" else r.layer_with_base).reshape(len(r.seeds), -1)


def correlation_bounds(r, s: int, what: str, alpha_lower: float, alpha_upper: float):
    """A regression sweep's seed ``s``: one-sided bounds (points) on every head's (layer's) gain in r over the
    undisabled model on the same dev examples (:func:`stats.overlapping_correlation_bounds`)."""
    base = r.base[s] / 100.0
    delta = (r.head_delta if what == "head" else r.layer_delta).reshape(len(r.seeds), -1)[s] / 100.0
    low, up = overlapping_correlation_bounds(base + delta, base, with_base_of(r, what)[s], r.n_dev, alpha_lower,
                                             alpha_upper)
    return 100.0 * low, 100.0 * up


def head_gain_se(r, s: int, layer: int, head: int, alpha: float) -> float:
    """The standard error of seed ``s``'s Δ when head (``layer``, ``head``) is disabled, as a one-sided test at
    ``alpha`` uses it (points): the paired SE from the discordant counts, floored at one pair's
    (:func:`stats.paired_counts_se`), for a classification task; for a regression task the SE whose z_alpha
    multiple is the distance from Δ to the overlapping-correlation lower bound (:func:`correlation_bounds`), so
    that Δ − z·SE is that bound."""
    if not paired_by_correlation(r, "head"):
        lost, gained = (int(x) for x in r.head_flips[s, layer, head])
        return paired_counts_se(lost, gained, r.n_dev)
    low = float(correlation_bounds(r, s, "head", alpha, alpha)[0][layer * r.n_heads + head])
    return max((float(r.head_delta[s, layer, head]) - low) / one_sided_z(alpha), 1e-9)


def pairing_text(r, what: str, s: int, i: int) -> str:
    """How seed ``s``'s configuration ``i`` (flat head or layer index) was paired, for a detail: its flips
    (-lost/+gained), or its predictions' r with the undisabled ones."""
    if paired_by_correlation(r, what):
        return f"r with the undisabled predictions {with_base_of(r, what)[s, i]:.4f}"
    _, gained, lost, _ = sweep_of(r, what)
    return f"-{lost[s, i]}/+{gained[s, i]}"
