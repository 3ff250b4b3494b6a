"""Kovaleva et al. 2019 §4.1 (five attention-map types), §4.4 (attention to special tokens and linguistic features)
and §4.5 (token-to-token attention, the final layer's [CLS] row), on GLUE dev sets and UD English EWT.

**Map types (§4.1).** The authors' CNN and its ~400 hand labels were never released (kovaleva2019-methods-notes.md
§2), so every map (one example, one head) is typed by a stated rule on three features reduced on the device, each
a mean over the map's real query rows (padding never enters):

* ``v``: mass on the special-token columns ([CLS] and every [SEP]: the tokenizer's cls/sep tokens, whichever of
  them is the model's sink);
* ``d``: mass on the previous and next token (the ±1 diagonals), special-token keys excluded (counted in ``v``);
* ``b``: for sentence pairs, how much of a query's attention to ordinary tokens stays in its own sentence, chance-
  corrected: ``(own share - c) / (1 - c)`` with ``c`` the own sentence's share of the ordinary tokens (what uniform
  attention gives), averaged over the ordinary queries; 0 for single sentences (no block type there).

Rule (thresholds :data:`STRUCTURED`, :data:`MIX`, :data:`BLOCK`): a map with ``v + d >= 0.5`` (most of its mass on
special tokens and neighbours) is *vertical* when ``d`` is under a quarter of ``v + d``, *diagonal* when ``v`` is,
else *vertical+diagonal*; an unstructured map of a pair whose ``b >= 0.6`` is *block*; everything else is
*heterogeneous* (so the five types are exhaustive, as the paper's). Uniform attention over n tokens has
``v ~ 3/n``, ``d ~ 2/n``, ``b = 0``: heterogeneous. Why these thresholds: 0.5 = the map's majority of mass is
explained by the two "pre-training" patterns (the paper's first three types); a quarter of that mass is the least a
second component needs to be visible as a mix (Fig. 1's vertical+diagonal example shows both clearly); 0.6 = well
clear of chance (0) and of an even blend of own-sentence and uniform attention (b = 0.5), so only maps whose rows
mostly stay inside their sentence are blocks. No labels exist to tune them on (the paper's ~400 were not released):
they are fixed here, proved on planted maps and mixtures on both sides of each (tests/test_patterns.py), and the
measured shares are reported with n.

**Features (§4.4)**: the paper's score of a feature in one head and input: the attention the feature's token
receives from every input token, summed and divided by the input's length, the maximum over the tokens of that type
when there are several (two [SEP]s in a pair, several nouns); inputs without the feature are left out. [CLS],
[SEP] and punctuation on the GLUE task; nouns (NOUN, PROPN), pronouns, verbs, subjects (nsubj, nsubj:pass), direct
objects (obj), punctuation and the footnote's negation words on UD EWT (GLUE has no tags, and no tagger runs
offline; UD splits "don't" into "do" + "n't", so the footnote's contractions are its "n't" word).

**§4.5**: per head the attention from a verb to its nominal subject (word level: from = mean over the verb's pieces,
to = sum over the subject's pieces, Clark §4.1) on UD EWT, beside the head's ±1-neighbour mass ``d``; and the final
layer's [CLS] query row split into [CLS], [SEP], punctuation and other tokens.

Each pass runs the pre-trained model and, where the tier has one, the fine-tuned checkpoint of the task (from
``finetune``'s cache, the same as the ``finetune``/``disable`` families: regression tier MRPC seed 0;
``BERTATTN_SEED=k`` reads seed k's checkpoint instead, which is how scripts/spread.py measures the seed spread behind
the fine-tuned claims' tolerances).
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from .. import finetune
from ..attention import Reducer, head_name, run_reducers
from ..batching import Skipped, drop_too_long, encode_words, iter_batches
from ..data import glue
from ..errors import DataError
from ..passes import NothingToMeasure, PassResult
from ..plotting import pyplot, save_figure
from ..registry import Measurement, NotApplicable, family, figure, metric, relative_depth
from ..stats import difference_se, mean_se
from ..settings import training_seed
from .finetuned import GLUE_TASKS, TIERS, options_of, recipe_for

TYPES = ("vertical", "diagonal", "vertical+diagonal", "block", "heterogeneous")
STRUCTURED = 0.5  # v + d: the majority of a map's mass on special tokens and neighbours
MIX = 0.25  # a component under a quarter of v + d makes the map pure (vertical or diagonal), else a mix
BLOCK = 0.6  # chance-corrected own-sentence share: 0 = uniform, 1 = every query stays in its own sentence
DEV_MAX = 1000  # Kovaleva §4.1: up to 1000 examples of each dev set (a seeded sample of larger ones)
TIER_DEV_MAX = {"quick": 100, "regression": 300, "full": DEV_MAX}  # MRPC dev examples (quick: the CI smoke run)
TIER_UD_MAX = {"quick": 100, "regression": 300, "full": None}  # UD EWT dev sentences for the linguistic features (None: all 2,001)
UD_CORPUS = "ewt_dev"
TIER_CORPORA = {"quick": ("mrpc",), "regression": ("mrpc",), "full": GLUE_TASKS}
SPECIAL = ("[CLS]", "[SEP]", "punct")  # GLUE features (token level)
LING = ("punct", "noun", "pronoun", "verb", "subject", "object", "negation")  # UD word features
UD_FEATURES = ("[CLS]", "[SEP]") + LING
# Kovaleva fn. 6; UD EWT/GUM split the contractions (don't, won't, ...) into their verb and "n't"
NEGATION = frozenset({"neither", "nor", "not", "never", "none", "nothing", "nowhere", "n't", "don't", "won't",
                      "didn't", "hadn't", "haven't", "can't", "isn't", "wasn't", "shouldn't", "couldn't"})
CLS_CLASSES = ("[CLS]", "[SEP]", "punct", "other")
RISE = ("noun", "object")  # §4.4: fine-tuning raises attention to nouns and direct objects (MRPC, RTE, QQP)
RISE_ALPHA = 0.05


# ---- the map rule ------------------------------------------------------------------------------------------------

@dataclass
class MapMasks:
    real: torch.Tensor  # (B, T) float
    special: torch.Tensor  # (B, T) float: [CLS] and [SEP] keys
    ordinary: torch.Tensor  # (B, T) float
    own: torch.Tensor  # (B, T, T) float: query and key ordinary and in the same sentence
    chance: torch.Tensor  # (B, T): own sentence's share of the ordinary tokens
    block_queries: torch.Tensor  # (B, T) float: ordinary queries with another sentence beside them
    n_real: torch.Tensor  # (B,)
    seg: torch.Tensor | None = None  # (B, T) long: the sentence of each token (how many [SEP]s come before it)


def map_masks(batch) -> MapMasks:
    """Masks of one padded batch; the sentence of a token = how many [SEP]s come before it."""
    real = batch.token_mask
    sep = batch.is_sep.long()
    special = (batch.is_cls | batch.is_sep) & real
    ordinary = real & ~special
    seg = torch.cumsum(sep, -1) - sep
    own = (seg[:, :, None] == seg[:, None, :]) & ordinary[:, :, None] & ordinary[:, None, :]
    n_ord = ordinary.sum(-1, keepdim=True).clamp(min=1)
    chance = own.sum(-1) / n_ord
    block_q = ordinary & (chance < 1 - 1e-9)
    return MapMasks(real.float(), special.float(), ordinary.float(), own.float(), chance.float(), block_q.float(),
                    real.sum(-1).float(), seg)


def neighbour_mass(probs: torch.Tensor, m: MapMasks) -> torch.Tensor:
    """``d`` of each map, ``(B, H)``: the mean over its real query rows of the mass on the ±1 neighbours (keys that
    are ordinary tokens; [CLS]/[SEP] keys excluded, so a sink next to a token does not count as diagonal)."""
    p = probs.float()
    real, ordk = m.real, m.ordinary
    nq = m.n_real.clamp(min=1)[:, None]
    prev = p.diagonal(offset=-1, dim1=-2, dim2=-1)  # [q+1, q]: query q+1, key q
    nxt = p.diagonal(offset=1, dim1=-2, dim2=-1)  # [q, q+1]
    return ((prev * (ordk[:, :-1] * real[:, 1:])[:, None]).sum(-1)
            + (nxt * (ordk[:, 1:] * real[:, :-1])[:, None]).sum(-1)) / nq


def map_features(probs: torch.Tensor, m: MapMasks) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(v, d, b)``, each ``(B, H)``: means over each map's real query rows (see the module docstring)."""
    p = probs.float()
    real, ordk = m.real, m.ordinary
    nq = m.n_real.clamp(min=1)[:, None]
    v = (torch.einsum("bhqk,bk->bhq", p, m.special) * real[:, None]).sum(-1) / nq
    d = neighbour_mass(p, m)
    own = torch.einsum("bhqk,bqk->bhq", p, m.own)
    ordm = torch.einsum("bhqk,bk->bhq", p, ordk)
    c = m.chance[:, None]
    share = torch.where(ordm > 1e-6, own / ordm.clamp(min=1e-12), c)
    excess = (share - c) / (1 - c).clamp(min=1e-9)
    bq = m.block_queries[:, None]
    b = (excess * bq).sum(-1) / bq.sum(-1).clamp(min=1)
    return v, d, b


