"""Htut et al. 2019, "Do Attention Heads in BERT Track Syntactic Dependencies?": trees decoded from one head.

Per head, each sentence's word-level map (mean over the pieces attending, sum over the pieces attended to;
[CLS]/[SEP] are not candidates, as in the dependency family) is decoded into a tree by MAX (each word's parent is
the word it attends to most) and, for a bounded sample, by MST from the gold root (networkx's
``maximum_spanning_arborescence``: :mod:`.common.tree_decoding`). Scored as undirected attachment (UUAS) per UD
relation (the part of the deprel before ``:``) and per tree, against the offset baseline of each relation (the most
common dependent→parent offset: :func:`.common.dependency_stats.offset_baselines`) and the chain tree (each word
attached to the next: the trivial tree baseline). Punctuation arcs are not scored (the dependency family's "All").

MAX is scored for every head in the reducer, batch by batch, and no map is kept. MST needs one head's whole map per
sentence: the word maps of the first ``mst_sentences`` sentences (data order) are kept (on the device until the end:
at most 100 x layers x heads x words² floats, 26 MB for MiniLM's 30-word sentences), and at the end
the :data:`MST_HEADS` heads with the best mean MAX tree UUAS are decoded by MST in both directions (deviation: Htut
decode every head; networkx's Edmonds costs about 4 ms of CPU per 25-word tree and direction, so the MST is bounded:
the first 100 sentences, 30 under a sample cap such as the quick tier's).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ..base.plotting import pyplot, save_figure
from ..claims.registry import Measurement, NotApplicable, family, figure, metric
from ..claims.stats import difference_se, mean_se
from ..engine.attention import Reducer, head_name
from ..engine.batching import drop_too_long, encode_words, to_device, to_device_parts
from ..engine.passes import PreparedPass
from .common.dependency_stats import Arc, offset_baselines
from .common.tree_decoding import DIRECTIONS, chain_edges, max_edges, mst_edges, undirected_hits

# Htut et al.'s Table 2/3 relations first (nsubj, obj, advmod, amod), then the other frequent UD relations
RELATIONS = ("nsubj", "obj", "advmod", "amod", "det", "case", "nmod", "obl", "compound", "aux", "mark", "conj",
             "cc", "ccomp", "xcomp", "advcl", "acl", "cop", "nummod", "appos", "other")
# the MST sample: the first sentences of the data read (a tier's sample cap set: the quick tier's), and the heads
MST_SENTENCES, MST_SENTENCES_CAPPED, MST_HEADS = 100, 30, 2


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
    mst: list = field(default_factory=list)  # MstScore per (top head, direction)
    baselines: dict = field(default_factory=dict)  # relation -> OffsetBaseline

    def accuracy(self) -> torch.Tensor:
        return 100.0 * self.hits / torch.from_numpy(self.n_arcs).clamp(min=1).view(1, -1, 1).to(self.hits)


class TreesReducer(Reducer):
    """MAX decoding of every head, scored per relation and per tree on the device; the MST sample kept on the host."""

    maps_only = True

    def __init__(self, arcs_per_example, roots, n_layers: int, n_heads: int, device,
                 mst_sentences: int = MST_SENTENCES, relations=RELATIONS):
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
        self.sample_rows = [b for b, ex in enumerate(batch.examples) if ex.index < self.mst_sentences]
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


def mst_scores(res: TreesResult, kept: dict, arcs, roots, n_rel: int, heads: int = MST_HEADS) -> list[MstScore]:
    """MST (and MAX, for comparison) of the ``heads`` best heads by mean MAX tree UUAS, on the kept sample."""
    order = torch.argsort(res.tree_max_sum.flatten(), descending=True)[:heads].tolist()
    sample = [i for i in sorted(kept) if len(arcs[i])]
    out = []
    for flat in order:
        layer, head = divmod(flat, res.tree_sum.shape[1])
        for direction in range(len(DIRECTIONS)):
            score = MstScore(layer, head, direction, [], [], [], [0] * n_rel)
            for i in sample:
                gold = [(int(d), int(p)) for d, p, _ in arcs[i]]
                scores = kept[i][layer][head]
                hits = undirected_hits(mst_edges(scores, roots[i], direction), gold)
                for ok, r in zip(hits, arcs[i][:, 2]):
                    score.hits[int(r)] += int(ok)
                score.tree_uuas.append(100.0 * sum(hits) / len(gold))
                score.max_tree_uuas.append(100.0 * sum(undirected_hits(max_edges(scores, roots[i]), gold)) / len(gold))
                score.chain_uuas.append(100.0 * sum(undirected_hits(chain_edges(len(scores)), gold)) / len(gold))
            out.append(score)
    return out


# ---- claim metrics (named by reference_numbers/htut2019_trees.toml) ---------------------------------------------

@metric("tree_relation_gap")
def tree_relation_gap(pr, relation: str) -> Measurement:
    """The best head's MAX UUAS on ``relation``'s arcs minus the relation's offset baseline, in points."""
    res: TreesResult = pr.result
    if relation not in res.baselines:
        raise NotApplicable(f"no {relation!r} arc in the data read")
    r = res.relations.index(relation)
    acc = res.accuracy()[:, r, :]  # (L, H)
    flat = int(torch.argmax(acc))
    layer, head = divmod(flat, acc.shape[1])
    best, base = float(acc[layer, head]), res.baselines[relation]
    return Measurement(best - base.accuracy, n=base.n, n_unit="arcs", head=head_name(layer, head), unit="points",
                       standard_error=difference_se((best, base.n), (base.accuracy, base.n)),
                       detail=f"best MAX head {head_name(layer, head)} {best:.1f}% vs offset ({base.offset:+d}) "
                              f"{base.accuracy:.1f}% (undirected, {base.n} arcs)")


