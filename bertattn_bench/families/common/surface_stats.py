"""Clark et al. §3's surface statistics as several families read them (issue 44: no family imports another's
module): the per-head statistics of the §3 segments (:class:`SurfaceReducer`, :class:`SurfaceResult`) and the pass
over those segments (:func:`segments_pass`), read by the surface family (Clark §3), the norms family's two readings
of the same statistics (Kobayashi et al. 2020) and the clustering family (Clark §6).

Token-level, on ``[CLS] A [SEP] B [SEP]`` segments (:mod:`bertattn_bench.data.segments`). As in Clark et al.'s
analysis code, a head's statistic is the mean over the query tokens of one segment, then the mean over segments;
padding never enters (masks). Denominators are Clark's: every real query for the previous/next-token shares
(n, not n - 1), the two [SEP] queries for [SEP] -> [SEP], the n - 2 others for other -> [SEP].
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ...claims.registry import Measurement, NotApplicable
from ...claims.stats import bootstrap_bounds
from ...data.segments import CORPORA as SEGMENT_CORPORA
from ...engine.attention import Reducer
from ...engine.model import LoadedModel
from ...engine.passes import PreparedPass

# resamples behind a statistic's bootstrap standard error or bounds (seeded, so repeatable): the surface family's
# claims over segments, the norms family's readings of them, the patterns family's shares over dev examples
BOOTSTRAP_SAMPLES = 200


def with_percentile_bounds(m: Measurement, statistic, n: int, unit: str) -> Measurement:
    """``m`` with the 95% percentile bounds of ``statistic(indices)`` over ``BOOTSTRAP_SAMPLES`` resamples of its
    ``n`` ``unit`` (seed 0; a resample the statistic cannot measure is dropped), widened to hold the value itself,
    and a note in its detail; ``m`` as it is where too few resamples could be measured. For a discrete value (a
    count, share or depth whose resamples are lopsided) or a minimum over a set the sample may change (issue 61)."""
    lo, hi, kept = bootstrap_bounds(statistic, n, BOOTSTRAP_SAMPLES, seed=0, skip=(NotApplicable,))
    if np.isfinite(lo) and np.isfinite(hi):
        m.bounds = (min(lo, m.value), max(hi, m.value))
        m.detail += f" [bootstrap over the {n} {unit}, {kept} resamples: 95% percentile bounds]"
    return m



def resampled_bounds(m: Measurement, result, again, n: int, unit: str) -> Measurement:
    """``m`` with the percentile bounds (:func:`with_percentile_bounds`) of ``again(result.resample(idx))`` (a number,
    or a Measurement: its value) over a bootstrap of the ``n`` ``unit`` of any result with a ``resample(idx)``; ``m``
    as it is where there are fewer than two (or the pass kept no per-unit values: the caller passes 0)."""
    if n < 2:
        return m

    def statistic(idx):
        v = again(result.resample(idx))
        return v.value if isinstance(v, Measurement) else v

    return with_percentile_bounds(m, statistic, n, unit)


class ResampledMeans(Mapping):
    """``{name: per_segment[name][idx].mean(0)}`` for every statistic, each computed on first read (and kept): the
    same values, in the same operations, as the dict it stands for."""

    def __init__(self, per_segment: dict, idx) -> None:
        self._per_segment, self._idx, self._done = per_segment, idx, {}

    def __getitem__(self, name: str) -> torch.Tensor:
        if name not in self._done:
            self._done[name] = self._per_segment[name][self._idx].mean(0)
        return self._done[name]

    def __iter__(self):
        return iter(self._per_segment)

    def __len__(self) -> int:
        return len(self._per_segment)


@dataclass
class SurfaceResult:
    """Per-head means, each a ``(n_layers, n_heads)`` tensor on the CPU; ``n_segments`` / ``n_tokens`` = n."""

    stats: dict[str, torch.Tensor]
    n_segments: int
    n_tokens: int
    sep_chance: float  # mean over segments of n_sep / L (the separators' share of the tokens: chance)
    token_counts: torch.Tensor | None = None  # (vocab,) word-piece frequencies over the segments
    top_tokens: list = None  # [(piece, count)] most frequent first, special tokens excluded (set by the pass)
    # every statistic per segment, (n_segments, n_layers, n_heads) float32 (72 numbers per segment and statistic on
    # MiniLM, never a map): ``stats`` is their mean; the claims' bootstrap over segments resamples them
    per_segment: dict[str, torch.Tensor] | None = None
    sep_chance_per_segment: torch.Tensor | None = None  # (n_segments,)

    def resample(self, idx: torch.Tensor) -> "SurfaceResult":
        """The result over the segments ``idx`` (with repeats: one bootstrap sample), statistics only, each computed
        when first read (a claim reads one or two of the twelve: the bootstrap's 200 resamples per claim spent most
        of their time on the others, docs/results.md, stop 71)."""
        return SurfaceResult(stats=ResampledMeans(self.per_segment, idx),
                             n_segments=len(idx), n_tokens=self.n_tokens,
                             sep_chance=float(self.sep_chance_per_segment[idx].double().mean()),
                             token_counts=self.token_counts, top_tokens=self.top_tokens)

    def per_layer(self, name: str) -> torch.Tensor:
        """Mean over heads: Clark Fig. 2's per-layer curves."""
        return self.stats[name].mean(dim=1)

    @property
    def n_layers(self) -> int:
        return self.stats["entropy"].shape[0]


