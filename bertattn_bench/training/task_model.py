"""The GLUE task model and its data: the loaded encoder with a seeded classification or regression head
(:class:`TaskModel`), a task split tokenised with its labels (:class:`EncodedSplit`), the seeded row subsets
(:func:`seeded_subset`) and evaluation (:func:`predict`). The training loop is :mod:`.train_loop`; the cached fine-tune, :mod:`.glue_finetune`.

* :class:`TaskModel`: the loaded encoder (a deep copy; the session's model is never changed) + a classification or
  regression head on the first token's final hidden state (dropout → dense → tanh → dropout → linear, BERT's
  pooler + classifier, built here so that it is seeded and needs no pooler weights in the checkpoint).
"""
from __future__ import annotations

import copy
from contextlib import closing
from dataclasses import dataclass, field
from typing import Sequence, TypeVar

import numpy as np
import torch

from ..base.errors import DataError
from ..data import glue
from ..engine import attention
from ..engine.batching import Encoded, in_data_order, iter_batches, model_inputs

# ---- the model -----------------------------------------------------------------------------------------------

class TaskModel(torch.nn.Module):
    """Encoder + head; ``forward`` returns logits ``(B, C)`` (``(B,)`` for regression)."""

    def __init__(self, encoder: torch.nn.Module, num_labels: int, seed: int):
        super().__init__()
        self.encoder = encoder
        self.config = encoder.config  # attention.attention_modules checks the attention implementation here
        hidden = int(encoder.config.hidden_size)
        p = float(getattr(encoder.config, "hidden_dropout_prob", 0.1))
        gen = torch.Generator().manual_seed(seed)
        dense, out = torch.nn.Linear(hidden, hidden), torch.nn.Linear(hidden, num_labels)
        std = float(getattr(encoder.config, "initializer_range", 0.02))
        with torch.no_grad():
            for lin in (dense, out):  # BERT's init: normal(0, initializer_range), zero bias
                lin.weight.copy_(torch.randn(lin.weight.shape, generator=gen) * std)
                lin.bias.zero_()
        self.head = torch.nn.Sequential(torch.nn.Dropout(p), dense, torch.nn.Tanh(), torch.nn.Dropout(p), out)
        self.num_labels = num_labels

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        hidden = self.encoder(**model_inputs(self.encoder, input_ids, attention_mask, token_type_ids)).last_hidden_state[:, 0]
        logits = self.head(hidden)
        return logits[:, 0] if self.num_labels == 1 else logits


def task_model(loaded, t: glue.Task, seed: int) -> TaskModel:
    """A fresh task model on the loaded encoder (deep-copied), head seeded by ``seed``."""
    encoder = copy.deepcopy(loaded.model)
    model = TaskModel(encoder, t.num_labels, seed).to(loaded.info.device)
    model.eval()
    return model


def loss_per_example(t: glue.Task, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    if t.is_regression:
        return (logits - labels) ** 2
    return torch.nn.functional.cross_entropy(logits, labels.long(), reduction="none")


# ---- data ----------------------------------------------------------------------------------------------------

@dataclass
class EncodedSplit:
    """A task split tokenised: the examples (``Encoded``), labels in the same order, and how many were cut."""

    examples: list[Encoded]
    labels: np.ndarray
    n_truncated: int
    max_tokens: int
    sources: list[str] = field(default_factory=list)
    origin: object = None  # the eval_sets.EvalSource the rows came from (None: the shipped TSV)
    origin_text: str = ""  # " from SOURCE (rows sha256:...)": the origin as a pass's description (its key) says it




def encode_split(tokenizer, rows: Sequence[glue.Example], max_tokens: int) -> EncodedSplit:
    """``[CLS] a [SEP] (b [SEP])`` truncated to ``max_tokens`` pieces (longest first, as run_classifier.py)."""
    if not rows:
        raise DataError("no examples to encode")
    a = [r.text_a for r in rows]
    b = [r.text_b for r in rows] if rows[0].text_b is not None else None
    full = tokenizer(a, b, truncation=False)["input_ids"]
    enc = tokenizer(a, b, truncation="longest_first", max_length=max_tokens)
    examples = []
    for i, ids in enumerate(enc["input_ids"]):
        types = enc["token_type_ids"][i] if "token_type_ids" in enc else [0] * len(ids)
        examples.append(Encoded(i, list(ids), list(types), [-1] * len(ids), 0))
    n_trunc = sum(len(f) > max_tokens for f in full)
    return EncodedSplit(examples, np.array([r.label for r in rows], dtype=np.float32), n_trunc, max_tokens,
                        [r.source for r in rows])


R = TypeVar("R")


def seeded_subset(rows: Sequence[R], n: int | None, seed: int) -> list[R]:
    """``n`` of ``rows`` drawn without replacement by a generator seeded with ``seed``, in their order (all of them
    where ``n`` is None, 0 or at least their number)."""
    if not n or len(rows) <= n:
        return list(rows)
    keep = np.random.default_rng(seed).choice(len(rows), n, replace=False)
    return [rows[i] for i in sorted(keep)]


# ---- evaluation ----------------------------------------------------------------------------------------------

def predict(model: TaskModel, data: EncodedSplit, tokenizer, batch_size: int = 64,
            interventions: Sequence[attention.Intervention] = ()) -> np.ndarray:
    """Logits for every example, in data order (batches sorted by length; padding never changes a logit)."""
    device = next(model.parameters()).device
    positions, rows = [], []
    with closing(attention.forward(model, iter_batches(data.examples, tokenizer, device, batch_size),
                                   interventions=interventions)) as outputs:
        for batch, logits in outputs:
            positions.append(batch.positions)
            rows.append(logits.float().cpu().numpy())
    return in_data_order(positions, rows)


def to_predictions(t: glue.Task, logits: np.ndarray) -> np.ndarray:
    return logits if t.is_regression else logits.argmax(-1)

