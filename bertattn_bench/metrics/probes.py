"""Clark et al. §5, Table 3: attention-based probing classifiers for dependency parsing.

The model's attention is held fixed; small graph-based probes are trained on its word-level attention maps
(Clark §4.1 pooling: sum over the pieces attended to, mean over the pieces attending; [CLS]/[SEP] dropped).
For dependent j and candidate head i, with α^k_ij the attention from word i to word j in head k (all L·H heads):

* **Attention-Only**: p(i | j) ∝ exp(Σ_k w_k α^k_ij + u_k α^k_ji); only w and u are trained.
* **Attention-and-Words**: the weights become W_k,:(v_i ⊕ v_j) and U_k,:(v_i ⊕ v_j). Clark's v are GloVe vectors;
  GloVe is not available offline, so v is **the model's own input word-piece embedding averaged over the word's
  pieces** (a deviation), L2-normalised, with a constant 1 appended (a per-head bias, started from the trained
  Attention-Only weights).
* Baselines: right-branching (the head is the next word); **distances + words**, a one-hidden-layer MLP on v_i, v_j,
  offset indicators (|i - j| <= 5, ahead/behind apart) and continuous distances ahead/behind (Clark fn. 4); and
  **random init**, the Attention-and-Words probe on a model of the same config with random weights except the
  embeddings, copied from the model under test. For a model that is itself randomly initialised (the negative
  control) that baseline *is* the model, and its own probe is reused.

Candidates are the other words of the sentence (no ROOT): root words and ``punct`` dependents are neither trained
on nor scored (UAS as syntax.py's "All"). Training data: a seeded sample of sentences from the GUM train documents
(``gum/documents`` files whose ``# newdoc id`` is in neither UD GUM dev nor test); evaluation: a seeded sample of the
dev set. Training: Adam on mini-batches of length-sorted sentences in a seeded order, a fixed number of epochs;
deterministic on one device. Sizes fit the CI budget (:class:`ProbeSettings`); n is reported with every value.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ..attention import Reducer, run_reducers
from ..batching import Encoded, drop_too_long, encode_words, iter_batches
from ..errors import DataError
from ..passes import PassResult, PreparedPass
from ..registry import Measurement, NotApplicable, binomial_se, difference_se, family, metric
from .structural_probe import HiddenWordStates, StructuralScore, StructuralSettings, Tree, structural_probe
from .syntax import DIRECTIONS, DependencyReducer, HeadScore, offset_baselines, sd_arcs

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
    dist_hidden: int = 64
    max_offset: int = 5  # offset indicators for |i - j| <= max_offset (Clark fn. 4: "short distances")
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

def _newdoc_id(path: Path) -> str | None:
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.startswith("# newdoc id"):
                return line.split("=", 1)[1].strip()
            if line.strip() and not line.startswith("#"):
                return None
    return None


def gum_split_files(data_dir: Path) -> list[Path]:
    from ..settings import data_file

    return [data_file(data_dir, f"ud_english_gum/en_gum-ud-{split}.conllu") for split in ("dev", "test")]


def gum_train_documents(data_dir: Path) -> list[Path]:
    """The GUM documents in neither UD GUM dev nor test (gum/SOURCE.md: 178 documents)."""
    from ..settings import data_file

    held_out: set[str] = set()
    for path in gum_split_files(data_dir):
        with path.open(encoding="utf-8") as f:
            held_out.update(line.split("=", 1)[1].strip() for line in f if line.startswith("# newdoc id"))
    docs = data_file(data_dir, "gum/documents")
    out = []
    for path in sorted(docs.glob("*.conllu")):
        doc_id = _newdoc_id(path)
        if doc_id is None:
            raise DataError(f"{path}:1: no '# newdoc id = ...' comment before the first word line")
        if doc_id not in held_out:
            out.append(path)
    if not out:
        raise DataError(f"{docs}: no GUM train documents (every document is in UD GUM dev or test)")
    return out


def sample_train_sentences(paths: list[Path], n: int, seed: int) -> tuple[list, int]:
    """Documents in a seeded order, read until they hold 2n sentences of >= 2 words; a seeded sample of n of those.

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
        if len(pool) >= 2 * n:
            break
    if len(pool) > n:
        pool = [pool[i] for i in sorted(rng.sample(range(len(pool)), n))]
    return pool, n_docs


def gold_heads(sentence) -> np.ndarray:
    """0-based head per word, -1 where the word is not scored (root, punct): the "All" arcs of syntax.py."""
    heads = np.full(len(sentence.words), -1, dtype=np.int64)
    for a in sd_arcs(sentence):
        if a.relation == "All":
            heads[a.dependent] = a.head
    return heads


# ---- features: word-level maps from the batched core -------------------------------------------------------------

