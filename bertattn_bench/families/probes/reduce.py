"""Clark §5 probes: the word-level attention maps (and word vectors) the probes read, reduced from the batched core."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ...engine.attention import Reducer, run_reducers
from ...engine.batching import Encoded, iter_batches
from .data import ROOT

# ---- features: word-level maps from the batched core -------------------------------------------------------------

class WordMapReducer(Reducer):
    """Keeps each sentence's word-level maps ``(L·H, W, W)`` (``[k, a, b]``: from word a to word b) as float16, and its
    word vectors (input word-piece embeddings averaged over the word's pieces), on the model's device; and the
    attention between each word and the model's special tokens ``(L·H, W, 4)``: from the word to [CLS], to [SEP],
    from [CLS] to the word, from [SEP] to the word (the model's own cls/sep tokens; a word's pieces pooled as in
    the maps). For a subsample only: it keeps maps (the probes train on them)."""

    maps_only = True  # reads nothing but the maps: each forward pass may stop after the last one

    def __init__(self, n_layers: int, n_heads: int, embeddings: torch.Tensor | None = None):
        self.n_layers, self.n_heads = n_layers, n_heads
        self.embeddings = embeddings
        self.maps: dict[int, torch.Tensor] = {}
        self.vectors: dict[int, torch.Tensor] = {}
        self.specials: dict[int, torch.Tensor] = {}

    def start_batch(self, batch) -> None:
        self.batch = batch
        b, w = batch.word_mask.shape
        self.buffer = torch.zeros(b, self.n_layers * self.n_heads, w, w, dtype=torch.float16,
                                  device=batch.input_ids.device)
        self.special_buffer = torch.zeros(b, self.n_layers * self.n_heads, w, 4, dtype=torch.float16,
                                          device=batch.input_ids.device)
        self.special_cols = torch.stack([batch.is_cls, batch.is_sep], -1).float()  # (B, T, 2)
        if self.embeddings is not None:
            vec = batch.word_from @ self.embeddings[batch.input_ids].float()  # (B, W, d)
            for i, ex in enumerate(batch.examples):
                self.vectors[ex.index] = vec[i, :ex.n_words]

    def update(self, layer: int, probs: torch.Tensor) -> None:
        b = self.batch
        from_words = b.word_from.unsqueeze(1) @ probs.float()  # (B, H, W, T)
        words = from_words @ b.word_to.unsqueeze(1)  # (B, H, W, W)
        ks = slice(layer * self.n_heads, (layer + 1) * self.n_heads)
        self.buffer[:, ks] = words.half()
        cols = self.special_cols.unsqueeze(1)  # (B, 1, T, 2)
        to_special = from_words @ cols  # (B, H, W, 2): word -> [CLS], [SEP]
        from_special = (cols.transpose(-1, -2) @ probs.float()) @ b.word_to.unsqueeze(1)  # (B, H, 2, W)
        self.special_buffer[:, ks] = torch.cat([to_special, from_special.transpose(-1, -2)], -1).half()
        if layer == self.n_layers - 1:
            for i, ex in enumerate(b.examples):
                self.maps[ex.index] = self.buffer[i, :, :ex.n_words, :ex.n_words]
                self.specials[ex.index] = self.special_buffer[i, :, :ex.n_words]

    def finalize(self):
        return self.maps, self.vectors, self.specials


@dataclass
class Features:
    """Per sentence: maps (K, W, W) float16, vectors (W, d), gold heads (W,) with -1 = not scored and ``ROOT`` for a
    root word; ``specials`` (K, W, 4), the attention to/from [CLS]/[SEP] (``WordMapReducer``): given, the probes
    have a ROOT candidate; None, they have none and root words are not scored."""

    maps: list[torch.Tensor]
    vectors: list[torch.Tensor]
    heads: list[np.ndarray]
    specials: list[torch.Tensor] | None = None

    @property
    def n_arcs(self) -> int:
        return int(sum((h >= 0).sum() for h in self.heads))


def extract(loaded, encoded: list[Encoded], heads: list[np.ndarray], batch_size: int,
            extra_reducers=()) -> tuple[Features, list]:
    """One batched sweep of ``loaded`` over ``encoded`` (indexed 0..n-1): word maps + vectors (+ other reducers)."""
    info = loaded.info
    red = WordMapReducer(info.n_layers, info.n_heads, loaded.model.get_input_embeddings().weight.detach())
    batches = iter_batches(encoded, loaded.tokenizer, torch.device(info.device), batch_size, with_words=True)
    (maps, vectors, specials), *rest = run_reducers(loaded.model, batches, [red, *extra_reducers])
    order = [e.index for e in encoded]
    root = any((heads[i] == ROOT).any() for i in order)
    return Features([maps[i] for i in order], [vectors[i] for i in order], [heads[i] for i in order],
                    [specials[i] for i in order] if root else None), rest