@metric("tree_best_gap")
def tree_best_gap(pr, decoder: str = "max") -> Measurement:
    """The best head's mean per-tree UUAS minus the chain tree's on the same trees, in points (paired SE): MAX over
    every head and sentence, MST over the decoded heads and the kept sample."""
    res: TreesResult = pr.result
    if decoder == "max":
        flat = int(torch.argmax(res.tree_sum))
        layer, head = divmod(flat, res.tree_sum.shape[1])
        n = res.n_trees
        mean = float(res.tree_sum[layer, head]) / n
        sd = (max(float(res.tree_sq[layer, head]) / n - mean * mean, 0.0) * n / max(n - 1, 1)) ** 0.5
        return Measurement(mean, n=n, n_unit="trees", head=head_name(layer, head), unit="points",
                           standard_error=sd / n ** 0.5,
                           detail=f"best MAX head {head_name(layer, head)}: mean tree UUAS "
                                  f"{float(res.tree_max_sum[layer, head]) / n:.1f}% vs chain {res.chain_sum / n:.1f}%")
    if not res.mst or not res.mst[0].tree_uuas:
        raise NotApplicable("no tree decoded by MST (empty sample)")
    best = max(res.mst, key=lambda m: float(np.mean(m.tree_uuas)))
    diff = np.array(best.tree_uuas) - np.array(best.chain_uuas)
    return Measurement(float(diff.mean()), n=len(diff), n_unit="trees", head=best.name, unit="points",
                       standard_error=mean_se(diff),
                       detail=f"best MST head {best.name} ({DIRECTIONS[best.direction]}): mean tree UUAS "
                              f"{np.mean(best.tree_uuas):.1f}% (its MAX {np.mean(best.max_tree_uuas):.1f}%) vs chain "
                              f"{np.mean(best.chain_uuas):.1f}% on the first {len(diff)} trees; MST of the "
                              f"{len(res.mst) // len(DIRECTIONS)} best MAX heads")


