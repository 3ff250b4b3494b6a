"""Michel et al. §3.3-§4.1's head importance, shared by the prune family and the speed-up family (issue 44: no
family imports another's module): I_h from the gradients of head gates on a seeded subset of the fine-tune's
training rows, normalised per layer, and the pruning order it gives."""
from __future__ import annotations

import numpy as np
import torch

from ...data import glue
from ...engine import attention
from ...engine.batching import iter_batches
from ...training import glue_finetune as finetune
from ...training.glue_pass import GluePass

IMPORTANCE_BATCH = 32  # the authors' --train_batch_size; per-example gates make the score independent of it


def importance_data(p: GluePass, seed: int) -> finetune.EncodedSplit:
    """The head-importance examples of pass ``p``'s fine-tune with ``seed``: a seeded subset of ``p.n_importance``
    of the training rows the model was fine-tuned on (never dev; a classifier judged as given: its evaluation
    source's train split where it has one), as the pass draws them
    (:meth:`~bertattn_bench.training.glue_pass.GluePass.importance_split`)."""
    return p.importance_split(seed, p.n_importance)


def head_importance(model: finetune.TaskModel, t: glue.Task, data: finetune.EncodedSplit, tokenizer,
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


def order_from_scores(scores: np.ndarray) -> list[tuple[int, int]]:
    """All heads, least important first (ties broken by layer then head)."""
    n_h = scores.shape[-1]
    flat = np.asarray(scores, dtype=np.float64).reshape(-1)
    return [divmod(int(i), n_h) for i in np.argsort(flat, kind="stable")]
