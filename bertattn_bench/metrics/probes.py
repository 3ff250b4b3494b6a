"""Clark et al. §5, Table 3: attention-based probing classifiers for dependency parsing.

The model's attention is held fixed; small graph-based probes are trained on its word-level attention maps
(Clark §4.1 pooling: sum over the pieces attended to, mean over the pieces attending; [CLS]/[SEP] dropped).
For dependent j and candidate head i, with α^k_ij the attention from word i to word j in head k (all L·H heads):

* **Attention-Only**: p(i | j) ∝ exp(Σ_k w_k α^k_ij + u_k α^k_ji); only w and u are trained (and ρ, below).
* **ROOT** (Clark's released probe, ``Syntax_Analysis.ipynb``): every dependent has one more candidate, ROOT, scored
  with the same per-map weights from the attention between the word and the model's special tokens:
  ρ_start α(j → [CLS]) + ρ_end α(j → [SEP]) (weighed by u) and ρ_start α([CLS] → j) + ρ_end α([SEP] → j) (by w), ρ
  two learned scalars. Root words are trained on and scored (head = ROOT), as Clark's, who skips only ``punct``.
* **Attention-and-Words**: the weights become W_k,:(v_i ⊕ v_j) and U_k,:(v_i ⊕ v_j). Clark's v are GloVe vectors;
  GloVe is not available offline, so v is **the model's own input word-piece embedding averaged over the word's
  pieces** (a deviation), L2-normalised, with a constant 1 appended (a per-head bias, started from the trained
  Attention-Only weights).
* Baselines: right-branching (the head is the next word; a root word is always a miss); **distances + words**, as
  Clark's released probe (fn. 4): one hidden layer of 256 tanh units on v_i, v_j and his distance features — how
  far the candidate is ahead, how far behind, each over the sentence length, indicators for offsets 0/±1/±2 — and
  a ROOT indicator (ROOT's word vector is zero); and
  **random init**, the Attention-and-Words probe on a model of the same config with random weights except the
  embeddings, copied from the model under test. For a model that is itself randomly initialised (the negative
  control) that baseline *is* the model, and its own probe is reused.

Candidates are the other words of the sentence and ROOT (``ProbeSettings.root``; off: no ROOT, root words neither
trained on nor scored, UAS as syntax.py's "All"); ``punct`` dependents are neither. The best single head, Table 3's
comparison, cannot pick ROOT: on the probes' arcs each root word is a miss for it. Training data: GUM train
documents (``gum/documents`` files whose ``# newdoc id`` is in neither UD GUM dev nor test), in the regression tier a
seeded sample of sentences, in ``--tier full`` every sentence (Clark trained on all of PTB train); evaluation: a
seeded sample of the dev set. Training: Adam on mini-batches of length-sorted sentences in a seeded order, a fixed
number of epochs (Clark: one epoch, one sentence per step, lr 0.002); deterministic on one device. n is reported
with every value.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from .. import tiers
from ..attention import Reducer, run_reducers
from ..batching import Encoded, drop_too_long, encode_words, iter_batches, length_order
from ..errors import DataError
from ..passes import PassResult, PreparedPass
from ..data import gum
from ..data.gum import train_documents as gum_train_documents
from ..registry import Measurement, NotApplicable, family, metric
from ..stats import binomial_se_points, difference_se
from ..training import adam_epochs
from .structural_probe import HiddenWordStates, StructuralScore, StructuralSettings, Tree, structural_probe
from .syntax import DIRECTIONS, DependencyReducer, HeadScore, sd_arcs

PROBE_NAMES = {"attn": "Attn", "attn_words": "Attn + words", "dist_words": "Distances + words",
               "random_init": "Random-init Attn + words", "right_branching": "right-branching"}
RANDOM_INIT_SEED = 1  # the random-init baseline model's weights (all but the embeddings)


@dataclass(frozen=True)
class ProbeSettings:
    """Sizes and training hyper-parameters (ours: Clark §5 gives none). Sized for the CI budget on 2 CPU cores."""

    n_train: int = 800  # sentences sampled from the GUM train documents
    n_eval: int | None = 1000  # eval sentences, a seeded sample of the corpus; None = all
    seed: int = 0  # the train and eval samples (the data: n depends on it)
    train_seed: int | None = None  # probe initialisation and training order; None = ``seed`` ($BERTATTN_SEED sets it)
    epochs: int = 6
    batch_sentences: int = 16
    lr_attn: float = 0.1
    lr_words: float = 0.01
    lr_dist: float = 0.01
    dist_hidden: int = 256  # Clark's released probe: one hidden layer of 256 tanh units
    root: bool = True  # Clark's ROOT candidate (scored from attention to/from [CLS]/[SEP]); root words are scored
    trees: str = "sd"  # gold trees: "sd" (``sd_like``, as Clark's SD) or "ud" (the corpus variants ending in _ud)
    eval_elements: int = 4_000_000  # eval buckets hold at most this many map entries (memory)
    structural: StructuralSettings = field(default_factory=StructuralSettings)  # H&M probe (Clark §5's comparison)

    @property
    def training_seed(self) -> int:
        return self.seed if self.train_seed is None else self.train_seed

    @classmethod
    def from_env(cls) -> "ProbeSettings":
        """The defaults, with the training seed of ``$BERTATTN_SEED`` (unset: 0, the recorded baseline's) for the
        three probes and the structural probe alike; the data samples keep seed 0."""
        from ..settings import training_seed

        seed = training_seed(default=cls.seed)
        return cls(train_seed=seed, structural=StructuralSettings(seed=seed))


# ---- data ------------------------------------------------------------------------------------------------------

def sample_train_sentences(paths: list[Path], n: int | None, seed: int) -> tuple[list, int]:
    """Documents in a seeded order, read until they hold 2n sentences of >= 2 words; a seeded sample of n of those
    (``n`` None: every sentence of >= 2 words of every document, in that order).

    Returns (sentences, documents read). Only the documents needed are parsed (CPU budget).
    """
    from ..data.ud import read_conllu

    rng = random.Random(seed)
    order = list(paths)
    rng.shuffle(order)
    pool, n_docs = [], 0
    for path in order:
        pool.extend(s for s in read_conllu(path) if len(s.words) > 1)
        n_docs += 1
        if n is not None and len(pool) >= 2 * n:
            break
    if n is not None and len(pool) > n:
        pool = [pool[i] for i in sorted(rng.sample(range(len(pool)), n))]
    return pool, n_docs


def sd_like(sentence):
    """An SD-like copy of a UD tree (Clark's gold trees are Stanford Dependencies; two of the structural differences
    that matter most for head selection): (1) ``cc`` attaches to the first conjunct (UD: to the conjunct it
    precedes); (2) a preposition heads its phrase: a noun's first preceding ``case`` dependent takes the noun's place
    under the noun's head and the noun attaches to it (SD prep/pobj; UD: case under the noun). Not for a possessive
    ('s under an ``nmod:poss`` word stays, as SD's ``possessive``) nor a root noun. Labels are kept."""
    import dataclasses

    heads, rels = list(sentence.heads), sentence.deprels
    base = [r.split(":")[0] for r in rels]
    for c, rel in enumerate(base):  # 1: cc on the first conjunct
        k = heads[c] - 1
        if rel == "cc" and k >= 0 and base[k] == "conj":
            heads[c] = heads[k]
    for n in range(len(heads)):  # 2: the preposition heads the phrase
        if heads[n] == 0 or rels[n] == "nmod:poss":
            continue
        cases = [c for c in range(n) if heads[c] == n + 1 and base[c] == "case"]
        if cases:
            c = cases[0]
            heads[c], heads[n] = heads[n], c + 1
    return dataclasses.replace(sentence, heads=heads)


TREES = ("sd", "ud")  # the probes' gold trees: SD-like (default, as Clark's PTB/SD) or UD as released


ROOT = -2  # gold head of a root word when the probes score ROOT (make_buckets maps it to the ROOT column)


def gold_heads(sentence, root: bool = True) -> np.ndarray:
    """0-based head per word, -1 where the word is not scored (punct; the root too when ``root`` is False): the
    "All" arcs of syntax.py, plus, with ``root``, ``ROOT`` for the sentence's root word(s) (Clark scores them: his
    evaluation skips only ``punct``)."""
    heads = np.full(len(sentence.words), -1, dtype=np.int64)
    for a in sd_arcs(sentence):
        if a.relation == "All":
            heads[a.dependent] = a.head
    if root:
        for j, (h, rel) in enumerate(zip(sentence.heads, sentence.deprels)):
            if h == 0 and rel.split(":")[0] != "punct":
                heads[j] = ROOT
    return heads


# ---- features: word-level maps from the batched core -------------------------------------------------------------

class WordMapReducer(Reducer):
    """Keeps each sentence's word-level maps ``(L·H, W, W)`` (``[k, a, b]``: from word a to word b) as float16, and its
    word vectors (input word-piece embeddings averaged over the word's pieces), on the model's device; and the
    attention between each word and the model's special tokens ``(L·H, W, 4)``: from the word to [CLS], to [SEP],
    from [CLS] to the word, from [SEP] to the word (the model's own cls/sep tokens; a word's pieces pooled as in
    the maps). For a subsample only: it keeps maps (the probes train on them)."""

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


# ---- probes -----------------------------------------------------------------------------------------------------

@dataclass
class Bucket:
    """Padded sentences; the maps in two layouts for batched products: ``by_from[b, x, k, y]`` = α^k from word x to
    word y, ``by_to[b, x, k, y]`` = α^k from word y to word x."""

    by_from: torch.Tensor  # (B, W, K, W) float32
    by_to: torch.Tensor  # (B, W, K, W) float32
    vectors: torch.Tensor  # (B, W, d+1): L2-normalised, constant 1 appended
    heads: torch.Tensor  # (B, W) long, -1 = not scored, W = ROOT (the extra candidate column)
    words: torch.Tensor  # (B, W) bool, real words
    offsets: torch.Tensor  # (W, W) long: candidate i minus dependent j, at [j, i]
    specials: torch.Tensor | None = None  # (B, W, K, 4) float32: to [CLS], to [SEP], from [CLS], from [SEP]

    @property
    def root(self) -> bool:
        """Whether the probes score a ROOT candidate (column W of the scores)."""
        return self.specials is not None


def make_buckets(feats: Features, size: int, device, max_elements: int | None = None) -> list[Bucket]:
    """Length-sorted groups of ``size`` sentences (fewer where a group would exceed ``max_elements`` map entries)."""
    order = length_order([m.shape[-1] for m in feats.maps])
    groups, start = [], 0
    while start < len(order):
        end = min(start + size, len(order))
        if max_elements:
            k, w = feats.maps[order[end - 1]].shape[:2]
            end = min(end, start + max(1, max_elements // (k * w * w)))
        groups.append(order[start:end])
        start = end
    out = []
    for idx in groups:
        w = max(feats.maps[i].shape[-1] for i in idx)
        k, d = feats.maps[idx[0]].shape[0], feats.vectors[idx[0]].shape[-1]
        maps = torch.zeros(len(idx), k, w, w, device=device)
        vec = torch.zeros(len(idx), w, d + 1, device=device)
        heads = torch.full((len(idx), w), -1, dtype=torch.long)
        words = torch.zeros(len(idx), w, dtype=torch.bool)
        root = feats.specials is not None
        specials = torch.zeros(len(idx), w, k, 4, device=device) if root else None
        for b, i in enumerate(idx):
            n = feats.maps[i].shape[-1]
            maps[b, :, :n, :n] = feats.maps[i].to(device).float()
            if root:
                specials[b, :n] = feats.specials[i].to(device).float().transpose(0, 1)
            v = feats.vectors[i].to(device).float()
            vec[b, :n, :d] = v / v.norm(dim=-1, keepdim=True).clamp(min=1e-6)
            vec[b, :n, d] = 1.0
            h = torch.from_numpy(feats.heads[i]).clone()
            h[h == ROOT] = w if root else -1  # without a ROOT candidate a root word is not scored
            heads[b, :n] = h
            words[b, :n] = True
        pos = torch.arange(w)
        out.append(Bucket(maps.permute(0, 2, 1, 3).contiguous(), maps.permute(0, 3, 1, 2).contiguous(), vec,
                          heads.to(device), words.to(device), (pos[None, :] - pos[:, None]).to(device), specials))
    return out


def _contract(weights: torch.Tensor, maps: torch.Tensor) -> torch.Tensor:
    """``out[b, x, r, y] = Σ_k weights[b, x, r, k] maps[b, x, k, y]``: one batched product per word x."""
    b, w, r, k = weights.shape
    return (weights.reshape(b * w, r, k) @ maps.reshape(b * w, k, -1)).view(b, w, r, -1)


def _root_features(bk: Bucket, rho: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Clark's ROOT features per map, (B, W, K) each: ρ_start α(j → [CLS]) + ρ_end α(j → [SEP]) (the dependent
    attends to ROOT) and the same from [CLS]/[SEP] to j (ROOT attends to the dependent); ρ are two learned scalars
    (his ``ROOT_start``/``ROOT_end``), shared by all maps."""
    sp = bk.specials
    return sp[..., 0] * rho[0] + sp[..., 1] * rho[1], sp[..., 2] * rho[0] + sp[..., 3] * rho[1]


class AttnProbe(torch.nn.Module):
    """Attention-Only: score[j, i] = Σ_k w_k α^k_ij + u_k α^k_ji (Clark §5); with a ROOT candidate (column W),
    score[j, ROOT] = Σ_k u_k root_to^k_j + w_k root_from^k_j (``_root_features``), as Clark's released probe."""

    def __init__(self, n_maps: int):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(n_maps))
        self.u = torch.nn.Parameter(torch.zeros(n_maps))
        self.rho = torch.nn.Parameter(torch.ones(2))

    def forward(self, bk: Bucket) -> torch.Tensor:
        b, w, k, _ = bk.by_from.shape
        r = _contract(torch.stack([self.w, self.u]).expand(b, w, 2, k), bk.by_from)  # (B, x, 2, y)
        # Σ w_k α^k_ij sits at [i, j] (x = i): transposed; Σ u_k α^k_ji sits at [j, i] (x = j)
        scores = r[:, :, 0].transpose(1, 2) + r[:, :, 1]
        if not bk.root:
            return scores
        to_root, from_root = _root_features(bk, self.rho)
        return torch.cat([scores, (to_root @ self.u + from_root @ self.w).unsqueeze(-1)], -1)


