"""Michel et al. §3.3-§4.1's head importance, shared by the prune family and the speed-up family (issue 44: no
family imports another's module): I_h from the gradients of head gates on a seeded subset of the fine-tune's
training rows, normalised per layer, and the pruning order it gives."""
from __future__ import annotations

import numpy as np
import torch

from ...base.hashing import pieces_digest
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


# I_h of one checkpoint on one set of rows, kept for the session: the prune, speedup and gates passes read the same
# fine-tune's importance on the same seeded training rows (256 at the quick tier), so it is computed once, not three
# times. Keyed by the checkpoint's folder (its name holds the weights' key), the task, the rows' pieces and labels,
# the masked heads, the batch size and the device; a model with no checkpoint folder (a classifier judged as given)
# is computed every time.
_MEMO: dict[tuple, tuple[np.ndarray, int]] = {}


def head_importance(model: finetune.TaskModel, t: glue.Task, data: finetune.EncodedSplit, tokenizer,
                    masked: list[tuple[int, int]] = (), batch_size: int = IMPORTANCE_BATCH,
                    checkpoint: str | None = None) -> tuple[np.ndarray, int]:
    """Raw I_h = mean over ``data`` of |∂L(x)/∂ξ_h| (L, H), the loss per example, ξ = 1 except the ``masked``
    heads (0: their importance is 0). Length-sorted batches with per-example gates: batching never changes a
    score. Returns (scores, n examples). With ``checkpoint`` (the fine-tune's folder, ``ft.meta["path"]``) the
    answer is kept for the session and a second pass asking the same gets a copy of it."""
    key = None
    if checkpoint is not None:
        key = (str(checkpoint), t.name, pieces_digest(data.examples, data.labels), tuple(sorted(masked)),
               int(batch_size), str(next(model.parameters()).device))
        if key in _MEMO:
            scores, n = _MEMO[key]
            return scores.copy(), n
    scores, n = _head_importance(model, t, data, tokenizer, masked, batch_size)
    if key is not None:
        _MEMO[key] = (scores.copy(), n)
    return scores, n


def _head_importance(model, t: glue.Task, data: finetune.EncodedSplit, tokenizer, masked, batch_size: int):
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
