"""The gradient family's reducer: the masked segments (:func:`mask_pieces`), the MLM loss, ∂L/∂α through an
edit of the attention probabilities (:func:`attention_gradients`) and the running statistics per (layer, head, key
class) on the model's device (:class:`GradientReducer`, :func:`run_gradients`)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch

from ...engine.attention import attention_run
from ...engine.batching import Encoded
from .constants import KEY_CLASSES, MASK_RATE, MASK_SEED


@dataclass
class GradientResult:
    """Per-head means of |∂L/∂α| by key class (``(n_layers, n_heads)`` tensors on the CPU) and the [SEP] share."""

    grad: dict[str, torch.Tensor]
    to_sep: torch.Tensor  # (n_layers, n_heads) mean attention to [SEP] (real queries, then segments)
    n_segments: int
    n_masked: int  # masked word pieces (the loss terms)
    n_weights: dict[str, int]  # attention weights (query-key pairs) per layer and head in each key class
    sep_chance: float  # mean over segments of 2 / L
    mask_rate: float = MASK_RATE
    seed: int = MASK_SEED

    def per_layer(self, key_class: str) -> torch.Tensor:
        """Mean over heads: Fig. 3's curves."""
        return self.grad[key_class].mean(dim=1)

    def sep_share(self) -> torch.Tensor:
        return self.to_sep.mean(dim=1)

    @property
    def n_layers(self) -> int:
        return self.to_sep.shape[0]


# ---- masking ------------------------------------------------------------------------------------------------

@dataclass
class MaskedExample:
    encoded: Encoded  # input ids with [MASK] at the chosen positions
    positions: list[int]
    labels: list[int]  # the original ids at ``positions``


def mask_pieces(enc: Encoded, tokenizer, rate: float = MASK_RATE, seed: int = MASK_SEED) -> MaskedExample:
    """Replace ``rate`` of the word pieces (not [CLS]/[SEP]; at least one) by [MASK], chosen by (seed, index)."""
    special = set(tokenizer.all_special_ids)
    candidates = [i for i, t in enumerate(enc.input_ids) if t not in special]
    if not candidates:
        return MaskedExample(enc, [], [])
    k = max(1, int(round(rate * len(candidates))))
    rng = np.random.default_rng([seed, enc.index])
    positions = sorted(int(p) for p in rng.choice(candidates, size=k, replace=False))
    ids = list(enc.input_ids)
    labels = [ids[p] for p in positions]
    for p in positions:
        ids[p] = tokenizer.mask_token_id
    return MaskedExample(dataclasses.replace(enc, input_ids=ids), positions, labels)


@dataclass
class MaskedLabels:
    """A batch's masked positions, chosen on the host and copied to the device in one array (issue 47: the loss reads
    them by integer index, no boolean index whose size the host must learn from the device)."""

    labels: torch.Tensor  # (B, T): the original id at masked positions, -100 elsewhere
    rows: torch.Tensor  # (M,): each masked position's segment, in row-major order (as a boolean mask reads them)
    cols: torch.Tensor  # (M,): its position
    targets: torch.Tensor  # (M,): its original id
    per_segment: torch.Tensor  # (B,): masked positions per segment


def batch_labels(batch, masked: dict[int, MaskedExample]) -> MaskedLabels:
    """The batch's masked positions and their original ids (:class:`MaskedLabels`)."""
    from ...engine.batching import to_device_parts

    b, t = batch.input_ids.shape
    labels = np.full((b, t), -100, dtype=np.int64)
    picks = []  # (row, position, id), row-major
    for row, e in enumerate(batch.examples):
        m = masked[e.index]
        for pos, label in sorted(zip(m.positions, m.labels)):
            labels[row, pos] = label
            picks.append((row, pos, label))
    at = np.array(picks, dtype=np.int64).reshape(-1, 3)
    per_segment = np.bincount(at[:, 0], minlength=b)
    on_device, rows, cols, targets, counts = to_device_parts([labels, *at.T, per_segment], batch.input_ids.device)
    return MaskedLabels(on_device, rows, cols, targets, counts)


# ---- the gradient core --------------------------------------------------------------------------------------

def _head_module(model):
    """The MLM head as one module hidden → logits (BERT ``cls``, RoBERTa ``lm_head``), or None."""
    base = getattr(model, "base_model_prefix", "")
    heads = [m for n, m in model.named_children() if n != base and any(True for _ in m.parameters())]
    return heads[0] if len(heads) == 1 else None


def mlm_loss(model, batch, masked: MaskedLabels) -> torch.Tensor:
    """Sum over segments of each segment's mean cross-entropy over its masked pieces.

    Logits are computed for the masked positions only (the full ``(B, T, vocab)`` logits would dominate memory).
    """
    head = _head_module(model)
    if head is not None:
        hidden = model.base_model(**batch.model_inputs(model)).last_hidden_state
        logits = head(hidden[masked.rows, masked.cols])
    else:  # an architecture whose head is several modules: the full forward
        logits = model(**batch.model_inputs(model)).logits[masked.rows, masked.cols]
    logits = logits.to(torch.promote_types(logits.dtype, torch.float32))  # half precision → float32
    ce = torch.nn.functional.cross_entropy(logits, masked.targets, reduction="none")
    per_segment = torch.zeros(batch.input_ids.shape[0], dtype=ce.dtype, device=ce.device).index_add_(0, masked.rows, ce)
    return (per_segment / masked.per_segment.clamp(min=1)).sum()