class AttnWordsProbe(torch.nn.Module):
    """Attention-and-Words: the head weights are W_k,:(v_i ⊕ v_j) and U_k,:(v_i ⊕ v_j) (Clark §5); each v ends in a
    constant 1 (a per-head bias), whose weights start from the Attention-Only probe's."""

    def __init__(self, n_maps: int, dim: int, start: AttnProbe | None = None):
        super().__init__()
        # columns [0, dim): the candidate's v_i; [dim, 2 dim): the dependent's v_j. ROOT as a candidate has a zero
        # word vector with the constant 1 (Clark: a zero dummy), so its weights are the bias column + the v_j part
        self.W = torch.nn.Parameter(torch.zeros(n_maps, 2 * dim))
        self.U = torch.nn.Parameter(torch.zeros(n_maps, 2 * dim))
        self.rho = torch.nn.Parameter(torch.ones(2))
        self.dim = dim
        if start is not None:
            with torch.no_grad():
                self.W[:, dim - 1] = start.w
                self.U[:, dim - 1] = start.u
                self.rho.copy_(start.rho)

    def forward(self, bk: Bucket) -> torch.Tensor:
        v, d = bk.vectors, self.dim
        cand_w, dep_w = v @ self.W[:, :d].T, v @ self.W[:, d:].T  # (B, W, K)
        cand_u, dep_u = v @ self.U[:, :d].T, v @ self.U[:, d:].T
        # W term (α^k_ij): the v_i part lands at [i, j] (by_from, x = i), the v_j part at [j, i] (by_to, x = j)
        # U term (α^k_ji): the v_i part lands at [i, j] (by_to, x = i), the v_j part at [j, i] (by_from, x = j)
        r1 = _contract(torch.stack([cand_w, dep_u], 2), bk.by_from)
        r2 = _contract(torch.stack([cand_u, dep_w], 2), bk.by_to)
        scores = (r1[:, :, 0] + r2[:, :, 0]).transpose(1, 2) + r1[:, :, 1] + r2[:, :, 1]
        if not bk.root:
            return scores
        to_root, from_root = _root_features(bk, self.rho)
        root = ((self.U[:, d - 1] + dep_u) * to_root).sum(-1) + ((self.W[:, d - 1] + dep_w) * from_root).sum(-1)
        return torch.cat([scores, root.unsqueeze(-1)], -1)


