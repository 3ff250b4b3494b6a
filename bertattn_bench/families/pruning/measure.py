"""Michel et al. §3-§4 (the prune family): pruning orders and steps, AUC; library functions unit-tested on a tiny
model (head importance from gate gradients, shared with the speed-up family: :mod:`..common.head_importance`)."""
from __future__ import annotations

import numpy as np

from ...data import glue
from ..common.head_importance import order_from_scores
from .constants import PARAPHRASE_STSB, STEPS

# ---- the measurements (library functions, unit-tested on a tiny model) -----------------------------------------

def step_counts(n_layers: int, n_heads: int, steps: int = STEPS) -> list[int]:
    """Heads pruned at step k = 0..steps-1: floor(L·H·k/steps) (the authors' ``int(144 * pct / 100)``)."""
    total = n_layers * n_heads
    return [total * k // steps for k in range(steps)]


def delta_order(delta: np.ndarray) -> list[tuple[int, int]]:
    """The paper's dashed curve (Fig. 3): heads in order of their single-head masking Δ, the head whose removal
    costs least (largest Δ) first and the most harmful to remove (most negative Δ) last."""
    return order_from_scores(-np.asarray(delta, dtype=np.float64))


def auc_points(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """ROC AUC (points) of the logit margin (last class minus first) per configuration (axis 0 of ``logits``, shape
    (C, N, 2)): a score that a uniform shift of the decision threshold leaves unchanged (ties count half)."""
    from scipy.stats import rankdata

    y = np.asarray(labels).astype(int) == 1
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return np.full(len(logits), np.nan)
    logits = np.asarray(logits, dtype=np.float64)
    margin = logits[..., -1] - logits[..., 0]
    ranks = rankdata(margin, axis=-1)
    return 100.0 * (ranks[:, y].sum(axis=-1) - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def pruning_steps(order: list[tuple[int, int]], counts: list[int]) -> list[list[tuple[int, int]]]:
    """Step k masks the first ``counts[k]`` heads of ``order`` (importance computed once)."""
    return [list(order[:c]) for c in counts]


def exact_pruning_steps(score_fn, n_layers: int, n_heads: int, counts: list[int]) -> list[list[tuple[int, int]]]:
    """The authors' ``--exact_pruning``: before each step, ``score_fn(masked) -> (L, H)`` scores the model with the
    heads masked so far; the step masks the least important of the remaining heads up to ``counts[k]``."""
    masked: list[tuple[int, int]] = []
    steps = []
    for c in counts:
        if c > len(masked):
            scores = np.array(score_fn(list(masked)), dtype=np.float64)
            taken = set(masked)
            rest = [hd for hd in order_from_scores(scores) if hd not in taken]
            masked = masked + rest[:c - len(masked)]
        steps.append(list(masked))
    return steps


def all_but_one_configs(n_layers: int, n_heads: int) -> list[list[tuple[int, int]]]:
    """§3.3: for layer l and head h (l-major), every other head of layer l masked (L·H configurations)."""
    return [[(l, g) for g in range(n_heads) if g != h] for l in range(n_layers) for h in range(n_heads)]


def one_head_per_layer(keep: list[int], n_heads: int) -> list[tuple[int, int]]:
    """Every head masked except ``keep[l]`` in each layer l (a pure single-head model)."""
    return [(l, g) for l, k in enumerate(keep) for g in range(n_heads) if g != k]


def binarised_stsb(rows: list[glue.Example]) -> list[glue.Example]:
    return [glue.Example(r.text_a, r.text_b, 1.0 if r.label >= PARAPHRASE_STSB else 0.0, r.source) for r in rows]