def attention_gradients(model, batch, labels: MaskedLabels, n_layers: int):
    """(loss, [probs per layer], [∂loss/∂probs per layer]) for one batch; gradients enabled whatever the context."""
    deltas: dict[int, torch.Tensor] = {}
    probs_seen: dict[int, torch.Tensor] = {}

    def edit(layer, probs, key_mask):
        delta = torch.zeros_like(probs, requires_grad=True)
        deltas[layer], probs_seen[layer] = delta, probs
        return probs + delta

    with torch.inference_mode(False), torch.enable_grad(), attention_run(model, edit_probs=edit):
        loss = mlm_loss(model, batch, labels)
        grads = torch.autograd.grad(loss, [deltas[layer] for layer in range(n_layers)])
    return loss.detach(), [probs_seen[layer].detach() for layer in range(n_layers)], list(grads)


class GradientReducer:
    """Running sums of |∂L/∂α| per (layer, head, key class) and of attention to [SEP], on the model's device.

    Each statistic is a segment's mean (over its real queries and the keys of the class), then the mean over the
    segments that have such keys, as in the surface family. Pooling all weights instead would weigh [SEP] (2 keys
    per segment) and the other tokens (~L keys) by different segment lengths, and short segments have larger
    gradients: on a random-init model that alone makes [SEP]'s gradient look 1.6x the others'.
    """

    def __init__(self, n_layers: int, n_heads: int, device):
        z = lambda: torch.zeros(n_layers, n_heads, dtype=torch.float64, device=device)  # noqa: E731
        self.sums = {c: z() for c in KEY_CLASSES}
        self.counts = {c: torch.zeros((), dtype=torch.long, device=device) for c in KEY_CLASSES}  # segments
        self.weights = {c: torch.zeros((), dtype=torch.long, device=device) for c in KEY_CLASSES}
        self.sep_sum = z()
        self.sep_chance_sum = torch.zeros((), dtype=torch.float64, device=device)
        self.n_masked = torch.zeros((), dtype=torch.long, device=device)
        self.n_segments = 0

    def start_batch(self, batch, labels: MaskedLabels) -> None:
        real = batch.token_mask
        masked = labels.labels >= 0
        unmasked = real & ~masked
        self.query = real.to(torch.float32)
        self.keys = {
            "sep": batch.is_sep.to(torch.float32),
            "punct": batch.is_punct.to(torch.float32),  # a masked '.' is [MASK]: not here
            "other": (unmasked & ~batch.is_sep & ~batch.is_punct).to(torch.float32),
            "unmasked": unmasked.to(torch.float32),
        }
        n_queries = self.query.sum(-1)  # (B,) real queries per segment
        self.n_queries = n_queries.clamp(min=1)
        self.n_pairs = {}  # (B,) query-key pairs of each class per segment
        for c, k in self.keys.items():
            pairs = n_queries * k.sum(-1)
            self.n_pairs[c] = pairs.clamp(min=1)
            self.counts[c] += (pairs > 0).sum()
            self.weights[c] += pairs.sum().long()
        self.sep_chance_sum += (batch.is_sep.sum(-1).double() / n_queries.double().clamp(min=1)).sum()  # n_sep / L
        self.n_segments += real.shape[0]
        self.n_masked += masked.sum()

    def update(self, layer: int, probs: torch.Tensor, grad: torch.Tensor) -> None:
        by_key = torch.einsum("bhqk,bq->bhk", grad.float().abs(), self.query)  # summed over real queries
        for c, k in self.keys.items():
            per_segment = torch.einsum("bhk,bk->bh", by_key, k) / self.n_pairs[c][:, None]  # 0 without such keys
            self.sums[c][layer] += per_segment.sum(0).double()
        to_sep = torch.einsum("bhqk,bq,bk->bh", probs.float(), self.query, self.keys["sep"])
        self.sep_sum[layer] += (to_sep / self.n_queries[:, None]).sum(0).double()

    def finalize(self) -> GradientResult:
        n = max(self.n_segments, 1)
        return GradientResult(
            grad={c: (self.sums[c] / max(int(self.counts[c]), 1)).float().cpu() for c in KEY_CLASSES},
            to_sep=(self.sep_sum / n).float().cpu(),
            n_segments=self.n_segments,
            n_masked=int(self.n_masked),
            n_weights={c: int(v) for c, v in self.weights.items()},
            sep_chance=float(self.sep_chance_sum) / n,
        )


def run_gradients(model, batches, masked: dict[int, MaskedExample], n_layers: int, n_heads: int, device,
                  progress: bool = False, desc: str = "gradient") -> GradientResult:
    """The family's core: one forward + backward per batch (eval mode, no dropout), reduced on the device."""
    if progress:
        from tqdm.auto import tqdm

        batches = tqdm(batches, desc=desc, unit="batch", leave=False, disable=None)
    reducer = GradientReducer(n_layers, n_heads, device)
    for batch in batches:
        labels = batch_labels(batch, masked)
        reducer.start_batch(batch, labels)
        _, probs, grads = attention_gradients(model, batch, labels, n_layers)
        for layer in range(n_layers):
            reducer.update(layer, probs[layer], grads[layer])
    return reducer.finalize()