N_DISTANCE_FEATURES = 7  # Clark's make_distance_features, without its ROOT indicator (a separate parameter here)


def distance_features(offsets: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Clark's released ``make_distance_features`` (footnote 4), (B, W, W, 7) at [b, j, i] for dependent j and
    candidate i: how far i is ahead of j and how far behind, each over the sentence length; indicators for
    i - j = 0, -1, +1, -2, +2."""
    off = offsets.float()[None]  # (1, W, W): i - j
    n = lengths.float().clamp(min=1)[:, None, None]
    feats = [off.clamp(min=0) / n, (-off).clamp(min=0) / n]
    feats += [(offsets == k).float()[None].expand_as(feats[0]) for k in (0, -1, 1, -2, 2)]
    return torch.stack(feats, -1)


class DistWordsProbe(torch.nn.Module):
    """Distances + words (Clark §5 baseline, fn. 4, as his released probe): one hidden layer of ``hidden`` tanh units
    on v_i, v_j and Clark's distance features (``distance_features``); ROOT (column W) has a zero word vector and
    its own indicator (a learned vector in the hidden layer)."""

    def __init__(self, dim: int, hidden: int = 256):
        super().__init__()
        self.cand = torch.nn.Linear(dim, hidden, bias=False)
        self.dep = torch.nn.Linear(dim, hidden)
        self.dist = torch.nn.Linear(N_DISTANCE_FEATURES, hidden, bias=False)
        self.root = torch.nn.Parameter(torch.zeros(hidden))
        self.out = torch.nn.Linear(hidden, 1)

    def forward(self, bk: Bucket) -> torch.Tensor:
        dep = self.dep(bk.vectors)  # (B, W, h)
        pair = self.dist(distance_features(bk.offsets, bk.words.sum(1)))  # (B, j, i, h)
        h = self.cand(bk.vectors).unsqueeze(1) + dep.unsqueeze(2) + pair
        scores = self.out(torch.tanh(h)).squeeze(-1)
        if not bk.root:
            return scores
        return torch.cat([scores, self.out(torch.tanh(dep + self.root)).squeeze(-1).unsqueeze(-1)], -1)


def _masked(scores: torch.Tensor, bk: Bucket) -> torch.Tensor:
    """Candidates: the other real words of the sentence, and ROOT (the last column) where the bucket has it."""
    w = bk.words.shape[1]
    invalid = ~bk.words[:, None, :] | torch.eye(w, dtype=torch.bool, device=scores.device)
    if bk.root:
        invalid = torch.cat([invalid, torch.zeros_like(invalid[..., :1])], -1)
    return scores.masked_fill(invalid, float("-inf"))


def train_probe(probe: torch.nn.Module, buckets: list[Bucket], epochs: int, lr: float, seed: int) -> torch.nn.Module:
    """Adam over the buckets in a seeded order each epoch (:func:`training.adam_epochs`); cross-entropy over the
    candidate heads."""

    def loss(p: torch.nn.Module, bk: Bucket) -> torch.Tensor:
        scores = _masked(p(bk), bk)
        return torch.nn.functional.cross_entropy(scores.flatten(0, 1), bk.heads.flatten(), ignore_index=-1)

    return adam_epochs(probe, buckets, loss, epochs, lr, seed)


@torch.no_grad()
def uas(probe: torch.nn.Module, buckets: list[Bucket]) -> tuple[float, int]:
    """Percent of scored words whose highest-scoring candidate is the gold head, and their number."""
    correct = total = 0
    for bk in buckets:
        pred = _masked(probe(bk), bk).argmax(-1)
        scored = bk.heads >= 0
        correct += int((pred[scored] == bk.heads[scored]).sum())
        total += int(scored.sum())
    return 100.0 * correct / max(total, 1), total


def seeded(seed: int, build):
    """``build()`` under a fixed seed, without touching the global random state."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build()


def train_probes(train: Features, evals: Features, s: ProbeSettings, device, with_dist: bool = True) -> dict:
    """Train Attn, Attn + words (from Attn) and, optionally, Distances + words; their UAS on ``evals``."""
    tb = make_buckets(train, s.batch_sentences, device)
    eb = make_buckets(evals, 64, device, s.eval_elements)
    n_maps, dim = train.maps[0].shape[0], train.vectors[0].shape[-1] + 1
    seed = s.training_seed
    attn = train_probe(AttnProbe(n_maps).to(device), tb, s.epochs, s.lr_attn, seed)
    words = train_probe(AttnWordsProbe(n_maps, dim, attn).to(device), tb, s.epochs, s.lr_words, seed)
    scores = {"attn": ProbeScore(*uas(attn, eb)), "attn_words": ProbeScore(*uas(words, eb))}
    if with_dist:
        mlp = seeded(seed, lambda: DistWordsProbe(dim, s.dist_hidden).to(device))
        scores["dist_words"] = ProbeScore(*uas(train_probe(mlp, tb, s.epochs, s.lr_dist, seed), eb))
    return scores


# ---- the pass -----------------------------------------------------------------------------------------------------

@dataclass
class ProbeScore:
    uas: float  # percent
    n_arcs: int


@dataclass
class ProbeResult:
    probes: dict[str, ProbeScore]  # attn, attn_words, dist_words, random_init
    right_branching: float  # percent, the same eval arcs
    best_head: HeadScore  # best single head (either direction) on the same eval arcs (as clark.dep_all)
    n_eval_sentences: int
    n_eval_arcs: int
    n_train_sentences: int
    n_train_arcs: int
    n_train_documents: int
    random_init: str  # how the random-init baseline was obtained
    seconds: dict[str, float] = field(default_factory=dict)
    structural: StructuralScore | None = None  # Hewitt & Manning's structural probe on the model's vectors
    train_seed: int = 0  # probe initialisation and training order ($BERTATTN_SEED)
    tier: str = tiers.RECORDED  # quick/regression: a seeded training sample; full: every GUM train sentence
    n_root_words: int = 0  # scored root words among the eval arcs (0 without a ROOT candidate)

    def uas(self, name: str) -> float:
        return self.right_branching if name == "right_branching" else (
            self.best_head.accuracy if name == "best_head" else self.probes[name].uas)

    def label(self, name: str) -> str:
        if name == "best_head":
            return f"best single head {self.best_head.name} ({DIRECTIONS[self.best_head.direction]})"
        return PROBE_NAMES[name]

    def describe(self) -> str:
        return "; ".join(f"{self.label(k)} {self.uas(k):.1f}" for k in ("right_branching", "best_head", *self.probes))


def random_init_twin(loaded, seed: int = RANDOM_INIT_SEED):
    """Clark §5 baseline model: ``loaded``'s config with random weights, the embeddings copied from ``loaded``."""
    from ..model import model_from_config

    info = loaded.info
    twin = seeded(seed, lambda: model_from_config(
        loaded.model.config, loaded.tokenizer, f"random-init({info.name}) with its embeddings",
        f"{info.slug}-random-init-embeddings", seed=seed, device=info.device, source=info.source))
    twin.model.embeddings.load_state_dict(loaded.model.embeddings.state_dict())
    return twin


@dataclass
class ProbePass(PreparedPass):
    """The probes family's pass: word maps of the train and eval sentences (the model, then its random-init twin),
    and the probes trained on them."""

    train_encoded: list[Encoded] = field(default_factory=list)
    train_heads: list[np.ndarray] = field(default_factory=list)
    eval_heads: list[np.ndarray] = field(default_factory=list)
    train_trees: list[Tree] = field(default_factory=list)  # full gold trees, for the structural probe
    eval_trees: list[Tree] = field(default_factory=list)
    eval_arcs: list = field(default_factory=list)
    n_train_documents: int = 0
    settings: ProbeSettings = field(default_factory=ProbeSettings)
    data_paths: list = field(default_factory=list)
    tier: str = tiers.RECORDED

    def run(self, progress: bool = False) -> PassResult:
        """Timed: the sweeps and the training. Building the random-init twin is not timed."""
        info = self.loaded.info
        dev = torch.device(info.device)
        sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
        twin = None if info.random_init_seed is not None else random_init_twin(self.loaded)
        self.warm_up(dev)
        sync()
        start = time.perf_counter()
        result = self.compute(twin)
        sync()
        seconds = time.perf_counter() - start
        return PassResult(self.family, self.corpus, self.data, info, result, len(self.encoded), self.skipped, seconds,
                          extra={"seconds": result.seconds})

    def compute(self, twin) -> ProbeResult:
        s, info, dev = self.settings, self.loaded.info, torch.device(self.loaded.info.device)
        secs: dict[str, float] = {}
        t = time.perf_counter()
        dep = DependencyReducer(self.eval_arcs, info.n_layers, info.n_heads, info.device, relations=("All",))
        train, (train_states,) = extract(self.loaded, self.train_encoded, self.train_heads, self.batch_size,
                                         [HiddenWordStates()])
        evals, (dep_result, eval_states) = extract(self.loaded, self.encoded, self.eval_heads, self.batch_size,
                                                   [dep, HiddenWordStates()])
        secs["features"] = time.perf_counter() - t
        t = time.perf_counter()
        scores = train_probes(train, evals, s, dev)
        secs["training"] = time.perf_counter() - t
        t = time.perf_counter()
        structural = structural_probe([train_states[e.index] for e in self.train_encoded], self.train_trees,
                                      [eval_states[e.index] for e in self.encoded], self.eval_trees, s.structural, dev)
        del train_states, eval_states
        secs["structural"] = time.perf_counter() - t
        if twin is None:
            scores["random_init"] = scores["attn_words"]
            how = "the model is itself randomly initialised: its own Attn + words probe"
        else:
            del train, evals
            t = time.perf_counter()
            r_train, _ = extract(twin, self.train_encoded, self.train_heads, self.batch_size)
            r_eval, _ = extract(twin, self.encoded, self.eval_heads, self.batch_size)
            secs["random_init_features"] = time.perf_counter() - t
            t = time.perf_counter()
            scores["random_init"] = train_probes(r_train, r_eval, s, dev, with_dist=False)["attn_words"]
            secs["random_init_training"] = time.perf_counter() - t
            how = f"random weights (seed {RANDOM_INIT_SEED}) except the embeddings, copied from the model"
        n_eval_arcs, right = right_branching(self.eval_heads)
        n_root = int(sum((h == ROOT).sum() for h in self.eval_heads))
        best = dep_result.best_head("All")
        if n_root:  # a single head never picks ROOT (Clark's head predictor): on the probes' arcs, root words are misses
            best = HeadScore(best.layer, best.head, best.direction, best.accuracy * best.n / (best.n + n_root),
                             best.n + n_root)
        return ProbeResult(
            probes=scores, right_branching=right, best_head=best, n_eval_sentences=len(self.encoded),
            n_eval_arcs=n_eval_arcs, n_train_sentences=len(self.train_encoded),
            n_train_arcs=int(sum((h != -1).sum() for h in self.train_heads)), n_train_documents=self.n_train_documents,
            random_init=how, seconds=secs, structural=structural, train_seed=s.training_seed, tier=self.tier,
            n_root_words=n_root)


def right_branching(heads: list[np.ndarray]) -> tuple[int, float]:
    """(scored arcs, percent whose head is the next word): Clark's right-branching baseline on the probes' arcs
    (a root word's head is ROOT, never the next word)."""
    n = correct = 0
    for h in heads:
        scored = h != -1
        n += int(scored.sum())
        correct += int((h[scored] == np.arange(len(h))[scored] + 1).sum())
    return n, 100.0 * correct / max(n, 1)


# Tiers (as the fine-tuning families'): the quick tier (smoke run) trains on 300 GUM train sentences and evaluates
# 300; the regression tier trains on a seeded sample of 800 and evaluates 1000, the full tier trains on every one
# (Clark trained on all of PTB train).
TIERS = {"quick": {"n_train": 300, "n_eval": 300}, "regression": {"n_train": 800}, "full": {"n_train": None}}


def _reindexed(encoded: list[Encoded]) -> list[Encoded]:
    return [Encoded(i, e.input_ids, e.token_type_ids, e.word_index, e.n_words) for i, e in enumerate(encoded)]


PROBE_CORPORA = ("ewt_dev", "ewt_test", "gum_dev", "gum_test")  # + "_ud": gold trees as UD releases them


@family("probes", corpora=PROBE_CORPORA + tuple(f"{c}_ud" for c in PROBE_CORPORA), default_corpus="ewt_dev", trains=True)
def prepare_probes(loaded, data_dir: Path, corpus: str = "ewt_dev", limit: int | None = None, batch_size: int = 32,
                   settings: ProbeSettings | None = None, options: dict | None = None) -> ProbePass:
    """Clark §5: train on GUM train sentences (the regression tier: a seeded sample; ``--tier full``: all), evaluate on a
    seeded sample of ``corpus``."""
    import dataclasses

    from ..data.ud import CORPORA, load_corpus
    from ..settings import data_file

    tier = tiers.of_options(options, TIERS)
    s = settings or dataclasses.replace(ProbeSettings.from_env(), **TIERS[tier])
    base = corpus[:-3] if corpus.endswith("_ud") else corpus
    if base != corpus:
        s = dataclasses.replace(s, trees="ud")
    if s.trees not in TREES:
        raise DataError(f"probe gold trees {s.trees!r}: expected one of {', '.join(TREES)}")
    convert = sd_like if s.trees == "sd" else (lambda x: x)
    max_tokens = loaded.info.max_positions
    docs = gum_train_documents(data_dir)
    train_all, n_docs = sample_train_sentences(docs, s.n_train, s.seed)
    train_all = [convert(x) for x in train_all]
    train_enc, _ = drop_too_long([encode_words(loaded.tokenizer, i, x.words) for i, x in enumerate(train_all)],
                                 max_tokens)
    train_sents = [train_all[e.index] for e in train_enc]
    sentences = [convert(x) for x in load_corpus(data_dir, base, limit)]
    n_total = len(sentences)
    n_eval = n_total if s.n_eval is None else min(s.n_eval, n_total)
    sentences = [sentences[i] for i in sorted(random.Random(s.seed).sample(range(n_total), n_eval))]
    encoded, skipped = drop_too_long([encode_words(loaded.tokenizer, i, x.words) for i, x in enumerate(sentences)],
                                     max_tokens)
    kept = [sentences[e.index] for e in encoded]  # reducers index per-example arrays by Encoded.index: 0..n-1
    data = (f"train: {len(train_enc)} sentences " + ("sampled " if s.n_train is not None else "(all) ")
            + f"from {n_docs} of the {len(docs)} GUM train documents ({tier} tier"
            + ("; REDUCED BUDGET: --tier full's verdict counts" if s.n_train is not None else "")
            + f"); eval: {len(encoded)} of the "
            f"{n_total} sentences of {CORPORA[base]} (sample seed {s.seed}, training seed {s.training_seed}; UAS "
            + ("with a ROOT candidate, root words scored, without punct" if s.root else "without root and punct")
            + ("; SD-like gold trees: case heads the phrase, cc on the first conjunct)" if s.trees == "sd"
               else "; UD gold trees)"))
    return ProbePass(
        "probes", corpus, data, loaded, _reindexed(encoded), skipped, make_reducer=lambda: None, with_words=True,
        batch_size=batch_size, train_encoded=_reindexed(train_enc),
        train_heads=[gold_heads(x, s.root) for x in train_sents], eval_heads=[gold_heads(x, s.root) for x in kept],
        tier=tier, train_trees=[Tree.from_sentence(x) for x in train_sents],
        eval_trees=[Tree.from_sentence(x) for x in kept], eval_arcs=[sd_arcs(x) for x in kept], n_train_documents=n_docs,
        settings=s, data_paths=[data_file(data_dir, CORPORA[base]), data_file(data_dir, "gum/documents"),
                                *gum.split_files(data_dir)])


# ---- claim metrics (named by reference_numbers/clark2019_probes.toml) -----------------------------------------------

def _result(pr) -> ProbeResult:
    res = pr.result
    if res.n_eval_arcs == 0:
        raise NotApplicable("no scored arcs in the eval sentences")
    return res


REDUCED_NOTE = ("REDUCED BUDGET: the regression tier's seeded sample of the GUM train sentences; the verdict that counts "
                "is --tier full's (every sentence), and the two can differ")


def _train_note(res: ProbeResult) -> str:
    note = (f"trained on {res.n_train_sentences} GUM train sentences ({res.n_train_arcs} arcs, "
            f"{res.n_train_documents} documents; training seed {res.train_seed})")
    return note + (f"; {REDUCED_NOTE}" if TIERS.get(res.tier, {}).get("n_train") is not None else "")


def _bars(res: ProbeResult, probe: str, bars: dict) -> tuple[list[float], str]:
    """``uas(probe) - (uas(bar) + margin)`` per bar, and a readable line."""
    gaps, parts = [], []
    for name, margin in bars.items():
        level = res.uas(name) + margin
        gaps.append(res.uas(probe) - level)
        parts.append(f"{res.label(name)} {res.uas(name):.1f} {'+' if margin >= 0 else '-'} {abs(margin):g}"
                     f" = {level:.1f}")
    return gaps, f"{res.label(probe)} {res.uas(probe):.1f} vs " + ", ".join(parts)


def _gap_se(res: ProbeResult, probe: str, bar: str) -> float:
    """SE of UAS(probe) - UAS(bar) on the same eval arcs (binomial, taken as independent: errs wide)."""
    return difference_se((res.uas(probe), res.n_eval_arcs), (res.uas(bar), res.n_eval_arcs))


@metric("probe_uas")
def probe_uas(pr, probe: str) -> Measurement:
    """UAS (%) of a probe or baseline of Clark Table 3 on the eval arcs."""
    res = _result(pr)
    return Measurement(res.uas(probe), n=res.n_eval_arcs, n_unit="arcs", unit="UAS",
                       standard_error=binomial_se_points(res.uas(probe), res.n_eval_arcs),
                       detail=f"{res.describe()}; {_train_note(res)}")


@metric("probe_margin_over")
def probe_margin_over(pr, probe: str, bars: dict) -> Measurement:
    """How far the probe's UAS clears the highest of ``bars`` (name → margin in points); >= 0: clears them all."""
    res = _result(pr)
    gaps, line = _bars(res, probe, bars)
    return Measurement(min(gaps), n=res.n_eval_arcs, n_unit="arcs", unit="points over the highest bar",
                       standard_error=_gap_se(res, probe, list(bars)[int(np.argmin(gaps))]),
                       detail=f"{line}; {_train_note(res)}")


@metric("probe_margin_under")
def probe_margin_under(pr, probe: str, bars: dict) -> Measurement:
    """How far the probe's UAS stays under the lowest of ``bars`` (name → margin); <= 0: under them all."""
    res = _result(pr)
    gaps, line = _bars(res, probe, bars)
    return Measurement(max(gaps), n=res.n_eval_arcs, n_unit="arcs", unit="points over the lowest bar",
                       standard_error=_gap_se(res, probe, list(bars)[int(np.argmax(gaps))]),
                       detail=f"{line}; random init: {res.random_init}; {_train_note(res)}")


@metric("probe_vs_structural")
def probe_vs_structural(pr, probe: str = "attn_words") -> Measurement:
    """Clark §5: the probe's UAS minus Hewitt & Manning's structural probe's UUAS on the same model and eval set
    (the paper: 77 vs 80, "not directly comparable": directed heads vs an undirected minimum spanning tree)."""
    res = _result(pr)
    if res.structural is None:
        raise NotApplicable("this probes pass trained no structural probe")
    st = res.structural
    return Measurement(res.uas(probe) - st.uuas, n=res.n_eval_arcs, n_unit="arcs", unit="points (UAS - UUAS)",
                       standard_error=difference_se((res.uas(probe), res.n_eval_arcs), (st.uuas, st.n_edges)),
                       detail=f"{res.label(probe)} {res.uas(probe):.1f} UAS vs {st.describe()}; {_train_note(res)}",
                       values={"structural_layer": st.layer, "structural_uuas": st.uuas, "probe_uas": res.uas(probe)})
