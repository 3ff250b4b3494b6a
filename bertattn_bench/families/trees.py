"""Htut et al. 2019, "Do Attention Heads in BERT Track Syntactic Dependencies?": trees decoded from one head.

Per head, each sentence's word-level map (mean over the pieces attending, sum over the pieces attended to;
[CLS]/[SEP] are not candidates, as in the dependency family) is decoded into a tree by MAX (each word's parent is
the word it attends to most) and, on a sample, by MST from the gold root (Chu-Liu-Edmonds, ``ufal.chu_liu_edmonds``:
:mod:`.common.tree_decoding`). Scored as undirected attachment (UUAS) per UD
relation (the part of the deprel before ``:``) and per tree, against the offset baseline of each relation (the most
common dependent→parent offset: :func:`.common.dependency_stats.offset_baselines`) and the chain tree (each word
attached to the next: the trivial tree baseline). Punctuation arcs are not scored (the dependency family's "All").

MAX is scored for every head in the reducer, batch by batch, and no map is kept. MST needs one head's whole map per
sentence: the word maps of every sentence (the first 30 under a sample cap such as the quick tier's) are kept (on the
device until the end: layers x heads x words² floats each, ~130 MB for MiniLM on PUD's 1,000 sentences), and at the
end every head is decoded by MST in both directions, as Htut decode every head (until stop 69 networkx's Edmonds,
~46 ms per 23-word tree, bounded the MST to the two best MAX heads, and until stop 70 to the first 100 sentences; the
C++ decoder takes ~0.1 ms).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ..base.plotting import save_figure
from ..claims.registry import Measurement, NotApplicable, family, figure, metric
from ..claims.stats import difference_se, mean_se
from ..engine.attention import head_name
from ..engine.passes import PreparedPass
from .common.tree_decoding import DIRECTIONS
from .common.tree_scoring import (  # noqa: F401 (RELATIONS, TreesReducer, gold_arcs: re-exported)
    MST_SENTENCES,
    MST_SENTENCES_CAPPED,
    RELATIONS,
    TreesReducer,
    TreesResult,
    best_max_tree,
    gold_arcs,
    tree_inputs,
)

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
    every head and sentence, MST over every head and direction on the kept sample."""
    res: TreesResult = pr.result
    if decoder == "max":
        layer, head, mean, se = best_max_tree(res)
        n = res.n_trees
        return Measurement(mean, n=n, n_unit="trees", head=head_name(layer, head), unit="points", standard_error=se,
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
                              f"{np.mean(best.chain_uuas):.1f}% on the first {len(diff)} trees; MST of "
                              f"{len(res.mst) // len(DIRECTIONS)} heads")


# ---- the pass ---------------------------------------------------------------------------------------------------

@family("trees", corpora=("pud_test", "ewt_dev", "gum_dev"), default_corpus="pud_test", quick_limit=200)
def prepare_trees(loaded, data_dir: Path, corpus: str = "pud_test", limit: int | None = None, batch_size: int = 32,
                  mst_sentences: int | None = None) -> PreparedPass:
    """One sentence per example (Htut: PUD); sentences longer than the model's positions are skipped, counted. MST
    decodes the first ``mst_sentences`` (30 under a sample cap, as the quick tier's; else all: None)."""
    inputs = tree_inputs(loaded, data_dir, corpus, limit)
    if mst_sentences is None:
        mst_sentences = MST_SENTENCES if limit is None else MST_SENTENCES_CAPPED
    return PreparedPass("trees", corpus, f"{inputs.label} (UD trees, undirected attachment)", loaded, inputs.encoded,
                        inputs.skipped, lambda: inputs.reducer(loaded.info, mst_sentences),
                        finish=inputs.with_baselines, with_words=True, batch_size=batch_size,
                        data_paths=[inputs.path])


# ---- figure -----------------------------------------------------------------------------------------------------

@figure("trees", result=TreesResult, each=True)
def trees_figure(pr, plt, directory: Path) -> list[Path]:
    """UUAS by layer and head (MAX trees, mean per tree) and per relation the best head's UUAS beside the offset
    baseline (issue 64)."""
    res = pr.result
    if not res.n_trees:
        return []
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
    return [save_figure(fig, directory, f"trees-{pr.model.slug}-{pr.corpus}.png")]
