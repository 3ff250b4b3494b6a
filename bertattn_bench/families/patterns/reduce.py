"""Kovaleva §4.1/§4.4 (the patterns family): the reducers (map types per head; attention to special tokens and UD
word features) and their results."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from ...engine.attention import Reducer
from ...engine.batching import to_device
from ..common.head_maps import map_masks, neighbour_mass
from .constants import CLS_CLASSES, LING, RISE, SPECIAL, TYPES, UD_FEATURES
from .maps import classify, map_features, masked_max_each, received

# ---- reducers ----------------------------------------------------------------------------------------------------

class PatternReducer(Reducer):
    """GLUE task pass: type counts, map features, the §4.4 special-token scores, the [CLS] row, typical maps."""

    maps_only = True  # reads nothing but the maps: each forward pass may stop after the last one

    def __init__(self, n_layers: int, n_heads: int, device, keep_examples: bool = True, max_len_example: int = 48):
        z = lambda *s: torch.zeros(*s, dtype=torch.float64, device=device)  # noqa: E731
        self.counts, self.feats = z(n_layers, n_heads, len(TYPES)), z(n_layers, n_heads, 3)
        self.special, self.has = z(n_layers, n_heads, len(SPECIAL)), z(len(SPECIAL))
        self.to_special = z(n_layers, n_heads, 2)
        self.cls_row = z(n_layers, n_heads, len(CLS_CLASSES))
        # per token: the [CLS] row's mean weight on a token of each class (class mass / its tokens), summed over the
        # examples that have the class (the detail of kov.cls_final_layer_target; the claim reads cls_row_max)
        self.cls_row_tok, self.cls_has = z(n_layers, n_heads, len(CLS_CLASSES)), z(len(CLS_CLASSES))
        # the notebook's cls_last_layer (visualize_attention.ipynb cell 53): per head and example, the [CLS] row's
        # largest weight on a token of each class (max over the class's tokens: [CLS] = position 0, [SEP] = max of
        # the two [SEP]s), summed over the examples that have the class; and per example the mean over heads (nan
        # where the example lacks the class), for a paired SE
        self.cls_row_max = z(n_layers, n_heads, len(CLS_CLASSES))
        self.cls_max_rows: list[list[torch.Tensor]] = [[] for _ in range(n_layers)]
        self.length_rows: list[torch.Tensor] = []  # per example: real tokens (the §4.4 score's divisor)
        # per layer and example, the maps of each type (summed over heads): the bootstrap over examples of the shares
        self.type_rows: list[list[torch.Tensor]] = [[] for _ in range(n_layers)]
        # the §4.4 score made length-free: attention received x input length (1 under uniform attention)
        self.special_free = z(n_layers, n_heads, len(SPECIAL))
        self.sep_free_rows: list[list[torch.Tensor]] = [[] for _ in range(n_layers)]  # per example, mean over heads
        # per layer and example, the §4.4 score of [CLS], [SEP], punctuation, mean over heads (nan: the example has
        # no such token): the bootstrap over examples of the depth claims (issue 61)
        self.special_rows: list[list[torch.Tensor]] = [[] for _ in range(n_layers)]
        # §5 word match: attention from a token to the identical tokens of the other sentence, and what uniform
        # attention would give them (matches / input length), over the queries that have a match
        self.match_mass, self.match_expected = z(n_layers, n_heads), z(1)
        self.match_queries = torch.zeros((), dtype=torch.long, device=device)  # on the device: no sync per batch
        self.n = 0
        self.keep_examples, self.max_len = keep_examples, max_len_example
        # the most typical map of each type so far, kept on the device (Fig. 1): score, layer, head, real tokens,
        # features, the map and the ids padded to max_len (a candidate has at most max_len real tokens)
        k, t = len(TYPES), max_len_example
        self.best_score = torch.full((k,), float("-inf"), device=device)
        self.best_where = torch.zeros(k, 3, dtype=torch.long, device=device)  # layer, head, real tokens
        self.best_features = torch.zeros(k, 3, device=device)
        self.best_map = torch.zeros(k, t, t, device=device)
        self.best_ids = torch.zeros(k, t, dtype=torch.long, device=device)

    def start_batch(self, batch) -> None:
        self.m = map_masks(batch)
        self.batch = batch
        self.n += batch.input_ids.shape[0]
        real = batch.token_mask
        self.tok = {"[CLS]": batch.is_cls & real, "[SEP]": batch.is_sep & real, "punct": batch.is_punct & real}
        self.tok_masks = torch.stack([self.tok[k] for k in SPECIAL], 1)  # (B, 3, T)
        self.tok_has = self.tok_masks.any(-1)  # (B, 3)
        self.tok_absent = ~self.tok_has  # once per batch: the per-example scores' nan
        self.has += self.tok_has.sum(0).double()
        self.cls_pos = batch.is_cls.float().argmax(-1)  # the first [CLS] of each row
        other = real & ~batch.is_cls & ~batch.is_sep & ~batch.is_punct
        self.cls_keys = torch.stack([self.tok["[CLS]"], self.tok["[SEP]"], self.tok["punct"], other], -1).float()
        self.cls_masks = self.cls_keys.transpose(1, 2).bool()  # (B, 4, T)
        self.cls_count = self.cls_keys.sum(1)  # (B, 4) tokens of each class
        self.cls_sep_keys = torch.stack([self.tok["[CLS]"], self.tok["[SEP]"]], -1).float()[:, None]  # (B, 1, T, 2)
        ords = self.m.ordinary.bool() & ~batch.is_punct
        ids = batch.input_ids
        self.match = ((ids[:, :, None] == ids[:, None, :]) & ords[:, :, None] & ords[:, None, :]
                      & (self.m.seg[:, :, None] != self.m.seg[:, None, :])).float()  # (B, Tq, Tk)
        n_match = self.match.sum(-1)  # (B, T)
        self.match_expected += (n_match / self.m.n_real.clamp(min=1)[:, None]).sum().double()
        self.match_queries += (n_match > 0).sum()
        self.cls_has += (self.cls_count > 0).sum(0).double()
        self.length_rows.append(self.m.n_real.double())
        self.short = real.sum(-1) <= self.max_len

    def update(self, layer: int, probs: torch.Tensor) -> None:
        m = self.m
        v, d, b = map_features(probs, m)
        types = classify(v, d, b)
        onehot = types.unsqueeze(-1) == torch.arange(len(TYPES), device=types.device)  # (B, H, types)
        self.counts[layer] += onehot.sum(0).double()
        self.type_rows[layer].append(onehot.sum(1).to(torch.int16))  # per example: its maps of each type
        self.feats[layer] += torch.stack([v, d, b], -1).sum(0).double()
        col = received(probs, m)
        scores = masked_max_each(col, self.tok_masks)  # (B, H, 3)
        self.special[layer] += (scores * self.tok_has[:, None, :]).sum(0).double()
        self.special_rows[layer].append(scores.mean(1).masked_fill(self.tok_absent, float("nan")))
        free = scores * m.n_real[:, None, None].float()
        self.special_free[layer] += (free * self.tok_has[:, None, :]).sum(0).double()
        self.sep_free_rows[layer].append(free[..., 1].mean(1).double())
        p = probs.float()
        to = p @ self.cls_sep_keys  # (B, H, T, 2): to [CLS], to [SEP]
        to = torch.stack([to[..., 0], to[..., 1]], 2)  # (B, H, 2, T)
        nq = m.n_real.clamp(min=1)[:, None, None]
        self.to_special[layer] += ((to * m.real[:, None, None]).sum(-1) / nq).sum(0).double()
        rows = p[torch.arange(p.shape[0], device=p.device), :, self.cls_pos]  # (B, H, T)
        self.match_mass[layer] += torch.einsum("bhqk,bqk->h", p, self.match).double()
        mass = torch.einsum("bhk,bkc->bhc", rows, self.cls_keys)  # (B, H, 4)
        self.cls_row[layer] += mass.sum(0).double()
        self.cls_row_tok[layer] += (mass / self.cls_count.clamp(min=1)[:, None, :]).sum(0).double()
        has = self.cls_count > 0  # (B, 4)
        top = masked_max_each(rows, self.cls_masks)  # (B, H, 4)
        self.cls_row_max[layer] += (top * has[:, None, :]).sum(0).double()
        self.cls_max_rows[layer].append(top.mean(1).masked_fill(~has, float("nan")).double())
        if self.keep_examples:
            self._keep(layer, probs, types, v, d, b)

    def _keep(self, layer, probs, types, v, d, b) -> None:
        """The most typical map of each type so far (Fig. 1), preferring short inputs (readable): per type the
        first best (row, head) of this layer, kept where it beats the best so far, all on the device."""
        score = torch.stack([v - d, d - v, torch.minimum(v, d), b, 1 - (v + d) - b.clamp(min=0)])  # TYPES order
        ok = (types == torch.arange(len(TYPES), device=types.device).view(-1, 1, 1)) & self.short[:, None]
        s = score.masked_fill(~ok, float("-inf")).flatten(1)  # (K, B*H)
        best = s.argmax(1)  # the first maximum (row-major over batch row, head), as before
        value = s.gather(1, best[:, None]).squeeze(1)
        better = value > self.best_score  # a type with no candidate here has -inf: never better
        row, head = best // v.shape[1], best % v.shape[1]
        t = min(self.max_len, probs.shape[-1])
        maps = torch.zeros_like(self.best_map)
        maps[:, :t, :t] = probs[row, head, :t, :t].float()
        ids = torch.zeros_like(self.best_ids)
        ids[:, :t] = self.batch.input_ids[row, :t]
        where = torch.stack([torch.full_like(row, layer), head, self.m.n_real[row].long()], 1)
        feats = torch.stack([v[row, head], d[row, head], b[row, head]], 1).float()
        self.best_score = torch.where(better, value, self.best_score)
        self.best_where = torch.where(better[:, None], where, self.best_where)
        self.best_features = torch.where(better[:, None], feats, self.best_features)
        self.best_map = torch.where(better[:, None, None], maps, self.best_map)
        self.best_ids = torch.where(better[:, None], ids, self.best_ids)

    def _examples(self) -> dict:
        """The kept maps as the figures read them (type -> score, layer, head, map, ids, features)."""
        out = {}
        score, where, feats = self.best_score.cpu(), self.best_where.cpu(), self.best_features.cpu()
        maps, ids = self.best_map.cpu(), self.best_ids.cpu()
        for k, name in enumerate(TYPES):
            if not torch.isfinite(score[k]):
                continue
            layer, head, n = (int(x) for x in where[k])
            out[name] = {"score": float(score[k]), "layer": layer, "head": head, "map": maps[k, :n, :n].numpy(),
                         "ids": ids[k, :n].tolist(), "features": tuple(float(x) for x in feats[k])}
        return out

    def finalize(self) -> "PatternStats":
        n = max(self.n, 1)
        match_queries = int(self.match_queries)
        has = self.has.clamp(min=1)
        return PatternStats(
            counts=self.counts.cpu().numpy(), features=(self.feats / n).cpu().numpy(),
            special=(self.special / has).cpu().numpy(), n_special=self.has.long().cpu().numpy(),
            to_special=(self.to_special / n).cpu().numpy(), cls_row=(self.cls_row / n).cpu().numpy(),
            n_examples=self.n, examples=self._examples() if self.keep_examples else {},
            cls_row_token=(self.cls_row_tok / self.cls_has.clamp(min=1)).cpu().numpy(),
            n_cls_class=self.cls_has.long().cpu().numpy(),
            special_free=(self.special_free / has).cpu().numpy(),
            cls_row_max=(self.cls_row_max / self.cls_has.clamp(min=1)).cpu().numpy(),
            cls_max_examples=(torch.stack([torch.cat(r) for r in self.cls_max_rows], 1).cpu().numpy()
                              if self.cls_max_rows and self.cls_max_rows[0] else None),
            example_lengths=torch.cat(self.length_rows).cpu().numpy() if self.length_rows else None,
            example_counts=(torch.stack([torch.cat(r) for r in self.type_rows]).sum(0).cpu().numpy()
                            if self.type_rows and self.type_rows[0] else None),
            special_examples=(torch.stack([torch.cat(r) for r in self.special_rows], 1).cpu().numpy()
                              if self.special_rows and self.special_rows[0] else None),
            sep_free_examples=(torch.stack([torch.cat(r) for r in self.sep_free_rows]).cpu().mean(0).numpy()
                               if self.sep_free_rows and self.sep_free_rows[0] else np.zeros(0)),
            word_match=(self.match_mass / self.match_expected.clamp(min=1e-12)).cpu().numpy()
            if match_queries else None, n_match_queries=match_queries)


class FeatureReducer(Reducer):
    """UD pass: the §4.4 feature scores per head, verb → subject attention (§4.5) and the ±1 mass ``d``."""

    maps_only = True  # reads nothing but the maps: each forward pass may stop after the last one

    def __init__(self, flags: dict[int, np.ndarray], arcs: dict[int, list[tuple[int, int]]], n_layers: int,
                 n_heads: int, device, control: dict[int, np.ndarray] | None = None):
        z = lambda *s: torch.zeros(*s, dtype=torch.float64, device=device)  # noqa: E731
        self.flags, self.arcs = flags, arcs
        self.sums, self.has = z(n_layers, n_heads, len(UD_FEATURES)), z(len(UD_FEATURES))
        self.nsubj, self.diag = z(n_layers, n_heads), z(n_layers, n_heads)
        self.n, self.n_arcs = 0, 0
        self.device = device
        self.pending: list = []  # per batch and layer: (example indices, per-sentence scores, control's, ±1 mass,
        # verb -> subject attention summed over the sentence's arcs)
        self.arcs_per_sentence = np.zeros(max(flags, default=-1) + 1, dtype=np.int64)
        self.seen = np.zeros(max(flags, default=-1) + 1, dtype=bool)
        # per sentence (by example index), the noun and object scores of every head, nan where the sentence has
        # none: the paired test of "fine-tuning raises attention to nouns / objects" (ling_vs_special)
        self.per_sentence = np.full((max(flags, default=-1) + 1, n_layers, n_heads, len(RISE)), np.nan,
                                    dtype=np.float32)
        # the control class's score (RISE_CONTROL: determiners) per sentence and head, nan without one: a rise of
        # the noun/object score counts only when it beats the control's rise on the same sentences
        self.control = control
        self.per_sentence_control = (None if control is None else
                                     np.full(self.per_sentence.shape[:3], np.nan, dtype=np.float32))

    def start_batch(self, batch) -> None:
        self.m = map_masks(batch)
        self.batch = batch
        b, w = batch.word_mask.shape
        self.n += b
        wf = np.zeros((b, w, len(LING)), dtype=bool)
        arcs = []
        for i, e in enumerate(batch.examples):
            f = self.flags[e.index]
            wf[i, :f.shape[0]] = f
            arcs += [(i, v, s) for v, s in self.arcs.get(e.index, [])]
        real = batch.token_mask
        dev = batch.word_mask.device
        self.word_flags = to_device(wf, dev) & batch.word_mask[:, :, None]
        # a feature's pieces: every piece of a word with the feature; its score is the max over them (the
        # notebook's get_max_target_weight over token ids), so a many-piece word gets no sum over its pieces
        self.piece_flags = torch.einsum("btw,bwk->btk", (batch.word_to > 0).float(), self.word_flags.float()) > 0
        if self.control is not None:
            cf = np.zeros((b, w), dtype=bool)
            for i, e in enumerate(batch.examples):
                c = self.control[e.index]
                cf[i, :c.shape[0]] = c
            cw = to_device(cf, dev) & batch.word_mask
            self.control_pieces = torch.einsum("btw,bw->bt", (batch.word_to > 0).float(), cw.float()) > 0
        self.tok = [batch.is_cls & real, batch.is_sep & real]
        # every feature's pieces as one (B, F, T) mask, in UD_FEATURES order: [CLS], [SEP], then LING
        self.feat_masks = torch.cat([torch.stack(self.tok, 1), self.piece_flags.transpose(1, 2)], 1)
        self.feat_has = torch.cat([torch.stack([t.any(-1) for t in self.tok], -1), self.word_flags.any(1)], -1)
        self.has += self.feat_has.sum(0).double()
        self.arc_idx = to_device(np.array(arcs, dtype=np.int64).reshape(-1, 3), dev)
        self.n_arcs += len(arcs)
        self.rows_of = [e.index for e in batch.examples]  # where this batch's per-sentence rows go (finalize)
        self.seen[self.rows_of] = True
        for i, _, _ in arcs:
            self.arcs_per_sentence[self.rows_of[i]] += 1

    def update(self, layer: int, probs: torch.Tensor) -> None:
        m, batch = self.m, self.batch
        col = received(probs, m)  # (B, H, T)
        s = masked_max_each(col, self.feat_masks)  # (B, H, F)
        self.sums[layer] += (s * self.feat_has[:, None, :]).sum(0).double()
        vals = s.masked_fill(~self.feat_has[:, None, :], float("nan")).float()  # every feature, per sentence
        ctl = None
        if self.control is not None:
            ctl = masked_max_each(col, self.control_pieces[:, None])[..., 0]
            ctl = ctl.masked_fill(~self.control_pieces.any(-1)[:, None], float("nan")).float()
        diag = neighbour_mass(probs, m)  # (B, H)
        self.diag[layer] += diag.sum(0).double()
        att_sum = torch.zeros_like(diag)
        if self.arc_idx.shape[0]:
            a = self.arc_idx
            p = probs.float()
            # word-level attention from verb v to subject s, only for the arcs: from = mean over v's pieces
            rows = torch.einsum("nt,nhtk->nhk", batch.word_from[a[:, 0], a[:, 1]], p[a[:, 0]])  # (N, H, T)
            att = torch.einsum("nhk,nk->nh", rows, batch.word_to[a[:, 0], :, a[:, 2]])
            self.nsubj[layer] += att.sum(0).double()
            att_sum = att_sum.index_add(0, a[:, 0], att.to(att_sum.dtype))
        self.pending.append((self.rows_of, layer, vals, ctl, diag.float(), att_sum.float()))  # on the device

    def finalize(self) -> "FeatureStats":
        N, L, H, _ = self.per_sentence.shape
        scores = np.full((N, L, H, len(UD_FEATURES)), np.nan, dtype=np.float32)
        diag, nsubj = np.zeros((N, L, H), dtype=np.float32), np.zeros((N, L, H), dtype=np.float32)
        rise = [UD_FEATURES.index(f) for f in RISE]
        for rows_of, layer, vals, ctl, d, att in self.pending:
            v = vals.cpu().numpy()
            scores[rows_of, layer] = v
            self.per_sentence[rows_of, layer] = v[..., rise]
            diag[rows_of, layer], nsubj[rows_of, layer] = d.cpu().numpy(), att.cpu().numpy()
            if ctl is not None:
                self.per_sentence_control[rows_of, layer] = ctl.cpu().numpy()
        self.pending = []
        seen = self.seen
        return FeatureStats(scores=(self.sums / self.has.clamp(min=1)).cpu().numpy(),
                            n_has=self.has.long().cpu().numpy(), nsubj=(self.nsubj / max(self.n_arcs, 1)).cpu().numpy(),
                            n_arcs=self.n_arcs, diag=(self.diag / max(self.n, 1)).cpu().numpy(), n_sentences=self.n,
                            per_sentence=self.per_sentence, per_sentence_control=self.per_sentence_control,
                            scores_per_sentence=scores[seen], diag_per_sentence=diag[seen],
                            nsubj_sum_per_sentence=nsubj[seen], arcs_per_sentence=self.arcs_per_sentence[seen])


@dataclass
class PatternStats:
    counts: np.ndarray  # (L, H, 5) maps of each type
    features: np.ndarray  # (L, H, 3) mean v, d, b
    special: np.ndarray  # (L, H, 3) the §4.4 score of [CLS], [SEP], punctuation
    n_special: np.ndarray  # (3,) inputs with each
    to_special: np.ndarray  # (L, H, 2) mean share of a query's attention on [CLS], on [SEP]
    cls_row: np.ndarray  # (L, H, 4) the [CLS] query row on [CLS], [SEP], punctuation, other
    n_examples: int
    examples: dict = field(default_factory=dict)  # type -> the most typical map (Fig. 1)
    cls_row_token: np.ndarray | None = None  # (L, H, 4) the [CLS] row's weight per token of each class
    n_cls_class: np.ndarray | None = None  # (4,) examples with each class
    special_free: np.ndarray | None = None  # (L, H, 3) the §4.4 score x input length (1 = uniform attention)
    sep_free_examples: np.ndarray | None = None  # (N,) per example: the length-free [SEP] score, mean over heads
    word_match: np.ndarray | None = None  # (L, H) attention to identical tokens of the other sentence / uniform's
    n_match_queries: int = 0  # tokens with an identical token in the other sentence
    cls_row_max: np.ndarray | None = None  # (L, H, 4) the [CLS] row's max weight over each class's tokens (cell 53)
    cls_max_examples: np.ndarray | None = None  # (N, L, 4) the same per example, mean over heads; nan: no such token
    example_lengths: np.ndarray | None = None  # (N,) real tokens of each example (order of sep_free_examples)
    example_counts: np.ndarray | None = None  # (N, 5) each example's maps of each type, over layers and heads
    special_examples: np.ndarray | None = None  # (N, L, 3) each example's §4.4 scores, mean over heads; nan: none

    def resample(self, idx: np.ndarray) -> "PatternStats":
        """The type counts over the examples ``idx`` (with repeats: one bootstrap sample); the other fields as they
        are (only the shares are read from a resample)."""
        total = self.example_counts[idx].sum(0).astype(float)  # (5,)
        return PatternStats(counts=total[None, None, :], features=self.features, special=self.special,
                            n_special=self.n_special, to_special=self.to_special, cls_row=self.cls_row,
                            n_examples=len(idx))

    @property
    def n_maps(self) -> int:
        return int(self.counts.sum())

    def shares(self) -> np.ndarray:
        return self.counts.sum((0, 1)) / max(self.counts.sum(), 1)


@dataclass
class FeatureStats:
    scores: np.ndarray  # (L, H, F) the §4.4 score of each UD_FEATURES entry
    n_has: np.ndarray  # (F,) sentences with each feature
    nsubj: np.ndarray  # (L, H) mean attention verb -> its nominal subject
    n_arcs: int
    diag: np.ndarray  # (L, H) mean ±1-neighbour mass
    n_sentences: int
    per_sentence: np.ndarray | None = None  # (N, L, H, len(RISE)) per sentence, nan without the feature
    per_sentence_control: np.ndarray | None = None  # (N, L, H) the RISE_CONTROL class's score, nan without it
    # the sentences read, in example order (issue 61: the bootstrap over sentences): every feature's score (nan: the
    # sentence has none), the ±1 mass, the verb -> subject attention summed over the sentence's arcs, its arcs
    scores_per_sentence: np.ndarray | None = None  # (n, L, H, F)
    diag_per_sentence: np.ndarray | None = None  # (n, L, H)
    nsubj_sum_per_sentence: np.ndarray | None = None  # (n, L, H)
    arcs_per_sentence: np.ndarray | None = None  # (n,)

    def resample(self, idx: np.ndarray) -> "FeatureStats":
        """The scores, ±1 mass and verb -> subject attention over the sentences ``idx`` (with repeats: one bootstrap
        sample), each as the pooled one is made from the sentences: a mean over those with the feature, over all,
        over the arcs."""
        import warnings

        sc = self.scores_per_sentence[idx]
        with warnings.catch_warnings():  # a feature no resampled sentence has: nan, as the pooled score's 0 / 0
            warnings.simplefilter("ignore", RuntimeWarning)
            scores = np.nanmean(sc, 0)
        arcs = int(self.arcs_per_sentence[idx].sum())
        return FeatureStats(scores=np.nan_to_num(scores), n_has=(~np.isnan(sc[:, 0, 0])).sum(0),
                            nsubj=self.nsubj_sum_per_sentence[idx].sum(0) / max(arcs, 1), n_arcs=arcs,
                            diag=self.diag_per_sentence[idx].mean(0), n_sentences=len(idx))


@dataclass
class ModelStats:
    label: str  # "pre-trained" / "fine-tuned on mrpc (seed 0)"
    glue: PatternStats
    ud: FeatureStats


@dataclass
class PatternsResult:
    task: str
    is_pair: bool
    tier: str
    n_dev: int
    n_dev_total: int
    ud_corpus: str
    pretrained: ModelStats
    finetuned: ModelStats | None
    ft_note: str
    sink: str  # the special token the pre-trained model attends to most on this task ([CLS] or [SEP])
    n_layers: int
    n_heads: int