# ---- the pass ---------------------------------------------------------------------------------------------------

@family("trees", corpora=("pud_test", "ewt_dev", "gum_dev"), default_corpus="pud_test", quick_limit=200)
def prepare_trees(loaded, data_dir: Path, corpus: str = "pud_test", limit: int | None = None, batch_size: int = 32,
                  mst_sentences: int | None = None) -> PreparedPass:
    """One sentence per example (Htut: PUD); sentences longer than the model's positions are skipped, counted. MST
    decodes the first ``mst_sentences`` (30 under a sample cap, as the quick tier's, else 100)."""
    from ..data.ud import CORPORA, load_corpus

    sentences = load_corpus(data_dir, corpus, limit)
    encoded, skipped = drop_too_long([encode_words(loaded.tokenizer, i, s.words) for i, s in enumerate(sentences)],
                                     loaded.info.max_positions)
    arcs = [gold_arcs(s) for s in sentences]
    roots = [s.heads.index(0) for s in sentences]
    info = loaded.info
    if mst_sentences is None:
        mst_sentences = MST_SENTENCES if limit is None else MST_SENTENCES_CAPPED

    def finish(result):
        result.baselines = offset_baselines([[Arc(RELATIONS[r], d, h) for d, h, r in arcs[e.index]] for e in encoded],
                                            relations=RELATIONS)
        return result

    return PreparedPass("trees", corpus, f"{CORPORA[corpus]} (UD trees, undirected attachment)", loaded, encoded,
                        skipped, lambda: TreesReducer(arcs, roots, info.n_layers, info.n_heads, info.device,
                                                      mst_sentences=mst_sentences),
                        finish=finish, with_words=True, batch_size=batch_size, data_paths=[data_dir / CORPORA[corpus]])


# ---- figure -----------------------------------------------------------------------------------------------------

@figure("trees")
def trees_figure(pass_results, directory: Path) -> list[Path]:
    """UUAS by layer and head (MAX trees, mean per tree) and per relation the best head's UUAS beside the offset
    baseline (issue 64)."""
    plt = pyplot()
    paths = []
    for pr in pass_results:
        res = pr.result
        if not isinstance(res, TreesResult) or not res.n_trees:
            continue
        fig, (left, right) = plt.subplots(1, 2, figsize=(12, 3.8), gridspec_kw={"width_ratios": [1, 1.6]})
        tree = (res.tree_max_sum / res.n_trees).numpy()
        im = left.imshow(tree, cmap="viridis", aspect="auto")
        left.set_xticks(range(tree.shape[1]), [str(h + 1) for h in range(tree.shape[1])], fontsize=6)
        left.set_yticks(range(tree.shape[0]), [str(l + 1) for l in range(tree.shape[0])], fontsize=6)
        left.set_xlabel("head")
        left.set_ylabel("layer")
        left.set_title(f"mean tree UUAS, MAX (chain: {res.chain_sum / res.n_trees:.1f}%)", fontsize=8)
        fig.colorbar(im, ax=left, fraction=0.046)
        shown = [r for r in res.relations if r in res.baselines]
        acc = res.accuracy()
        best = [float(acc[:, res.relations.index(r), :].max()) for r in shown]
        x = np.arange(len(shown))
        right.bar(x - 0.2, best, 0.4, label="best head (MAX, undirected)")
        right.bar(x + 0.2, [res.baselines[r].accuracy for r in shown], 0.4, label="offset baseline")
        right.set_xticks(x, shown, fontsize=7, rotation=45)
        right.set_ylabel("UUAS %")
        right.legend(fontsize=7)
        fig.suptitle(f"{pr.model.name} / {pr.corpus}: trees from heads (Htut et al. 2019; n = {res.n_trees} trees)",
                     fontsize=9)
        paths.append(save_figure(fig, directory, f"trees-{pr.model.slug}-{pr.corpus}.png"))
    return paths