FIELDS = (
    "to_cls", "to_sep", "to_punct", "to_special", "self", "prev", "next",
    "entropy", "max_weight", "cls_entropy", "sep_to_sep", "other_to_sep",
)


def batch_masks(batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A batch's masks for :class:`SurfaceReducer`: ``(next_is_real (B, T), query_masks (B, FIELDS, T),
    query_counts (B, FIELDS), key_classes (B, 1, T, 3))``, float32.

    Clark's denominators (General_Analysis.ipynb of clarkkev/attention-analysis, commit b609cfc, the "Computing
    Average Attention" cell, file lines 132-151): previous/next token ("left"/"right", np.eye(n, n, -1/+1)), self,
    [CLS], [SEP] and punctuation are divided by n_tokens, all queries; "sep_sep" by the 2 [SEP] queries, "rest_sep"
    (other -> [SEP]) by the n - 2 others. So the first token's missing previous token (and the last token's missing
    next one) counts as 0, not as "not asked"."""
    mask = batch.token_mask
    next_is_real = torch.zeros_like(mask)
    next_is_real[:, :-1] = mask[:, 1:]  # query i has a real next token iff i+1 is real (never padding)
    query = {"all": mask, "cls_query": batch.is_cls, "sep_query": batch.is_sep, "other_query": mask & ~batch.is_sep}
    # which queries each statistic averages over, in FIELDS order (prev/next: every real query, see above)
    per_field = ("all",) * 9 + ("cls_query", "sep_query", "other_query")
    query_masks = torch.stack([query[q] for q in per_field], 1).to(torch.float32)  # (B, FIELDS, T)
    # the key classes as one (B, 1, T, 3) matrix: attention to [CLS], [SEP], punctuation in one product
    key_classes = torch.stack([batch.is_cls, batch.is_sep, batch.is_punct], -1).to(torch.float32)[:, None]
    return next_is_real.to(torch.float32), query_masks, query_masks.sum(-1).clamp(min=1), key_classes


class SurfaceReducer(Reducer):
    """Accumulates every §3 statistic per (layer, head) on the model's device.

    Issue 47: per layer the twelve per-query statistics are stacked and reduced to per-segment means in one masked
    sum (one mask per statistic, built per batch); the per-segment rows stay on the device, and the sums are made
    from them in :meth:`finalize` (the same float32 batch sums as before, so the same numbers). Nothing in the batch
    loop reads a value back to the host."""

    maps_only = True  # reads nothing but the maps: each forward pass may stop after the last one

    def __init__(self, n_layers: int, n_heads: int, device, vocab_size: int | None = None):
        self.n_layers, self.n_heads = n_layers, n_heads
        self.rows: list[list[torch.Tensor]] = [[] for _ in range(n_layers)]  # per layer: (B, H, FIELDS) per batch
        self.sep_chance_rows = []
        self.n_segments = 0
        self.n_tokens = torch.zeros((), dtype=torch.long, device=device)  # on device: no sync per batch
        self.sep_chance_sum = torch.zeros((), dtype=torch.float64, device=device)
        self.token_counts = torch.zeros(vocab_size, dtype=torch.long, device=device) if vocab_size else None

    def start_batch(self, batch, masks: tuple | None = None) -> tuple:
        """Count the batch and build its query and key masks; returns the masks, which another reducer of the
        same batch may pass as ``masks`` instead of building them again (the norms family's three readings)."""
        mask = batch.token_mask
        self.n_segments += mask.shape[0]
        lengths = mask.sum(-1)
        self.n_tokens += lengths.sum()
        if self.token_counts is not None:  # padding adds 0 (a fixed shape: no boolean index, no bincount)
            self.token_counts.index_add_(0, batch.input_ids.flatten(), mask.flatten().long())
        # chance for [SEP] = its share of the segment's tokens: 2 of L for BERT's [CLS] A [SEP] B [SEP], 3 for
        # RoBERTa-style <s> A </s></s> B </s> (counted from the input, never assumed)
        chance = batch.is_sep.sum(-1).double() / lengths.double()
        self.sep_chance_sum += chance.sum()
        self.sep_chance_rows.append(chance)
        masks = masks if masks is not None else batch_masks(batch)
        self.next_is_real, self.query_masks, self.query_counts, self.key_classes = masks
        return masks

    def update(self, layer: int, probs: torch.Tensor) -> None:
        p = probs.float()
        to = p @ self.key_classes  # (B, H, T, 3)
        to_cls, to_sep, to_punct = to[..., 0], to[..., 1], to[..., 2]
        entropy = torch.special.entr(p).sum(-1)  # -p log p, 0 at 0: as -xlogy(p, p), bit for bit
        diag = p.diagonal(dim1=-2, dim2=-1)
        prev = torch.nn.functional.pad(p.diagonal(offset=-1, dim1=-2, dim2=-1), (1, 0))
        nxt = torch.nn.functional.pad(p.diagonal(offset=1, dim1=-2, dim2=-1), (0, 1)) * self.next_is_real[:, None]
        values = torch.stack([to_cls, to_sep, to_punct, to_cls + to_sep + to_punct, diag, prev, nxt, entropy,
                              p.amax(-1), entropy, to_sep, to_sep], 2)  # (B, H, FIELDS, T), in FIELDS order
        per_segment = (values * self.query_masks[:, None]).sum(-1) / self.query_counts[:, None]  # (B, H, FIELDS)
        self.rows[layer].append(per_segment)

    def finalize(self) -> SurfaceResult:
        n = max(self.n_segments, 1)
        sums = {k: torch.zeros(self.n_layers, self.n_heads, dtype=torch.float64) for k in FIELDS}
        per_segment = {}
        for j, k in enumerate(FIELDS):
            for layer, rows in enumerate(self.rows):
                for r in rows:  # each batch's float32 sum over its segments, then the float64 total (as always)
                    sums[k][layer] += r[..., j].contiguous().sum(0).double().cpu()
            if self.n_segments:
                per_segment[k] = torch.stack([torch.cat([r[..., j] for r in rows]) for rows in self.rows],
                                             1).float().cpu()
        return SurfaceResult(
            stats={k: (v / n).float() for k, v in sums.items()},
            n_segments=self.n_segments,
            n_tokens=int(self.n_tokens),
            sep_chance=float(self.sep_chance_sum) / n,
            token_counts=None if self.token_counts is None else self.token_counts.cpu(),
            per_segment=per_segment if self.n_segments else None,
            sep_chance_per_segment=torch.cat(self.sep_chance_rows).float().cpu() if self.n_segments else None,
        )


def segments_pass(loaded: LoadedModel, data_dir: Path, corpus: str = "wikitext2", max_tokens: int = 128,
                  limit: int | None = None, batch_size: int = 32) -> PreparedPass:
    """The surface pass (Clark §3): segments of at most ``max_tokens`` pieces, by default built as the authors'
    preprocess_unlabeled.py builds them (see :mod:`bertattn_bench.data.segments` for the recipe and the named
    alternatives), each reduced by a :class:`SurfaceReducer`. The surface family registers it; the clustering
    family takes its segments with its own reducer."""
    from ...data.segments import load_segment_set

    max_tokens = min(max_tokens, loaded.info.max_positions)
    segs = load_segment_set(data_dir, corpus, loaded.tokenizer, max_tokens, limit)
    info, tok = loaded.info, loaded.tokenizer

    def finish(result):
        counts = result.token_counts.clone()
        counts[tok.all_special_ids] = 0
        top = torch.topk(counts, 20)
        result.top_tokens = list(zip(tok.convert_ids_to_tokens(top.indices.tolist()), top.values.tolist()))
        return result

    return PreparedPass("surface", corpus, segs.description, loaded, segs.encoded, segs.skipped,
                        lambda: SurfaceReducer(info.n_layers, info.n_heads, info.device, len(tok)),
                        finish=finish, batch_size=batch_size, data_paths=[data_dir / SEGMENT_CORPORA[corpus]])