class WordMapReducer(Reducer):
    """Keeps each sentence's word-level maps ``(L·H, W, W)`` (``[k, a, b]``: from word a to word b) as float16, and its
    word vectors (input word-piece embeddings averaged over the word's pieces), on the model's device. For a
    subsample only: it keeps maps (the probes train on them)."""

    def __init__(self, n_layers: int, n_heads: int, embeddings: torch.Tensor | None = None):
        self.n_layers, self.n_heads = n_layers, n_heads
        self.embeddings = embeddings
        self.maps: dict[int, torch.Tensor] = {}
        self.vectors: dict[int, torch.Tensor] = {}

    def start_batch(self, batch) -> None:
        self.batch = batch
        b, w = batch.word_mask.shape
        self.buffer = torch.zeros(b, self.n_layers * self.n_heads, w, w, dtype=torch.float16,
                                  device=batch.input_ids.device)
        if self.embeddings is not None:
            vec = batch.word_from @ self.embeddings[batch.input_ids].float()  # (B, W, d)
            for i, ex in enumerate(batch.examples):
                self.vectors[ex.index] = vec[i, :ex.n_words]

    def update(self, layer: int, probs: torch.Tensor) -> None:
        b = self.batch
        words = b.word_from.unsqueeze(1) @ probs.float() @ b.word_to.unsqueeze(1)  # (B, H, W, W)
        self.buffer[:, layer * self.n_heads:(layer + 1) * self.n_heads] = words.half()
        if layer == self.n_layers - 1:
            for i, ex in enumerate(b.examples):
                self.maps[ex.index] = self.buffer[i, :, :ex.n_words, :ex.n_words]

    def finalize(self):
        return self.maps, self.vectors


@dataclass
class Features:
    """Per sentence: maps (K, W, W) float16, vectors (W, d), gold heads (W,) with -1 = not scored."""

    maps: list[torch.Tensor]
    vectors: list[torch.Tensor]
    heads: list[np.ndarray]

    @property
    def n_arcs(self) -> int:
        return int(sum((h >= 0).sum() for h in self.heads))


def extract(loaded, encoded: list[Encoded], heads: list[np.ndarray], batch_size: int,
            extra_reducers=()) -> tuple[Features, list]:
    """One batched sweep of ``loaded`` over ``encoded`` (indexed 0..n-1): word maps + vectors (+ other reducers)."""
    info = loaded.info
    red = WordMapReducer(info.n_layers, info.n_heads, loaded.model.get_input_embeddings().weight.detach())
    batches = iter_batches(encoded, loaded.tokenizer, torch.device(info.device), batch_size, with_words=True)
    (maps, vectors), *rest = run_reducers(loaded.model, batches, [red, *extra_reducers])
    order = [e.index for e in encoded]
    return Features([maps[i] for i in order], [vectors[i] for i in order], [heads[i] for i in order]), rest


# ---- probes -----------------------------------------------------------------------------------------------------

@dataclass
class Bucket:
    """Padded sentences; the maps in two layouts for batched products: ``by_from[b, x, k, y]`` = α^k from word x to
    word y, ``by_to[b, x, k, y]`` = α^k from word y to word x."""

    by_from: torch.Tensor  # (B, W, K, W) float32
    by_to: torch.Tensor  # (B, W, K, W) float32
    vectors: torch.Tensor  # (B, W, d+1): L2-normalised, constant 1 appended
    heads: torch.Tensor  # (B, W) long, -1 = not scored
    words: torch.Tensor  # (B, W) bool, real words
    offsets: torch.Tensor  # (W, W) long: candidate i minus dependent j, at [j, i]


def make_buckets(feats: Features, size: int, device, max_elements: int | None = None) -> list[Bucket]:
    """Length-sorted groups of ``size`` sentences (fewer where a group would exceed ``max_elements`` map entries)."""
    order = sorted(range(len(feats.maps)), key=lambda i: feats.maps[i].shape[-1])
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
        for b, i in enumerate(idx):
            n = feats.maps[i].shape[-1]
            maps[b, :, :n, :n] = feats.maps[i].to(device).float()
            v = feats.vectors[i].to(device).float()
            vec[b, :n, :d] = v / v.norm(dim=-1, keepdim=True).clamp(min=1e-6)
            vec[b, :n, d] = 1.0
            heads[b, :n] = torch.from_numpy(feats.heads[i])
            words[b, :n] = True
        pos = torch.arange(w)
        out.append(Bucket(maps.permute(0, 2, 1, 3).contiguous(), maps.permute(0, 3, 1, 2).contiguous(), vec,
                          heads.to(device), words.to(device), (pos[None, :] - pos[:, None]).to(device)))
    return out


