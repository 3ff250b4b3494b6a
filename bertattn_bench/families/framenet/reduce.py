"""The framenet family's reducer: the linked pairs' max attention per head and its matched-distance control, per
sentence (the result and the reducer; the module docstring of the package says what is scored)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from ...engine.attention import Reducer
from ...engine.batching import to_device_parts
from .constants import CONTROL_SEED, DEFAULT_DIRECTION, DIRECTIONS, DRAWS


def control_pairs(pairs: list[tuple[int, int]], n_words: int, draws: int, rng: np.random.Generator
                  ) -> tuple[np.ndarray, int]:
    """``draws`` random replacements of every linked pair (t, f): (t', t' + (f - t)) inside the sentence and not a
    linked pair (either order). Returns (draws, P, 2) word indices and how many had no alternative."""
    linked = {frozenset(p) for p in pairs}
    out = np.zeros((draws, len(pairs), 2), dtype=np.int64)
    fallback = 0
    for j, (t, f) in enumerate(pairs):
        d = f - t
        cand = [s for s in range(max(0, -d), min(n_words, n_words - d)) if frozenset((s, s + d)) not in linked]
        if not cand:
            out[:, j] = (t, f)
            fallback += draws
            continue
        starts = rng.choice(np.array(cand), size=draws)
        out[:, j, 0], out[:, j, 1] = starts, starts + d
    return out, fallback


@dataclass
class FrameResult:
    """Per-head means over sentences, numpy ``(3 directions, L, H)``; n = sentences."""

    score: np.ndarray  # mean over sentences of the max over linked pairs
    control: np.ndarray  # the same over the matched-distance random pairs (mean over draws)
    diff_mean: np.ndarray  # mean over sentences of (score - control)
    diff_sd: np.ndarray  # sd over sentences of that difference
    n_sentences: int
    n_pairs: int
    n_fallback: int  # control draws that had to reuse the linked pair (no other pair at that distance)
    draws: int
    example: dict = field(default_factory=dict)  # the paper's sentence: labels, the plotted row, rows (L, H, T)
    description: str = ""
    level: str = "word"  # "piece" (the notebook's scoring) or "word" (the project's variants)
    # per sentence (issue 61: the bootstrap over sentences): the linked pairs' max and the control's, (N, 3, L, H)
    score_per_sentence: np.ndarray | None = None
    control_per_sentence: np.ndarray | None = None

    def resample(self, idx: np.ndarray) -> "FrameResult":
        """The per-head means over the sentences ``idx`` (with repeats: one bootstrap sample), as the pooled ones."""
        real, ctrl = self.score_per_sentence[idx].astype(np.float64), self.control_per_sentence[idx].astype(np.float64)
        diff = real - ctrl
        return FrameResult(score=real.mean(0), control=ctrl.mean(0), diff_mean=diff.mean(0),
                           diff_sd=diff.std(0, ddof=1) if len(idx) > 1 else np.zeros_like(diff[0]),
                           n_sentences=len(idx), n_pairs=self.n_pairs, n_fallback=self.n_fallback, draws=self.draws,
                           level=self.level)

    def d(self, direction: str | None) -> int:
        return DIRECTIONS.index(self.direction(direction))

    def direction(self, direction: str | None) -> str:
        """``None``: the corpus' own direction (the notebook: FE -> target; the project's variants: both)."""
        if direction is None:
            return DEFAULT_DIRECTION[self.level]
        if direction not in DIRECTIONS:
            raise ValueError(f"direction={direction!r}: expected one of {', '.join(DIRECTIONS)}")
        return direction

    @property
    def shape(self) -> tuple[int, int]:
        return self.score.shape[1], self.score.shape[2]


class FrameReducer(Reducer):
    """Sums over sentences, per (direction, layer, head), of the linked pairs' max attention and of the control's."""

    maps_only = True  # reads nothing but the maps: each forward pass may stop after the last one

    def __init__(self, pairs_per_example: list[list[tuple[int, int]]], n_words: list[int], n_layers: int,
                 n_heads: int, device, draws: int = DRAWS, seed: int = CONTROL_SEED, example_index: int | None = None,
                 pooling: str = "mean", level: str = "word", offset: int = 0):
        """``level`` "word": pairs are word indices (word-level maps); "piece": positions in the input, with
        ``n_words[i]`` the sentence's pieces starting at ``offset`` (1: after [CLS]) for the control's draws."""
        if pooling not in ("mean", "sum"):
            raise ValueError(f"pooling={pooling!r}: expected 'mean' or 'sum'")
        if level not in DEFAULT_DIRECTION:
            raise ValueError(f"level={level!r}: expected one of {', '.join(DEFAULT_DIRECTION)}")
        self.pooling, self.level = pooling, level
        # per example, built once: rows [from word, to word, group] for both directions; the group of a pair is
        # its direction (0: target -> FE, 1: FE -> target) for the linked pairs, direction * draws + draw for the
        # control's; a batch adds 2 * (row in batch) (x draws) to them
        self.real, self.ctrl, self.n_pairs_of, self.n_fallback = [], [], [], 0
        for i, pairs in enumerate(pairs_per_example):
            p = np.array(pairs, dtype=np.int64).reshape(-1, 2)
            c, fb = control_pairs([(t - offset, f - offset) for t, f in pairs], n_words[i], draws,
                                  np.random.default_rng([seed, i]))
            c = c + offset
            self.n_fallback += fb
            n = len(p)
            self.real.append(np.concatenate([np.stack([p[:, 0], p[:, 1], np.zeros(n, np.int64)], 1),
                                             np.stack([p[:, 1], p[:, 0], np.ones(n, np.int64)], 1)]))
            k = np.repeat(np.arange(draws), n)
            cf = c.reshape(-1, 2)
            self.ctrl.append(np.concatenate([np.stack([cf[:, 0], cf[:, 1], k], 1),
                                             np.stack([cf[:, 1], cf[:, 0], draws + k], 1)]))
            self.n_pairs_of.append(n)
        self.draws, self.device, self.example_index = draws, device, example_index
        self.n_layers, self.n_heads = n_layers, n_heads
        self.n_sentences, self.n_pairs = 0, 0
        self.example_rows = None
        self.per_real, self.per_ctrl = [], []  # per sentence, (B, 3, L, H) per batch

    def start_batch(self, batch) -> None:
        self.example_row = None
        real, ctrl = [], []
        for b, ex in enumerate(batch.examples):
            if ex.index == self.example_index:
                self.example_row = b
            r, c = self.real[ex.index], self.ctrl[ex.index]
            real.append(np.column_stack([np.full(len(r), b), r[:, :2], r[:, 2] + 2 * b]))
            ctrl.append(np.column_stack([np.full(len(c), b), c[:, :2], c[:, 2] + 2 * b * self.draws]))
            self.n_pairs += self.n_pairs_of[ex.index]
        real_t, ctrl_t = to_device_parts([np.concatenate(real), np.concatenate(ctrl)], self.device)  # one copy
        self.real_idx, self.ctrl_idx = real_t.unbind(1), ctrl_t.unbind(1)
        self.batch = batch
        # attention to a word: the mean over its pieces (the paper's scale: one piece pair), not Clark's sum (see
        # the module docstring: a sum favours the many-piece content words of the links under any diffuse head)
        if self.level == "word":
            self.to_word = batch.word_to / batch.word_to.sum(1, keepdim=True).clamp_min(1) \
                if self.pooling == "mean" else batch.word_to
        self.n_sentences += len(batch.examples)
        self.b = len(batch.examples)
        self.b_real = torch.zeros(self.b, 3, self.n_layers, self.n_heads, dtype=torch.float64, device=self.device)
        self.b_ctrl = torch.zeros_like(self.b_real)
        self.per_real.append(self.b_real)  # filled in place by the batch's layers
        self.per_ctrl.append(self.b_ctrl)

    def _group_max(self, words: torch.Tensor, idx, n_groups: int) -> torch.Tensor:
        """(n_groups, H): max of the word-level attention over each group's pairs."""
        b, i, j, g = idx
        vals = words[b, :, i, j]  # (P, H)
        out = torch.full((n_groups, vals.shape[1]), -1.0, dtype=vals.dtype, device=vals.device)
        return out.scatter_reduce(0, g[:, None].expand_as(vals), vals, reduce="amax", include_self=True)

    def update(self, layer: int, probs: torch.Tensor) -> None:
        bt = self.batch
        if self.level == "piece":
            words = probs.float()  # (B, H, T, T): the notebook's piece-level maps
        else:
            words = (bt.word_from.unsqueeze(1) @ probs.float()) @ self.to_word.unsqueeze(1)  # (B, H, W, W)
        h = words.shape[1]
        real = self._group_max(words, self.real_idx, 2 * self.b).view(self.b, 2, h)
        real = torch.cat([real, real.amax(1, keepdim=True)], dim=1)  # (B, 3, H): t2f, f2t, both
        ctrl = self._group_max(words, self.ctrl_idx, 2 * self.b * self.draws).view(self.b, 2, self.draws, h)
        ctrl = torch.cat([ctrl, ctrl.amax(1, keepdim=True)], dim=1).mean(2)  # both per draw, then mean over draws
        # per sentence (float64): the sums, the paired differences and their squares are made from them at the end
        self.b_real[:, :, layer], self.b_ctrl[:, :, layer] = real, ctrl
        if self.example_row is not None:
            if self.example_rows is None:
                self.example_rows = torch.zeros(self.n_layers, h, words.shape[2], words.shape[3],
                                                device=words.device)
            self.example_rows[layer] = words[self.example_row]

    def finalize(self) -> FrameResult:
        n = max(self.n_sentences, 1)
        # the sums over sentences, made from the per-sentence values (none read: zeros)
        real = torch.cat(self.per_real) if self.per_real else \
            torch.zeros(0, 3, self.n_layers, self.n_heads, dtype=torch.float64, device=self.device)
        ctrl = torch.cat(self.per_ctrl) if self.per_ctrl else torch.zeros_like(real)  # (N, 3, L, H)
        diff = real - ctrl
        mean = diff.sum(0) / n
        var = (diff.square().sum(0) / n - mean.square()).clamp_min(0) * n / max(n - 1, 1)
        cpu = lambda x: x.cpu().numpy()  # noqa: E731
        return FrameResult(score=cpu(real.sum(0) / n), control=cpu(ctrl.sum(0) / n), diff_mean=cpu(mean),
                           diff_sd=cpu(var.sqrt()), n_sentences=self.n_sentences, n_pairs=self.n_pairs,
                           n_fallback=self.n_fallback, draws=self.draws, level=self.level,
                           example={"maps": None if self.example_rows is None else cpu(self.example_rows)},
                           score_per_sentence=cpu(torch.cat(self.per_real).float()) if self.per_real else None,
                           control_per_sentence=cpu(torch.cat(self.per_ctrl).float()) if self.per_ctrl else None)
