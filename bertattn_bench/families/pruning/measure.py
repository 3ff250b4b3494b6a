"""Michel et al. §3-§4 (the prune family): head importance from gate gradients, pruning orders and steps, AUC;
library functions unit-tested on a tiny model."""
from __future__ import annotations

import numpy as np
import torch

from ...data import glue
from ...engine import attention
from ...engine.batching import iter_batches
from ...training import glue_finetune as finetune
from .constants import IMPORTANCE_BATCH, PARAPHRASE_STSB, STEPS

# ---- the measurements (library functions, unit-tested on a tiny model) -----------------------------------------

def head_importance(model: finetune.TaskModel, t: glue.Task, data: finetune.Encoded_, tokenizer,
                    masked: list[tuple[int, int]] = (), batch_size: int = IMPORTANCE_BATCH) -> tuple[np.ndarray, int]:
    """Raw I_h = mean over ``data`` of |∂L(x)/∂ξ_h| (L, H), the loss per example, ξ = 1 except the ``masked``
    heads (0: their importance is 0). Length-sorted batches with per-example gates: batching never changes a
    score. Returns (scores, n examples)."""
    n_l, n_h = attention.layers_heads(model)
    device = next(model.parameters()).device
    mask = attention.zero_heads(n_l, n_h, list(masked), device=device) if masked else None
    labels = torch.from_numpy(data.labels)

    def loss_fn(m, batch):
        with attention.attention_run(m, head_gates=mask):
            logits = m(**batch.model_inputs())
        return finetune.loss_per_example(t, logits.float(), labels[batch.positions].to(device))

    total, n = attention.head_gate_gradients(model, iter_batches(data.examples, tokenizer, device, batch_size),
                                             loss_fn, n_l, n_h, per_example=True)
    return (total / n).double().cpu().numpy(), n


def normalize_by_layer(scores: np.ndarray) -> np.ndarray:
    """Molchanov et al. / the paper's §4.1: each layer's row divided by its ℓ2 norm (a zero row stays zero)."""
    return scores / (np.linalg.norm(scores, axis=-1, keepdims=True) + 1e-20)


def step_counts(n_layers: int, n_heads: int, steps: int = STEPS) -> list[int]:
    """Heads pruned at step k = 0..steps-1: floor(L·H·k/steps) (the authors' ``int(144 * pct / 100)``)."""
    total = n_layers * n_heads
    return [total * k // steps for k in range(steps)]


def order_from_scores(scores: np.ndarray) -> list[tuple[int, int]]:
    """All heads, least important first (ties broken by layer then head)."""
    n_h = scores.shape[-1]
    flat = np.asarray(scores, dtype=np.float64).reshape(-1)
    return [divmod(int(i), n_h) for i in np.argsort(flat, kind="stable")]


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