def _contract(weights: torch.Tensor, maps: torch.Tensor) -> torch.Tensor:
    """``out[b, x, r, y] = Σ_k weights[b, x, r, k] maps[b, x, k, y]``: one batched product per word x."""
    b, w, r, k = weights.shape
    return (weights.reshape(b * w, r, k) @ maps.reshape(b * w, k, -1)).view(b, w, r, -1)


class AttnProbe(torch.nn.Module):
    """Attention-Only: score[j, i] = Σ_k w_k α^k_ij + u_k α^k_ji (Clark §5)."""

    def __init__(self, n_maps: int):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(n_maps))
        self.u = torch.nn.Parameter(torch.zeros(n_maps))

    def forward(self, bk: Bucket) -> torch.Tensor:
        b, w, k, _ = bk.by_from.shape
        r = _contract(torch.stack([self.w, self.u]).expand(b, w, 2, k), bk.by_from)  # (B, x, 2, y)
        # Σ w_k α^k_ij sits at [i, j] (x = i): transposed; Σ u_k α^k_ji sits at [j, i] (x = j)
        return r[:, :, 0].transpose(1, 2) + r[:, :, 1]


class AttnWordsProbe(torch.nn.Module):
    """Attention-and-Words: the head weights are W_k,:(v_i ⊕ v_j) and U_k,:(v_i ⊕ v_j) (Clark §5); each v ends in a
    constant 1 (a per-head bias), whose weights start from the Attention-Only probe's."""

    def __init__(self, n_maps: int, dim: int, start: AttnProbe | None = None):
        super().__init__()
        # columns [0, dim): the candidate's v_i; [dim, 2 dim): the dependent's v_j
        self.W = torch.nn.Parameter(torch.zeros(n_maps, 2 * dim))
        self.U = torch.nn.Parameter(torch.zeros(n_maps, 2 * dim))
        self.dim = dim
        if start is not None:
            with torch.no_grad():
                self.W[:, dim - 1] = start.w
                self.U[:, dim - 1] = start.u

    def forward(self, bk: Bucket) -> torch.Tensor:
        v, d = bk.vectors, self.dim
        cand_w, dep_w = v @ self.W[:, :d].T, v @ self.W[:, d:].T  # (B, W, K)
        cand_u, dep_u = v @ self.U[:, :d].T, v @ self.U[:, d:].T
        # W term (α^k_ij): the v_i part lands at [i, j] (by_from, x = i), the v_j part at [j, i] (by_to, x = j)
        # U term (α^k_ji): the v_i part lands at [i, j] (by_to, x = i), the v_j part at [j, i] (by_from, x = j)
        r1 = _contract(torch.stack([cand_w, dep_u], 2), bk.by_from)
        r2 = _contract(torch.stack([cand_u, dep_w], 2), bk.by_to)
        return (r1[:, :, 0] + r2[:, :, 0]).transpose(1, 2) + r1[:, :, 1] + r2[:, :, 1]


class DistWordsProbe(torch.nn.Module):
    """Distances + words (Clark §5 baseline, fn. 4): a one-hidden-layer MLP on v_i, v_j, offset indicators for
    |i - j| <= max_offset (ahead and behind apart, one more each for farther) and continuous distances."""

    def __init__(self, dim: int, hidden: int, max_offset: int):
        super().__init__()
        self.max_offset = max_offset
        self.cand = torch.nn.Linear(dim, hidden, bias=False)
        self.dep = torch.nn.Linear(dim, hidden)
        self.offset = torch.nn.Embedding(2 * max_offset + 3, hidden)
        self.dist = torch.nn.Linear(2, hidden, bias=False)
        self.out = torch.nn.Linear(hidden, 1)

    def forward(self, bk: Bucket) -> torch.Tensor:
        off, m = bk.offsets, self.max_offset  # off[j, i] = i - j
        ahead_behind = torch.stack([off.clamp(min=0), (-off).clamp(min=0)], -1).float() / 10.0
        pair = self.offset(off.clamp(-m - 1, m + 1) + m + 1) + self.dist(ahead_behind)  # (W, W, h)
        h = self.cand(bk.vectors).unsqueeze(1) + self.dep(bk.vectors).unsqueeze(2) + pair  # (B, j, i, h)
        return self.out(torch.relu(h)).squeeze(-1)


def _masked(scores: torch.Tensor, bk: Bucket) -> torch.Tensor:
    """Candidates: the other real words of the sentence."""
    w = scores.shape[-1]
    invalid = ~bk.words[:, None, :] | torch.eye(w, dtype=torch.bool, device=scores.device)
    return scores.masked_fill(invalid, float("-inf"))