def classify(v: torch.Tensor, d: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Type index (into :data:`TYPES`) of each map from its features (same shapes)."""
    s = v + d
    structured = s >= STRUCTURED
    dshare = d / s.clamp(min=1e-12)
    out = torch.full(v.shape, TYPES.index("heterogeneous"), dtype=torch.long, device=v.device)
    out[~structured & (b >= BLOCK)] = TYPES.index("block")
    out[structured] = TYPES.index("vertical+diagonal")
    out[structured & (dshare < MIX)] = TYPES.index("vertical")
    out[structured & (dshare > 1 - MIX)] = TYPES.index("diagonal")
    return out


def _masked_max(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """values (B, H, N), mask (B, N) bool → (B, H) max over the masked positions (0 where none)."""
    out = values.masked_fill(~mask[:, None, :], float("-inf")).amax(-1)
    return torch.where(torch.isfinite(out), out, torch.zeros_like(out))


def received(probs: torch.Tensor, m: MapMasks) -> torch.Tensor:
    """Kovaleva §4.4: the attention each key receives from every real query, divided by the input length (B, H, T)."""
    return (probs.float() * m.real[:, None, :, None]).sum(-2) / m.n_real.clamp(min=1)[:, None, None]


# ---- reducers ----------------------------------------------------------------------------------------------------

class PatternReducer(Reducer):
    """GLUE task pass: type counts, map features, the §4.4 special-token scores, the [CLS] row, typical maps."""

    def __init__(self, n_layers: int, n_heads: int, device, keep_examples: bool = True, max_len_example: int = 48):
        z = lambda *s: torch.zeros(*s, dtype=torch.float64, device=device)  # noqa: E731
        self.counts, self.feats = z(n_layers, n_heads, len(TYPES)), z(n_layers, n_heads, 3)
        self.special, self.has = z(n_layers, n_heads, len(SPECIAL)), z(len(SPECIAL))
        self.to_special = z(n_layers, n_heads, 2)
        self.cls_row = z(n_layers, n_heads, len(CLS_CLASSES))
        # per token: the [CLS] row's weight on one token of each class (class mass / its tokens), summed over the
        # examples that have the class (the notebook compares tokens, not class totals)
        self.cls_row_tok, self.cls_has = z(n_layers, n_heads, len(CLS_CLASSES)), z(len(CLS_CLASSES))
        # the §4.4 score made length-free: attention received x input length (1 under uniform attention)
        self.special_free = z(n_layers, n_heads, len(SPECIAL))
        self.sep_free_rows: list[list[torch.Tensor]] = [[] for _ in range(n_layers)]  # per example, mean over heads
        # §5 word match: attention from a token to the identical tokens of the other sentence, and what uniform
        # attention would give them (matches / input length), over the queries that have a match
        self.match_mass, self.match_expected, self.match_queries = z(n_layers, n_heads), z(1), 0
        self.n = 0
        self.keep_examples, self.max_len = keep_examples, max_len_example
        self.best: dict[str, dict] = {}

    def start_batch(self, batch) -> None:
        self.m = map_masks(batch)
        self.batch = batch
        self.n += batch.input_ids.shape[0]
        real = batch.token_mask
        self.tok = {"[CLS]": batch.is_cls & real, "[SEP]": batch.is_sep & real, "punct": batch.is_punct & real}
        self.tok_has = torch.stack([self.tok[k].any(-1) for k in SPECIAL], -1)  # (B, 3)
        self.has += self.tok_has.sum(0).double()
        self.cls_pos = batch.is_cls.float().argmax(-1)  # the first [CLS] of each row
        other = real & ~batch.is_cls & ~batch.is_sep & ~batch.is_punct
        self.cls_keys = torch.stack([self.tok["[CLS]"], self.tok["[SEP]"], self.tok["punct"], other], -1).float()
        self.cls_count = self.cls_keys.sum(1)  # (B, 4) tokens of each class
        ords = self.m.ordinary.bool() & ~batch.is_punct
        ids = batch.input_ids
        self.match = ((ids[:, :, None] == ids[:, None, :]) & ords[:, :, None] & ords[:, None, :]
                      & (self.m.seg[:, :, None] != self.m.seg[:, None, :])).float()  # (B, Tq, Tk)
        n_match = self.match.sum(-1)  # (B, T)
        self.match_expected += (n_match / self.m.n_real.clamp(min=1)[:, None]).sum().double()
        self.match_queries += int((n_match > 0).sum())
        self.cls_has += (self.cls_count > 0).sum(0).double()
        self.short = real.sum(-1) <= self.max_len

    def update(self, layer: int, probs: torch.Tensor) -> None:
        m = self.m
        v, d, b = map_features(probs, m)
        types = classify(v, d, b)
        self.counts[layer] += torch.nn.functional.one_hot(types, len(TYPES)).sum(0).double()
        self.feats[layer] += torch.stack([v, d, b], -1).sum(0).double()
        col = received(probs, m)
        scores = torch.stack([_masked_max(col, self.tok[k]) for k in SPECIAL], -1)  # (B, H, 3)
        self.special[layer] += (scores * self.tok_has[:, None, :]).sum(0).double()
        free = scores * m.n_real[:, None, None].float()
        self.special_free[layer] += (free * self.tok_has[:, None, :]).sum(0).double()
        self.sep_free_rows[layer].append(free[..., 1].mean(1).double().cpu())
        p = probs.float()
        to_cls = torch.einsum("bhqk,bk->bhq", p, self.tok["[CLS]"].float())
        to_sep = torch.einsum("bhqk,bk->bhq", p, self.tok["[SEP]"].float())
        nq = m.n_real.clamp(min=1)[:, None]
        self.to_special[layer] += torch.stack([(to_cls * m.real[:, None]).sum(-1) / nq,
                                               (to_sep * m.real[:, None]).sum(-1) / nq], -1).sum(0).double()
        rows = p[torch.arange(p.shape[0], device=p.device), :, self.cls_pos]  # (B, H, T)
        self.match_mass[layer] += torch.einsum("bhqk,bqk->h", p, self.match).double()
        mass = torch.einsum("bhk,bkc->bhc", rows, self.cls_keys)  # (B, H, 4)
        self.cls_row[layer] += mass.sum(0).double()
        self.cls_row_tok[layer] += (mass / self.cls_count.clamp(min=1)[:, None, :]).sum(0).double()
        if self.keep_examples:
            self._keep(layer, probs, types, v, d, b)

    def _keep(self, layer, probs, types, v, d, b) -> None:
        """The most typical map of each type so far (Fig. 1), preferring short inputs (readable)."""
        score = {"vertical": v - d, "diagonal": d - v, "vertical+diagonal": torch.minimum(v, d),
                 "block": b, "heterogeneous": 1 - (v + d) - b.clamp(min=0)}
        for k, name in enumerate(TYPES):
            ok = (types == k) & self.short[:, None]
            if not bool(ok.any()):
                continue
            s = score[name].masked_fill(~ok, float("-inf"))
            best = int(torch.argmax(s))
            value = float(s.flatten()[best])
            if name in self.best and self.best[name]["score"] >= value:
                continue
            row, head = divmod(best, s.shape[1])
            n = int(self.m.n_real[row])
            self.best[name] = {"score": value, "layer": layer, "head": head,
                               "map": probs[row, head, :n, :n].float().cpu().numpy(),
                               "ids": self.batch.input_ids[row, :n].tolist(),
                               "features": (float(v[row, head]), float(d[row, head]), float(b[row, head]))}

    def finalize(self) -> "PatternStats":
        n = max(self.n, 1)
        has = self.has.clamp(min=1)
        return PatternStats(
            counts=self.counts.cpu().numpy(), features=(self.feats / n).cpu().numpy(),
            special=(self.special / has).cpu().numpy(), n_special=self.has.long().cpu().numpy(),
            to_special=(self.to_special / n).cpu().numpy(), cls_row=(self.cls_row / n).cpu().numpy(),
            n_examples=self.n, examples=self.best,
            cls_row_token=(self.cls_row_tok / self.cls_has.clamp(min=1)).cpu().numpy(),
            n_cls_class=self.cls_has.long().cpu().numpy(),
            special_free=(self.special_free / has).cpu().numpy(),
            sep_free_examples=(torch.stack([torch.cat(r) for r in self.sep_free_rows]).mean(0).numpy()
                               if self.sep_free_rows and self.sep_free_rows[0] else np.zeros(0)),
            word_match=(self.match_mass / self.match_expected.clamp(min=1e-12)).cpu().numpy()
            if self.match_queries else None, n_match_queries=self.match_queries)


class FeatureReducer(Reducer):
    """UD pass: the §4.4 feature scores per head, verb → subject attention (§4.5) and the ±1 mass ``d``."""

    def __init__(self, flags: dict[int, np.ndarray], arcs: dict[int, list[tuple[int, int]]], n_layers: int,
                 n_heads: int, device):
        z = lambda *s: torch.zeros(*s, dtype=torch.float64, device=device)  # noqa: E731
        self.flags, self.arcs = flags, arcs
        self.sums, self.has = z(n_layers, n_heads, len(UD_FEATURES)), z(len(UD_FEATURES))
        self.nsubj, self.diag = z(n_layers, n_heads), z(n_layers, n_heads)
        self.n, self.n_arcs = 0, 0
        self.device = device
        # per sentence (by example index), the noun and object scores of every head, nan where the sentence has
        # none: the paired test of "fine-tuning raises attention to nouns / objects" (ling_vs_special)
        self.per_sentence = np.full((max(flags, default=-1) + 1, n_layers, n_heads, len(RISE)), np.nan,
                                    dtype=np.float32)

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
        self.word_flags = torch.from_numpy(wf).to(batch.word_mask.device) & batch.word_mask[:, :, None]
        # a feature's pieces: every piece of a word with the feature; its score is the max over them (the
        # notebook's get_max_target_weight over token ids), so a many-piece word gets no sum over its pieces
        self.piece_flags = torch.einsum("btw,bwk->btk", (batch.word_to > 0).float(), self.word_flags.float()) > 0
        self.tok = [batch.is_cls & real, batch.is_sep & real]
        self.feat_has = torch.cat([torch.stack([t.any(-1) for t in self.tok], -1), self.word_flags.any(1)], -1)
        self.has += self.feat_has.sum(0).double()
        a = torch.tensor(arcs, dtype=torch.long, device=batch.word_mask.device).reshape(-1, 3)
        self.arc_idx = a
        self.n_arcs += a.shape[0]

    def update(self, layer: int, probs: torch.Tensor) -> None:
        m, batch = self.m, self.batch
        col = received(probs, m)  # (B, H, T)
        scores = [_masked_max(col, t) for t in self.tok]
        scores += [_masked_max(col, self.piece_flags[:, :, k]) for k in range(len(LING))]
        s = torch.stack(scores, -1)  # (B, H, F)
        self.sums[layer] += (s * self.feat_has[:, None, :]).sum(0).double()
        rise = [UD_FEATURES.index(f) for f in RISE]
        vals = s[..., rise].masked_fill(~self.feat_has[:, None, rise], float("nan")).float().cpu().numpy()
        self.per_sentence[[e.index for e in batch.examples], layer] = vals
        _, d, _ = map_features(probs, m)
        self.diag[layer] += d.sum(0).double()
        if self.arc_idx.shape[0]:
            a = self.arc_idx
            p = probs.float()
            # word-level attention from verb v to subject s, only for the arcs: from = mean over v's pieces
            rows = torch.einsum("nt,nhtk->nhk", batch.word_from[a[:, 0], a[:, 1]], p[a[:, 0]])  # (N, H, T)
            att = torch.einsum("nhk,nk->nh", rows, batch.word_to[a[:, 0], :, a[:, 2]])
            self.nsubj[layer] += att.sum(0).double()

    def finalize(self) -> "FeatureStats":
        return FeatureStats(scores=(self.sums / self.has.clamp(min=1)).cpu().numpy(),
                            n_has=self.has.long().cpu().numpy(), nsubj=(self.nsubj / max(self.n_arcs, 1)).cpu().numpy(),
                            n_arcs=self.n_arcs, diag=(self.diag / max(self.n, 1)).cpu().numpy(), n_sentences=self.n,
                            per_sentence=self.per_sentence)


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


# ---- the pass ----------------------------------------------------------------------------------------------------

def ud_inputs(loaded, data_dir: Path, limit: int | None):
    """UD EWT dev sentences (the first ``limit``): encoded, word flags (LING order) and verb → subject arcs."""
    from ..data.ud import CORPORA, load_corpus

    sentences = load_corpus(data_dir, UD_CORPUS, limit)
    encoded, skipped = drop_too_long([encode_words(loaded.tokenizer, i, s.words) for i, s in enumerate(sentences)],
                                     min(128, loaded.info.max_positions))
    flags, arcs = {}, {}
    for i, s in enumerate(sentences):
        f = np.zeros((len(s.words), len(LING)), dtype=bool)
        for w, (form, upos, rel) in enumerate(zip(s.words, s.upos, s.deprels)):
            f[w] = [upos == "PUNCT", upos in ("NOUN", "PROPN"), upos == "PRON", upos == "VERB",
                    rel in ("nsubj", "nsubj:pass"), rel == "obj", form.lower() in NEGATION]
        flags[i] = f
        arcs[i] = [(s.heads[w] - 1, w) for w, rel in enumerate(s.deprels)
                   if rel in ("nsubj", "nsubj:pass") and s.heads[w] > 0 and s.upos[s.heads[w] - 1] == "VERB"]
    return encoded, skipped, flags, arcs, data_dir / CORPORA[UD_CORPUS]


@dataclass
class PatternsPass:
    """The ``patterns`` family's pass on one GLUE task (a ``passes.Pass``)."""

    family: str
    corpus: str
    data: str
    loaded: object
    task: glue.Task
    dev: list
    n_dev_total: int
    ud: list
    ud_skipped: Skipped
    ud_flags: dict
    ud_arcs: dict
    tier: str
    ft_seed: int | None
    ft_note: str
    data_dir: Path
    cache_dir: Path | None
    data_paths: list
    batch_size: int = 32

    @property
    def encoded(self):
        return self.dev

    def nothing_to_measure(self) -> str | None:
        return None

    def _finetuned(self, progress: bool) -> finetune.FineTuned:
        return finetune.finetuned(self.loaded, self.task.name, self.ft_seed, self.data_dir, self.cache_dir,
                                  recipe_for(self.task.name, self.tier), progress=progress)

    def artifacts(self, progress: bool = False) -> None:
        """The fine-tuned checkpoint, made (or found in the cache) before ``run`` is timed; without a cache the
        fine-tune runs inside ``run``."""
        if self.ft_seed is not None and self.cache_dir is not None:
            self._finetuned(progress)  # kept in the cache; the weights in memory are let go

    def _measure(self, model, label: str, progress: bool) -> ModelStats:
        info, tok, dev = self.loaded.info, self.loaded.tokenizer, torch.device(self.loaded.info.device)
        g = run_reducers(model, iter_batches(self.dev, tok, dev, self.batch_size),
                         [PatternReducer(info.n_layers, info.n_heads, info.device)], progress=progress,
                         desc=f"patterns {self.corpus} ({label})")[0]
        u = run_reducers(model, iter_batches(self.ud, tok, dev, self.batch_size, with_words=True),
                         [FeatureReducer(self.ud_flags, self.ud_arcs, info.n_layers, info.n_heads, info.device)],
                         progress=progress, desc=f"patterns {UD_CORPUS} ({label})")[0]
        return ModelStats(label, g, u)

    def run(self, progress: bool = False) -> PassResult:
        info = self.loaded.info
        start = time.perf_counter()
        pt = self._measure(self.loaded.model, "pre-trained", progress)
        ft = None
        if self.ft_seed is not None:
            tuned = self._finetuned(progress)
            ft = self._measure(tuned.model.encoder, f"fine-tuned on {self.task.name} (seed {self.ft_seed})", progress)
            del tuned
        cls, sep = pt.glue.to_special[..., 0].sum(), pt.glue.to_special[..., 1].sum()
        result = PatternsResult(
            task=self.task.name, is_pair=self.task.is_pair, tier=self.tier, n_dev=len(self.dev),
            n_dev_total=self.n_dev_total, ud_corpus=UD_CORPUS, pretrained=pt, finetuned=ft, ft_note=self.ft_note,
            sink="[CLS]" if cls >= sep else "[SEP]", n_layers=info.n_layers, n_heads=info.n_heads)
        return PassResult(self.family, self.corpus, self.data, info, result, len(self.dev), self.ud_skipped,
                          time.perf_counter() - start)


@family("patterns", corpora=GLUE_TASKS, default_corpus="mrpc", tier_corpora=TIER_CORPORA, trains=True)
def prepare_patterns(loaded, data_dir: Path, corpus: str = "mrpc", limit: int | None = None, batch_size: int = 32,
                     options: dict | None = None) -> PatternsPass:
    tier, cache_dir, _ = options_of(options)
    t = glue.task(corpus)
    rows = glue.load_split(data_dir, corpus, "dev", limit)
    total = len(rows)
    cap = TIER_DEV_MAX[tier]
    if len(rows) > cap:  # a seeded sample, as the paper's "up to 1000 examples" (the notebook's had no seed)
        rows = [rows[i] for i in sorted(random.Random(0).sample(range(len(rows)), cap))]
    max_tokens = min(finetune.Recipe().max_tokens, loaded.info.max_positions)
    dev = finetune.encode_split(loaded.tokenizer, rows, max_tokens)
    ud_limit = TIER_UD_MAX[tier] if limit is None else min(limit, TIER_UD_MAX[tier] or limit)
    ud, ud_skipped, flags, arcs, ud_path = ud_inputs(loaded, Path(data_dir), ud_limit)
    if ud_skipped.n:
        ud_skipped.reason = f"UD {UD_CORPUS} sentence(s) over {ud_skipped.max_tokens} pieces skipped"
    paths = [glue.split_path(data_dir, t, "dev"), ud_path]
    ft_seed, note = None, ""
    if not glue.has_split(data_dir, t, "train"):
        note = f"GLUE {t.folder} has no train.tsv here: no fine-tuned model"
    elif corpus not in TIERS[tier]["corpora"]:
        note = f"the {tier} tier fine-tunes no {corpus} model"
    elif loaded.info.random_init_seed is not None and not TIERS[tier]["twin"]:
        note = f"the {tier} tier fine-tunes no random-init model (--tier full does)"
    else:
        ft_seed = training_seed()  # $BERTATTN_SEED (default 0): another seed's checkpoint measures the seed spread
        paths.insert(0, glue.split_path(data_dir, t, "train"))
        note = f"fine-tuned on {corpus} with seed {ft_seed} (finetune's checkpoint cache)"
    desc = (f"GLUE {t.folder} dev ({len(dev.examples)} of {total} examples{', first %d' % limit if limit else ''}"
            f"{', seeded sample' if total > cap else ''}; {dev.n_truncated} cut to {max_tokens} pieces) + UD "
            f"{UD_CORPUS} ({len(ud)} sentences); {note} ({tier} tier)")
    return PatternsPass("patterns", corpus, desc, loaded, t, dev.examples, total, ud, ud_skipped, flags, arcs, tier,
                        ft_seed, note, Path(data_dir), cache_dir, paths, batch_size)


# ---- claim metrics (named by reference_numbers/kovaleva2019_patterns.toml) -------------------------------------

def _result(pr) -> PatternsResult:
    r = pr.result
    if isinstance(r, NothingToMeasure):
        raise NotApplicable(r.reason)
    return r


def _stats(pr, model: str) -> tuple[PatternsResult, ModelStats]:
    r = _result(pr)
    if model == "finetuned":
        if r.finetuned is None:
            raise NotApplicable(f"the claim is about a fine-tuned model: {r.ft_note}")
        return r, r.finetuned
    return r, r.pretrained


def _shares_text(st: PatternStats) -> str:
    return ", ".join(f"{t} {s:.1%}" for t, s in zip(TYPES, st.shares()))


@metric("pattern_min_share")
def pattern_min_share(pr, model: str = "pretrained") -> Measurement:
    """The smallest share of the five types (block only on sentence pairs) over the task's maps."""
    r, ms = _stats(pr, model)
    shares = ms.glue.shares()
    wanted = [i for i, t in enumerate(TYPES) if t != "block" or r.is_pair]
    low = min(wanted, key=lambda i: shares[i])
    return Measurement(float(shares[low]), ms.glue.n_maps, "maps (dev examples x heads)", unit="share",
                       detail=f"{r.task}, {ms.label}: rarest {TYPES[low]}; {_shares_text(ms.glue)} "
                              f"({ms.glue.n_examples} examples x {r.n_layers * r.n_heads} heads)")


@metric("pattern_share")
def pattern_share(pr, types: list, model: str = "pretrained") -> Measurement:
    """The share of the maps typed as any of ``types``."""
    r, ms = _stats(pr, model)
    shares = ms.glue.shares()
    value = float(sum(shares[TYPES.index(t)] for t in types))
    heads = ms.glue.counts[..., [TYPES.index(t) for t in types]].sum(-1) / max(ms.glue.n_examples, 1)
    top = np.argsort(-heads.reshape(-1), kind="stable")[:3]
    return Measurement(value, ms.glue.n_maps, "maps (dev examples x heads)", unit="share",
                       detail=f"{r.task}, {ms.label}: {' + '.join(types)} {value:.1%}; {_shares_text(ms.glue)}; "
                              f"most often in heads " + ", ".join(
                                  f"{head_name(*divmod(int(i), r.n_heads))} ({heads.flat[i]:.0%})" for i in top))


def _feature_scores(ms: ModelStats) -> dict[str, np.ndarray]:
    """(L, H) §4.4 score per UD feature."""
    return {f: ms.ud.scores[..., i] for i, f in enumerate(UD_FEATURES)}


@metric("special_top_share")
def special_top_share(pr, min_score: float = 0.2, model: str = "pretrained") -> Measurement:
    """Among the heads with a vertical stripe (some feature's score >= ``min_score``: one token receives that
    share of the input's attention), the share whose strongest feature is [CLS] or [SEP] (UD EWT)."""
    r, ms = _stats(pr, model)
    sc = ms.ud.scores  # (L, H, F)
    top, best = sc.argmax(-1), sc.max(-1)
    striped = best >= min_score
    n = int(striped.sum())
    special = int((striped & (top < 2)).sum())
    ling = {f: float(sc[..., i].max()) for i, f in enumerate(UD_FEATURES)}
    others = [(head_name(l, h), UD_FEATURES[top[l, h]]) for l, h in zip(*np.nonzero(striped & (top >= 2)))]
    return Measurement(special / n if n else 0.0, ms.ud.n_sentences, "UD sentences", unit="share of striped heads",
                       detail=f"{ms.label}: {special} of {n} striped heads (score >= {min_score}) top on [CLS]/[SEP]"
                              f"{'; others: ' + ', '.join(f'{a} {b}' for a, b in others[:6]) if others else ''}; max "
                              f"score per feature: " + ", ".join(f"{k} {v:.3f}" for k, v in ling.items()))


def feature_rises(r: PatternsResult) -> tuple[list[tuple[str, int, int, float, float]], int]:
    """§4.4's first half: heads whose noun or object score rises with fine-tuning, by a one-sided paired t-test over
    the UD sentences with the feature (same sentences, pre-trained vs fine-tuned), Bonferroni over heads x features
    at :data:`RISE_ALPHA`. Returns [(feature, layer, head, mean rise, adjusted p)] and the number of tests."""
    from scipy.stats import ttest_rel

    a, b = r.pretrained.ud.per_sentence, r.finetuned.ud.per_sentence
    if a is None or b is None or a.shape != b.shape:
        raise NotApplicable("the pass has no per-sentence feature scores for both models (re-run the pass)")
    m = a.shape[1] * a.shape[2] * a.shape[3]
    out = []
    for k, feat in enumerate(RISE):
        ok = ~np.isnan(a[:, 0, 0, k])
        if ok.sum() < 3:
            continue
        with np.errstate(invalid="ignore", divide="ignore"):
            t = ttest_rel(b[ok, :, :, k], a[ok, :, :, k], axis=0, alternative="greater")
        p = np.nan_to_num(t.pvalue, nan=1.0) * m
        for l, h in zip(*np.nonzero(p < RISE_ALPHA)):
            out.append((feat, int(l), int(h), float((b[ok, l, h, k] - a[ok, l, h, k]).mean()), float(min(1.0, p[l, h]))))
    return sorted(out, key=lambda x: x[4]), m


@metric("ling_vs_special")
def ling_vs_special(pr, model: str = "finetuned") -> Measurement:
    """Both halves of §4.4's sentence. (1) "fine-tuning raises attention to nouns and direct objects in some
    heads": :func:`feature_rises` must find at least one head (paired test, Bonferroni); without one the value is
    ``inf`` (the claim does not hold, the detail says why). (2) "these weights stay negligible": the value is max
    over heads of the strongest linguistic feature's score / max over heads of the [CLS]/[SEP] score (UD). A word
    feature's score is the max over the word's pieces (the notebook's token ids), never a sum over them."""
    r, ms = _stats(pr, model)
    sc = _feature_scores(ms)
    ling = {f: float(sc[f].max()) for f in LING if f != "punct"}
    spec = max(float(sc["[CLS]"].max()), float(sc["[SEP]"].max()))
    ratio = max(ling.values()) / spec if spec > 0 else float("inf")
    value, rises = ratio, ""
    if model == "finetuned":
        risen, m = feature_rises(r)
        listed = ", ".join(f"{f} {head_name(l, h)} {d:+.4f} (adj. p {p:.1e})" for f, l, h, d, p in risen[:5])
        rises = (f"; risen with fine-tuning (paired t over UD sentences, Bonferroni x{m}): "
                 f"{len(risen)} head-features{': ' + listed if listed else ''}")
        if not risen:
            value = float("inf")
            rises += f" -> no rise: the claim's first half fails (negligible ratio {ratio:.3f})"
    strongest = max(ling, key=ling.get)
    return Measurement(value, ms.ud.n_sentences, "UD sentences", unit="ratio",
                       detail=f"{ms.label}: strongest linguistic feature {strongest} {ling[strongest]:.3f} vs "
                              f"[CLS]/[SEP] {spec:.3f}{rises}")


def _weighted_depth(per_layer: np.ndarray) -> float:
    depths = np.array([relative_depth(i, len(per_layer)) for i in range(len(per_layer))])
    return float((per_layer * depths).sum() / per_layer.sum()) if per_layer.sum() > 0 else float("nan")


@metric("cls_minus_sep_depth")
def cls_minus_sep_depth(pr, model: str = "pretrained") -> Measurement:
    """Attention-weighted mean relative depth of the [CLS] score minus that of the [SEP] score (GLUE task)."""
    r, ms = _stats(pr, model)
    cls, sep = ms.glue.special[..., 0].mean(1), ms.glue.special[..., 1].mean(1)
    dc, ds = _weighted_depth(cls), _weighted_depth(sep)
    fmt = lambda a: " ".join(f"L{i + 1} {x:.3f}" for i, x in enumerate(a))  # noqa: E731
    return Measurement(dc - ds, ms.glue.n_examples, "dev examples", unit="rel. depth",
                       detail=f"{r.task}, {ms.label}: [CLS] at depth {dc:.2f} ({fmt(cls)}); [SEP] at {ds:.2f} "
                              f"({fmt(sep)})")


@metric("sep_score_task_margin")
def sep_score_task_margin(pr, passes: list, model: str = "pretrained") -> Measurement:
    """This task's mean length-free [SEP] score (all heads; the §4.4 score x input length: attention received by
    the [SEP] over uniform attention's, 1 for a uniform map whatever the length) minus the highest of the other
    tasks', with the SE of that difference over examples. The paper's length-divided score, which follows input
    length (a uniform map gives 1/n), is in the detail."""
    r, ms = _stats(pr, model)

    def stats(st: PatternStats) -> tuple[float, float, int, float]:
        if st.special_free is None or st.sep_free_examples is None or not len(st.sep_free_examples):
            raise NotApplicable("the pass has no length-free [SEP] scores (re-run the pass)")
        x = st.sep_free_examples
        se = mean_se(x)
        return float(st.special_free[..., 1].mean()), se, len(x), float(st.special[..., 1].mean())

    mine, se_mine, n_mine, raw_mine = stats(ms.glue)
    others = {}
    for o in passes:
        ro, mo = _stats(o, model)
        others[ro.task] = stats(mo.glue)
    if not others:
        raise NotApplicable("needs the other tasks' passes")
    best = max(others, key=lambda k: others[k][0])
    se = float(np.hypot(se_mine, others[best][1]))
    return Measurement(mine - others[best][0], ms.glue.n_examples, "dev examples", unit="x uniform",
                       standard_error=se,
                       detail=f"{ms.label}: mean [SEP] score x length (1 = uniform) {r.task} {mine:.3f} "
                              f"(paper's /length score {raw_mine:.4f}); " + ", ".join(
                           f"{k} {v[0]:.3f} ({v[3]:.4f})" for k, v in others.items()))


@metric("tok2tok_top_heads_diagonal")
def tok2tok_top_heads_diagonal(pr, k: int = 3, model: str = "pretrained") -> Measurement:
    """The mean ±1-neighbour mass of the ``k`` heads with the most verb → subject attention, divided by the median
    head's (UD EWT): how much more diagonal the candidate "subject heads" are than a typical head."""
    r, ms = _stats(pr, model)
    if ms.ud.n_arcs == 0:
        raise NotApplicable("no verb -> nominal subject arcs in the UD sentences")
    value, text = top_heads_neighbour_ratio(ms.ud.nsubj, ms.ud.diag, k, "att")
    return Measurement(value, ms.ud.n_arcs, "verb -> subject arcs", unit="x median head",
                       detail=f"{ms.label}: top verb->subject heads {text}; {ms.ud.n_sentences} sentences")


def top_heads_neighbour_ratio(score, neighbour, k: int, score_name: str) -> tuple[float, str]:
    """Kovaleva §4.5's test of "detector" heads: the mean ±1-neighbour mass of the ``k`` heads with the highest
    ``score`` (``(L, H)``) over the median head's, and a text naming them (with the 75th percentile of the mass)."""
    score, neighbour = np.asarray(score, dtype=float), np.asarray(neighbour, dtype=float)
    n_heads = score.shape[-1]
    att, diag = score.reshape(-1), neighbour.reshape(-1)
    if att.size < 2 * k:
        raise NotApplicable(f"the model has {att.size} heads: its top {k} would be most of them")
    top = np.argsort(-att, kind="stable")[:k]
    median = float(np.median(diag))
    q75 = float(np.quantile(diag, 0.75))
    value = float(diag[top].mean()) / median if median > 0 else float("inf")
    return value, (", ".join(f"{head_name(*divmod(int(i), n_heads))} ({score_name} {att[i]:.2f}, ±1 mass {diag[i]:.2f})"
                             for i in top) + f"; ±1 mass over all heads: median {median:.3f}, 75th percentile "
                                             f"{q75:.3f} ({int((diag[top] > q75).sum())} of {k} above it)")


@metric("pattern_share_task_margin")
def pattern_share_task_margin(pr, passes: list, types: list, model: str = "finetuned") -> Measurement:
    """This task's share of ``types`` minus the lowest share among the other tasks (tasks without the model, e.g.
    a fine-tuned QNLI, are named in the detail and left out)."""
    r, ms = _stats(pr, model)
    idx = [TYPES.index(t) for t in types]
    mine = float(ms.glue.shares()[idx].sum())
    others, left, n_maps = {}, [], {}
    for o in passes:
        try:
            ro, mo = _stats(o, model)
        except NotApplicable as exc:
            left.append(f"{o.corpus} ({exc})")
            continue
        others[ro.task] = float(mo.glue.shares()[idx].sum())
        n_maps[ro.task] = mo.glue.n_maps
    if not others:
        raise NotApplicable("no other task's pass has the model: " + "; ".join(left))
    low = min(others, key=others.get)
    # SE: the two shares as binomial over their maps (maps of one example are correlated: this errs narrow)
    se = difference_se((100 * mine, ms.glue.n_maps), (100 * others[low], n_maps[low])) / 100
    return Measurement(mine - others[low], ms.glue.n_maps, "maps (dev examples x heads)", unit="share",
                       standard_error=se, detail=f"{' + '.join(types)}: {r.task} {mine:.1%}; " + ", ".join(
                           f"{k} {v:.1%}" for k, v in others.items()) + (f"; left out: {'; '.join(left)}" if left else ""))


WORD_MATCH_MIN = 2.0  # x uniform: the least a head must put on matching words to "attend to" them


@metric("shared_heads_word_match")
def shared_heads_word_match(pr, passes: list, top: int = 5, model: str = "pretrained") -> Measurement:
    """Kovaleva §5: the heads that both STS-B and RTE rely on (the ``top`` most harmful to disable in each
    ``disable`` sweep of ``passes``, as kov.sts_rte_shared_heads) put high weight on tokens that occur in both
    sentences. Per head, the word-match score (this pass's sentence pairs): attention from a token to the identical
    tokens of the other sentence over what uniform attention gives them. Value: min over the shared heads of
    score / max(75th percentile over all heads, :data:`WORD_MATCH_MIN`): >= 1 when every shared head is in the top
    quartile AND puts at least twice the uniform weight on matching tokens (near-uniform heads, e.g. random weights,
    score ~1). No shared head: 0."""
    from .finetuned import result_of as sweep_of

    r, ms = _stats(pr, model)
    wm = ms.glue.word_match
    if wm is None:
        raise NotApplicable(f"{r.task}: no token occurs in both sentences of any pair (or single sentences)")
    sweeps = [sweep_of(p) for p in passes]
    if len(sweeps) < 2:
        raise NotApplicable("needs the STS-B and RTE disable sweeps")

    def harmful(res) -> set[tuple[int, int]]:
        d = res.head_delta.mean(0).reshape(-1)
        return {divmod(int(i), res.n_heads) for i in np.argsort(d, kind="stable")[:top]}

    shared = sorted(set.intersection(*(harmful(x) for x in sweeps)))
    q75 = float(np.quantile(wm, 0.75))
    bar = max(q75, WORD_MATCH_MIN)
    rank = lambda l, h: float((wm < wm[l, h]).mean())  # noqa: E731
    parts = [f"{head_name(l, h)} {wm[l, h]:.2f}x (above {rank(l, h):.0%} of heads)" for l, h in shared]
    best = np.argsort(-wm, axis=None)[:3]
    value = min((float(wm[l, h]) / bar for l, h in shared), default=0.0)
    return Measurement(value, ms.glue.n_match_queries, "tokens with a match in the other sentence",
                       unit="x bar", head=head_name(*shared[0]) if shared else None,
                       detail=f"{r.task}, {ms.label}: heads among the {top} most harmful on "
                              f"{' and '.join(x.task for x in sweeps)}: {'; '.join(parts) or 'none'}; bar = max(75th "
                              f"percentile {q75:.2f}x, {WORD_MATCH_MIN:g}x uniform); strongest word-match heads: "
                              + ", ".join(f"{head_name(*divmod(int(i), r.n_heads))} {wm.flat[i]:.2f}x" for i in best))


@metric("cls_final_target_margin")
def cls_final_target_margin(pr, expected: dict, model: str = "finetuned") -> Measurement:
    """Final layer, [CLS] query row averaged over heads and examples, **per token**: the weight on one token of
    the expected class ("sink" = the model's sink, measured on the pre-trained model; or "punct") minus the largest
    per-token weight of another class (a class total would let "other", ~45 tokens, beat [CLS], one token, whatever
    the model does). Class totals are in the detail."""
    r, ms = _stats(pr, model)
    if r.task not in expected:
        raise NotApplicable(f"the paper names no final-layer [CLS] target for {r.task}")
    if ms.glue.cls_row_token is None:
        raise NotApplicable("the pass has no per-token [CLS] row (re-run the pass)")
    row = ms.glue.cls_row_token[-1].mean(0)  # (4,)
    total = ms.glue.cls_row[-1].mean(0)
    want = expected[r.task]
    name = r.sink if want == "sink" else want
    i = CLS_CLASSES.index(name)
    present = [j for j in range(len(CLS_CLASSES)) if ms.glue.n_cls_class[j] > 0]
    if i not in present:
        raise NotApplicable(f"no {name} token in the {r.task} inputs")
    rest = max(float(row[j]) for j in present if j != i)
    return Measurement(float(row[i]) - rest, ms.glue.n_examples, "dev examples", unit="per token",
                       detail=f"{r.task}, {ms.label}: final layer [CLS] row per token " + ", ".join(
                           f"{c} {x:.3f}" for c, x in zip(CLS_CLASSES, row)) + "; class totals " + ", ".join(
                           f"{c} {x:.3f}" for c, x in zip(CLS_CLASSES, total)) + f"; expected {want} = {name} "
                                                                                f"(sink measured: {r.sink})")


# ---- figures -----------------------------------------------------------------------------------------------------

COLORS = {"vertical": "tab:blue", "diagonal": "tab:orange", "vertical+diagonal": "tab:purple", "block": "tab:green",
          "heterogeneous": "0.6"}


@figure("patterns")
def patterns_figures(pass_results, directory: Path) -> list[Path]:
    """Fig. 1 (a typical map of each type) + Fig. 2 (type shares per task), Fig. 6 (feature scores per layer),
    Fig. 7 (final-layer [CLS] row per task)."""
    plt = pyplot()
    paths = []
    by_model: dict[str, list] = {}
    for pr in pass_results:
        if isinstance(pr.result, PatternsResult):
            by_model.setdefault(pr.model.slug, []).append(pr)
    for slug, prs in by_model.items():
        prs.sort(key=lambda p: GLUE_TASKS.index(p.result.task))
        name = prs[0].model.name
        # Fig. 1 + Fig. 2
        fig = plt.figure(figsize=(13, 5.5))
        ex = prs[0].result
        st = (ex.finetuned or ex.pretrained)
        for k, t in enumerate(TYPES):
            ax = fig.add_subplot(2, 5, k + 1)
            e = st.glue.examples.get(t)
            if e is None:
                ax.set_title(f"{t}: none", fontsize=8)
                ax.axis("off")
                continue
            ax.imshow(e["map"], cmap="Greys", vmin=0, vmax=max(float(e["map"].max()), 1e-6))
            v, d, b = e["features"]
            ax.set_title(f"{t}\n{head_name(e['layer'], e['head'])} v={v:.2f} d={d:.2f} b={b:.2f}", fontsize=7)
            ax.set_xticks([])
            ax.set_yticks([])
        ax = fig.add_subplot(2, 1, 2)
        labels, bottoms, x = [], None, 0
        bars = []
        for p in prs:
            r = p.result
            for ms in (r.pretrained, r.finetuned):
                if ms is not None:
                    bars.append((f"{r.task}\n{'pt' if ms is r.pretrained else 'ft'}", ms.glue.shares()))
        bottoms = np.zeros(len(bars))
        for k, t in enumerate(TYPES):
            vals = np.array([s[k] for _, s in bars])
            ax.bar(range(len(bars)), vals, bottom=bottoms, color=COLORS[t], label=t)
            bottoms += vals
        ax.set_xticks(range(len(bars)), [b[0] for b in bars], fontsize=7)
        ax.set_ylabel("share of maps")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1, 1))
        fig.suptitle(f"{name}: typical maps ({ex.task}, {st.label}; Kovaleva Fig. 1) and type shares per task "
                     f"(Fig. 2; rule-based types, not the paper's CNN)", fontsize=9)
        paths.append(save_figure(fig, directory, f"patterns-types-{slug}.png"))
        # Fig. 6: per layer, mean score of each feature (special on the task, linguistic on UD)
        for p in prs:
            r = p.result
            models = [ms for ms in (r.pretrained, r.finetuned) if ms is not None]
            fig, axes = plt.subplots(1, len(models), figsize=(5 * len(models), 3.6), squeeze=False)
            for ax, ms in zip(axes[0], models):
                layers = np.arange(1, r.n_layers + 1)
                for i, f in enumerate(SPECIAL):
                    ax.plot(layers, ms.glue.special[..., i].mean(1), "o-", lw=2, label=f"{f} ({r.task})")
                for i, f in enumerate(UD_FEATURES):
                    if f in ("[CLS]", "[SEP]"):
                        continue
                    ax.plot(layers, ms.ud.scores[..., i].mean(1), "--", lw=1, label=f"{f} (UD)")
                ax.set_xlabel("layer")
                ax.set_ylabel("score (mean over heads)")
                ax.set_title(ms.label, fontsize=8)
                ax.legend(fontsize=6)
            fig.suptitle(f"{name}: attention to special tokens and linguistic features per layer (Kovaleva Fig. 6; "
                         f"{r.task} n = {r.n_dev}, UD n = {r.pretrained.ud.n_sentences})", fontsize=9)
            paths.append(save_figure(fig, directory, f"patterns-features-{slug}-{r.task}.png"))
        # Fig. 7: final-layer [CLS] row per task
        rows = []
        for p in prs:
            r = p.result
            for ms in (r.pretrained, r.finetuned):
                if ms is not None:
                    rows.append((f"{r.task} {'pt' if ms is r.pretrained else 'ft'}", ms.glue.cls_row[-1].mean(0)))
        fig, ax = plt.subplots(figsize=(5, 0.5 + 0.4 * len(rows)))
        mat = np.array([x for _, x in rows])
        ax.imshow(mat, cmap="Greys", vmin=0, vmax=1, aspect="auto")
        for (i, j), v in np.ndenumerate(mat):
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7, color="tab:red")
        ax.set_xticks(range(len(CLS_CLASSES)), CLS_CLASSES, fontsize=7)
        ax.set_yticks(range(len(rows)), [n for n, _ in rows], fontsize=7)
        ax.set_title(f"{name}: final-layer [CLS] attention (Kovaleva Fig. 7)", fontsize=8)
        paths.append(save_figure(fig, directory, f"patterns-cls-{slug}.png"))
    return paths
