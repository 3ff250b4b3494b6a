"""Clark §5 probes: the probe models (Attn, Attn + words, Distances + words), their training and their UAS."""
from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch

from ...claims.stats import mcnemar_exact
from ...engine.batching import length_order
from ...training.probe_loop import adam_epochs
from .constants import ProbeSettings
from .data import ROOT
from .reduce import Features

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
def arcs_correct(probe: torch.nn.Module, buckets: list[Bucket]) -> np.ndarray:
    """Per scored word (bucket by bucket, in the buckets' order): whether its highest-scoring candidate is the gold
    head."""
    out = []
    for bk in buckets:
        pred = _masked(probe(bk), bk).argmax(-1)
        scored = bk.heads >= 0
        out.append((pred[scored] == bk.heads[scored]).cpu().numpy())
    return np.concatenate(out) if out else np.zeros(0, bool)


def uas(probe: torch.nn.Module, buckets: list[Bucket]) -> tuple[float, int]:
    """Percent of scored words whose highest-scoring candidate is the gold head, and their number."""
    correct = arcs_correct(probe, buckets)
    return 100.0 * int(correct.sum()) / max(correct.size, 1), int(correct.size)


def _score(trained: torch.nn.Module, untrained: torch.nn.Module, buckets: list[Bucket]) -> ProbeScore:
    """The trained probe's UAS, and its test against the same probe untrained (the learned-model guard's)."""
    correct, before = arcs_correct(trained, buckets), arcs_correct(untrained, buckets)
    _, lost, gained = mcnemar_exact(before, correct)
    return ProbeScore(100.0 * int(correct.sum()) / max(correct.size, 1), int(correct.size),
                      untrained_uas=100.0 * int(before.sum()) / max(before.size, 1), gained=gained, lost=lost)


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
    # each probe is also scored untrained (its initial parameters; Attn + words from the untrained Attn probe) for
    # the learned-model guard (learned.probe)
    attn = train_probe(AttnProbe(n_maps).to(device), tb, s.epochs, s.lr_attn, seed)
    words = train_probe(AttnWordsProbe(n_maps, dim, attn).to(device), tb, s.epochs, s.lr_words, seed)
    scores = {"attn": _score(attn, AttnProbe(n_maps).to(device), eb),
              "attn_words": _score(words, AttnWordsProbe(n_maps, dim, AttnProbe(n_maps)).to(device), eb)}
    if with_dist:
        mlp = seeded(seed, lambda: DistWordsProbe(dim, s.dist_hidden).to(device))
        untrained = copy.deepcopy(mlp)
        scores["dist_words"] = _score(train_probe(mlp, tb, s.epochs, s.lr_dist, seed), untrained, eb)
    return scores



@dataclass
class ProbeScore:
    uas: float  # percent
    n_arcs: int
    untrained_uas: float | None = None  # the same probe before training, same arcs (the learned-model guard)
    gained: int = 0  # arcs right after training and wrong before
    lost: int = 0  # the reverse