def train_probe(probe: torch.nn.Module, buckets: list[Bucket], epochs: int, lr: float, seed: int) -> torch.nn.Module:
    """Adam over the buckets in a seeded order each epoch; cross-entropy over the candidate heads."""
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(probe.parameters(), lr=lr)
    for _ in range(epochs):
        for b in torch.randperm(len(buckets), generator=gen).tolist():
            bk = buckets[b]
            scores = _masked(probe(bk), bk)
            loss = torch.nn.functional.cross_entropy(scores.flatten(0, 1), bk.heads.flatten(), ignore_index=-1)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return probe


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
        mlp = seeded(seed, lambda: DistWordsProbe(dim, s.dist_hidden, s.max_offset).to(device))
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
        all_arcs = [[a for a in arcs if a.relation == "All"] for arcs in self.eval_arcs]
        base = offset_baselines(all_arcs, ("All",)).get("All")
        n_eval_arcs = sum(len(a) for a in all_arcs)
        return ProbeResult(
            probes=scores, right_branching=base.right_branching if base else float("nan"),
            best_head=dep_result.best_head("All"), n_eval_sentences=len(self.encoded), n_eval_arcs=n_eval_arcs,
            n_train_sentences=len(self.train_encoded), n_train_arcs=int(sum((h >= 0).sum() for h in self.train_heads)),
            n_train_documents=self.n_train_documents, random_init=how, seconds=secs, structural=structural,
            train_seed=s.training_seed)


def _reindexed(encoded: list[Encoded]) -> list[Encoded]:
    return [Encoded(i, e.input_ids, e.token_type_ids, e.word_index, e.n_words) for i, e in enumerate(encoded)]


@family("probes", corpora=("ewt_dev", "ewt_test", "gum_dev", "gum_test"), default_corpus="ewt_dev")
def prepare_probes(loaded, data_dir: Path, corpus: str = "ewt_dev", limit: int | None = None, batch_size: int = 32,
                   settings: ProbeSettings | None = None) -> ProbePass:
    """Clark §5: train on a seeded sample of GUM train sentences, evaluate on a seeded sample of ``corpus``."""
    from ..data.ud import CORPORA, load_corpus
    from ..settings import data_file

    s = settings or ProbeSettings.from_env()
    max_tokens = loaded.info.max_positions
    docs = gum_train_documents(data_dir)
    train_all, n_docs = sample_train_sentences(docs, s.n_train, s.seed)
    train_enc, _ = drop_too_long([encode_words(loaded.tokenizer, i, x.words) for i, x in enumerate(train_all)],
                                 max_tokens)
    train_sents = [train_all[e.index] for e in train_enc]
    sentences = load_corpus(data_dir, corpus, limit)
    n_total = len(sentences)
    n_eval = n_total if s.n_eval is None else min(s.n_eval, n_total)
    sentences = [sentences[i] for i in sorted(random.Random(s.seed).sample(range(n_total), n_eval))]
    encoded, skipped = drop_too_long([encode_words(loaded.tokenizer, i, x.words) for i, x in enumerate(sentences)],
                                     max_tokens)
    kept = [sentences[e.index] for e in encoded]  # reducers index per-example arrays by Encoded.index: 0..n-1
    data = (f"train: {len(train_enc)} sentences sampled from {n_docs} of the {len(docs)} GUM train documents; eval: "
            f"{len(encoded)} of the {n_total} sentences of {CORPORA[corpus]} (sample seed {s.seed}, training seed {s.training_seed}; UAS without punct)")
    return ProbePass(
        "probes", corpus, data, loaded, _reindexed(encoded), skipped, make_reducer=lambda: None, with_words=True,
        batch_size=batch_size, train_encoded=_reindexed(train_enc), train_heads=[gold_heads(x) for x in train_sents],
        eval_heads=[gold_heads(x) for x in kept], train_trees=[Tree.from_sentence(x) for x in train_sents],
        eval_trees=[Tree.from_sentence(x) for x in kept], eval_arcs=[sd_arcs(x) for x in kept], n_train_documents=n_docs,
        settings=s, data_paths=[data_file(data_dir, CORPORA[corpus]), data_file(data_dir, "gum/documents"),
                                *gum_split_files(data_dir)])


# ---- claim metrics (named by reference_numbers/clark2019_probes.toml) -----------------------------------------------

def _result(pr) -> ProbeResult:
    res = pr.result
    if res.n_eval_arcs == 0:
        raise NotApplicable("no scored arcs in the eval sentences")
    return res


def _train_note(res: ProbeResult) -> str:
    return (f"trained on {res.n_train_sentences} GUM train sentences ({res.n_train_arcs} arcs, "
            f"{res.n_train_documents} documents; training seed {res.train_seed})")


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
                       standard_error=binomial_se(res.uas(probe), res.n_eval_arcs),
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
                       detail=f"{res.label(probe)} {res.uas(probe):.1f} UAS vs {st.describe()}; {_train_note(res)}")
