"""Htut et al. 2019 (the ``trees`` and ``trees_ft`` families): MAX trees of every head scored on the device per UD
relation and per tree (UUAS, undirected), the MST sample kept and decoded for every head at the end
(:mod:`.tree_decoding`), and the inputs both families read (PUD/EWT/GUM sentences, their gold arcs and roots).
Shared below the families (issue 44: no family imports another's module); the method is told in
:mod:`bertattn_bench.families.trees`."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ...engine.attention import Reducer, head_name
from ...engine.batching import drop_too_long, encode_words, to_device, to_device_parts
from .dependency_stats import Arc, offset_baselines
from .tree_decoding import DIRECTIONS, chain_edges, max_edges, mst_edges, undirected_hits

# Htut et al.'s Table 2/3 relations first (nsubj, obj, advmod, amod), then the other frequent UD relations
RELATIONS = ("nsubj", "obj", "advmod", "amod", "det", "case", "nmod", "obl", "compound", "aux", "mark", "conj",
             "cc", "ccomp", "xcomp", "advcl", "acl", "cop", "nummod", "appos", "other")
# the MST sample: every sentence read (None), or under a tier's sample cap (the quick tier's) the first 30; every head
# is decoded on it, in both directions (until stop 70 the first 100 sentences: networkx's Edmonds set that bound)
MST_SENTENCES, MST_SENTENCES_CAPPED = None, 30


def gold_arcs(sentence, relations=RELATIONS) -> list[tuple[int, int, int]]:
    """(dependent, parent, relation id) of every non-root, non-punct arc (0-based words)."""
    other = relations.index("other")
    out = []
    for d, (h, rel) in enumerate(zip(sentence.heads, sentence.deprels)):
        base = rel.split(":")[0]
        if h > 0 and base != "punct":
            out.append((d, h - 1, relations.index(base) if base in relations else other))
    return out


@dataclass
class MstScore:
    layer: int
    head: int
    direction: int
    tree_uuas: list  # per sampled tree, percent
    max_tree_uuas: list  # the same head's MAX trees on the same sample
    chain_uuas: list  # the chain tree on the same sample
    hits: list  # per relation: gold arcs found by the MST trees

    @property
    def name(self) -> str:
        return head_name(self.layer, self.head)


@dataclass
class TreesResult:
    relations: tuple
    hits: torch.Tensor  # (L, R, H): gold arcs of each relation found by the head's MAX trees (undirected)
    n_arcs: np.ndarray  # (R,)
    tree_sum: torch.Tensor  # (L, H): sum over trees of (MAX tree UUAS - chain tree UUAS), points
    tree_sq: torch.Tensor  # (L, H): sum of its squares (the SE)
    tree_max_sum: torch.Tensor  # (L, H): sum over trees of MAX tree UUAS
    chain_sum: float
    n_trees: int
    n_sentences: int
    mst: list = field(default_factory=list)  # MstScore per (layer, head, direction)
    baselines: dict = field(default_factory=dict)  # relation -> OffsetBaseline

    def accuracy(self) -> torch.Tensor:
        return 100.0 * self.hits / torch.from_numpy(self.n_arcs).clamp(min=1).view(1, -1, 1).to(self.hits)


class TreesReducer(Reducer):
    """MAX decoding of every head, scored per relation and per tree on the device; the MST sample kept on the host."""

    maps_only = True

    def __init__(self, arcs_per_example, roots, n_layers: int, n_heads: int, device,
                 mst_sentences: int | None = MST_SENTENCES, relations=RELATIONS):
        self.arcs = [np.array(a, dtype=np.int64).reshape(-1, 3) for a in arcs_per_example]
        self.roots, self.relations = roots, tuple(relations)
        self.n_layers, self.n_heads, self.device = n_layers, n_heads, device
        self.mst_sentences = mst_sentences
        r = len(self.relations)
        self.hits = torch.zeros(n_layers, r, n_heads, dtype=torch.float64, device=device)
        self.tree = torch.zeros(3, n_layers, n_heads, dtype=torch.float64, device=device)  # diff, diff², MAX
        self.n_arcs = np.zeros(r, dtype=np.int64)
        self.chain_sum, self.n_trees, self.n_sentences = 0.0, 0, 0
        self.kept: dict[int, torch.Tensor] = {}  # example index -> (L, H, n, n) float32 maps, on the device

    def start_batch(self, batch) -> None:
        b_n, w = batch.word_mask.shape
        per = [self.arcs[ex.index] for ex in batch.examples]
        rows = np.concatenate([np.full(len(a), b, dtype=np.int64) for b, a in enumerate(per)])
        arcs = np.concatenate(per)
        self.n_arcs += np.bincount(arcs[:, 2], minlength=len(self.relations))
        roots = np.array([self.roots[ex.index] for ex in batch.examples], dtype=np.int64)
        n_gold = np.array([len(a) for a in per], dtype=np.float64)
        chain = np.array([np.abs(a[:, 0] - a[:, 1]).__eq__(1).sum() for a in per], dtype=np.float64)
        has = n_gold > 0
        chain_uuas = np.where(has, 100.0 * chain / n_gold.clip(min=1), 0.0)
        self.chain_sum += float(chain_uuas.sum())  # on the host: no device read in the batch loop
        self.n_trees += int(has.sum())
        self.n_sentences += b_n
        # built on the host, sent in one integer copy and one float copy (no host wait: batching.to_device)
        not_root = (arcs[:, 1] != roots[rows]).astype(np.int64)  # the root word's own argmax is no edge
        self.arc_b, self.arc_d, self.arc_h, self.arc_r, h_not_root = to_device_parts(
            [rows, arcs[:, 0], arcs[:, 1], arcs[:, 2], not_root], self.device)
        self.h_not_root = h_not_root.bool().view(-1, 1)
        floats = to_device(np.concatenate([(100.0 / n_gold.clip(min=1))[rows], chain_uuas, has.astype(np.float64)]),
                           self.device)
        a = len(rows)
        self.weight = floats[:a].view(-1, 1)  # each arc's share of its tree's UUAS
        self.chain_uuas, self.has_tree = floats[a:a + b_n], floats[a + b_n:].view(-1, 1)
        self.invalid = ~batch.word_mask[:, None, None, :] | torch.eye(w, dtype=torch.bool, device=self.device)
        self.word_from_h = batch.word_from.unsqueeze(1).expand(b_n, self.n_heads, w, -1)
        self.word_to = batch.word_to
        self.batch = batch
        # the MST sample's rows in this batch: their maps leave the device once, at the batch's end
        self.sample_rows = [b for b, ex in enumerate(batch.examples)
                            if self.mst_sentences is None or ex.index < self.mst_sentences]
        self.sample_maps: list[torch.Tensor] = []

    def update(self, layer: int, probs: torch.Tensor) -> None:
        words = (self.word_from_h @ probs.float()) @ self.word_to.unsqueeze(1)  # (B, H, W, W)
        if self.sample_rows:
            self.sample_maps.append(words[self.sample_rows])  # (k, H, W, W), one layer
        pred = words.masked_fill(self.invalid, float("-inf")).argmax(-1)  # (B, H, W): MAX parent of each word
        from_dep = pred[self.arc_b, :, self.arc_d] == self.arc_h.view(-1, 1)  # (A, H)
        from_head = (pred[self.arc_b, :, self.arc_h] == self.arc_d.view(-1, 1)) & self.h_not_root
        hit = (from_dep | from_head).double()
        self.hits[layer].index_add_(0, self.arc_r, hit)
        per_tree = torch.zeros(len(self.batch.examples), self.n_heads, dtype=torch.float64, device=self.device)
        per_tree.index_add_(0, self.arc_b, hit * self.weight)  # (B, H): each tree's MAX UUAS, percent
        valid = self.has_tree  # a sentence with no scored arc (punctuation only) is no tree
        diff = (per_tree - self.chain_uuas.view(-1, 1)) * valid
        self.tree[0, layer] += diff.sum(0)
        self.tree[1, layer] += diff.square().sum(0)
        self.tree[2, layer] += (per_tree * valid).sum(0)

    def end_batch(self, hidden_states=None) -> None:
        if self.sample_maps:  # kept on the device until finalize: no host wait in the batch loop
            maps = torch.stack(self.sample_maps, 1)  # (k, L, H, W, W)
            for row, b in enumerate(self.sample_rows):
                n = self.batch.examples[b].n_words
                self.kept[self.batch.examples[b].index] = maps[row, :, :, :n, :n]
            self.sample_maps = []
        self.batch = None

    def finalize(self) -> TreesResult:
        res = TreesResult(self.relations, self.hits.cpu(), self.n_arcs.copy(), self.tree[0].cpu(), self.tree[1].cpu(),
                          self.tree[2].cpu(), self.chain_sum, self.n_trees, self.n_sentences)
        kept = {i: list(m.cpu().numpy()) for i, m in self.kept.items()}
        res.mst = mst_scores(res, kept, self.arcs, self.roots, len(self.relations))
        return res


def mst_scores(res: TreesResult, kept: dict, arcs, roots, n_rel: int) -> list[MstScore]:
    """MST (and MAX, for comparison) of every head in both directions on the kept sample, in (layer, head,
    direction) order."""
    n_layers, n_heads = res.tree_sum.shape
    scores_of = [MstScore(layer, head, direction, [], [], [], [0] * n_rel)
                 for layer in range(n_layers) for head in range(n_heads) for direction in range(len(DIRECTIONS))]
    for i in sorted(kept):
        if not len(arcs[i]):
            continue
        gold = [(int(d), int(p)) for d, p, _ in arcs[i]]
        rels = arcs[i][:, 2].tolist()
        chain = 100.0 * sum(undirected_hits(chain_edges(len(kept[i][0][0])), gold)) / len(gold)
        max_uuas = {}  # per head: its MAX tree does not depend on the MST's direction
        for score in scores_of:
            scores = kept[i][score.layer][score.head]
            hits = undirected_hits(mst_edges(scores, roots[i], score.direction), gold)
            for ok, r in zip(hits, rels):
                score.hits[r] += int(ok)
            score.tree_uuas.append(100.0 * sum(hits) / len(gold))
            if (score.layer, score.head) not in max_uuas:
                max_hits = undirected_hits(max_edges(scores, roots[i]), gold)
                max_uuas[score.layer, score.head] = 100.0 * sum(max_hits) / len(gold)
            score.max_tree_uuas.append(max_uuas[score.layer, score.head])
            score.chain_uuas.append(chain)
    return scores_of


def best_max_tree(res: TreesResult) -> tuple[int, int, float, float]:
    """(layer, head, mean tree UUAS − chain's in points, its SE from the per-tree differences) of the head whose MAX
    trees beat the chain most."""
    flat = int(torch.argmax(res.tree_sum))
    layer, head = divmod(flat, res.tree_sum.shape[1])
    n = res.n_trees
    mean = float(res.tree_sum[layer, head]) / n
    sd = (max(float(res.tree_sq[layer, head]) / n - mean * mean, 0.0) * n / max(n - 1, 1)) ** 0.5
    return layer, head, mean, sd / n ** 0.5


@dataclass
class TreeInputs:
    """A UD corpus read for the trees: the encoded sentences (too long ones skipped), gold arcs and root words."""

    encoded: list
    skipped: object
    arcs: list
    roots: list
    path: Path
    label: str

    def with_baselines(self, result: TreesResult) -> TreesResult:
        """The offset baseline of each relation on the sentences read (not the skipped ones), set on ``result``."""
        result.baselines = offset_baselines([[Arc(RELATIONS[r], d, h) for d, h, r in self.arcs[e.index]]
                                             for e in self.encoded], relations=RELATIONS)
        return result

    def reducer(self, info, mst_sentences: int | None) -> TreesReducer:
        return TreesReducer(self.arcs, self.roots, info.n_layers, info.n_heads, info.device,
                            mst_sentences=mst_sentences)


def tree_inputs(loaded, data_dir: Path, corpus: str, limit: int | None) -> TreeInputs:
    """One sentence per example; sentences longer than the model's positions are skipped, counted."""
    from ...data.ud import CORPORA, load_corpus

    sentences = load_corpus(data_dir, corpus, limit)
    encoded, skipped = drop_too_long([encode_words(loaded.tokenizer, i, s.words) for i, s in enumerate(sentences)],
                                     loaded.info.max_positions)
    return TreeInputs(encoded, skipped, [gold_arcs(s) for s in sentences], [s.heads.index(0) for s in sentences],
                      data_dir / CORPORA[corpus], CORPORA[corpus])
