"""Htut et al.'s trees from heads: MAX and MST decoding on hand-made maps, the reducer on planted attention, and the
pass through a tiny model (known answers computed by hand in the comments)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from test_dependency_reducer import CAT, batch_probs, first_piece, gold_head_rows, next_token_rows, pieces

from bertattn_bench.engine.batching import encode_words, make_batch
from bertattn_bench.families.common.tree_decoding import chain_edges, max_edges, mst_edges, uuas
from bertattn_bench.families.trees import RELATIONS, TreesReducer, gold_arcs, tree_best_gap, tree_relation_gap

CPU = torch.device("cpu")

# Four words, the root is word 1; gold: 0→1, 2→1, 3→2. Row = the word attending (dependent), column = attended.
SCORES = np.array([
    [0.0, 0.9, 0.05, 0.05],
    [0.2, 0.0, 0.3, 0.5],
    [0.1, 0.3, 0.0, 0.6],
    [0.1, 0.2, 0.7, 0.0],
])
GOLD = [(0, 1), (2, 1), (3, 2)]


def test_max_takes_each_row_argmax_and_leaves_the_root_out():
    assert max_edges(SCORES, root=1) == [(0, 1), (2, 3), (3, 2)]
    # undirected pairs {0,1}, {2,3}: 2 of the 3 gold pairs ({1,2} is missed)
    assert uuas(max_edges(SCORES, root=1), GOLD) == pytest.approx(200 / 3)


def test_mst_breaks_the_max_cycle_into_the_gold_tree():
    # arborescences rooted at 1 (weight of parent→child = scores[child, parent]): 0←1 (0.9) is in every best one;
    # {2←1, 3←2} weighs 0.3 + 0.7 = 1.0 > {3←1, 2←3} 0.8 = {2←0, 3←2} 0.8 > {2←1, 3←1} 0.5: the gold tree
    assert mst_edges(SCORES, root=1, direction=0) == [(0, 1), (2, 1), (3, 2)]
    assert uuas(mst_edges(SCORES, root=1), GOLD) == 100.0
    # parent→dependent (weight = scores[parent, child]): 0←1 0.2 (over 0.1, 0.1); 2←3 0.7 and 3←2 0.6 form a cycle,
    # broken by {2←3, 3←1} 0.7 + 0.5 = 1.2 over {3←2, 2←1} 0.6 + 0.3 = 0.9: not the gold tree, 2 of 3 pairs
    assert mst_edges(SCORES, root=1, direction=1) == [(0, 1), (2, 3), (3, 1)]
    assert uuas(mst_edges(SCORES, root=1, direction=1), GOLD) == pytest.approx(200 / 3)


def _total(scores, edges, direction):
    return sum(scores[c, p] if direction == 0 else scores[p, c] for c, p in edges)


def test_mst_equals_networkx_edmonds_on_random_maps_rooted_at_the_gold_root():
    """The C++ decoder against networkx's ``maximum_spanning_arborescence`` (the reference): the same tree on 200
    random maps of 1-30 words (both directions, any root), and an equally heavy one where zeros tie."""
    import networkx as nx

    def reference(scores, root, direction):
        g = nx.DiGraph()
        g.add_nodes_from(range(len(scores)))
        g.add_weighted_edges_from((p, c, float(scores[c, p] if direction == 0 else scores[p, c]))
                                  for p in range(len(scores)) for c in range(len(scores)) if c != p and c != root)
        return sorted((c, p) for p, c in nx.maximum_spanning_arborescence(g, attr="weight").edges())

    rng = np.random.default_rng(0)
    for trial in range(200):
        n = int(rng.integers(1, 31))
        scores = rng.random((n, n))
        if trial % 2:
            scores = scores / scores.sum(1, keepdims=True)  # attention rows
        root, direction = int(rng.integers(n)), int(rng.integers(2))
        got = mst_edges(scores, root, direction)
        assert got == reference(scores, root, direction), (trial, n, root, direction)
        assert all(c != root for c, _ in got) and len(got) == n - 1
    for _ in range(50):  # sparse maps: ties, where either maximal tree may come back
        n = int(rng.integers(2, 20))
        scores = rng.random((n, n)) * (rng.random((n, n)) > 0.5)
        root, direction = int(rng.integers(n)), int(rng.integers(2))
        got, ref = mst_edges(scores, root, direction), reference(scores, root, direction)
        assert len(got) == n - 1 and _total(scores, got, direction) == pytest.approx(_total(scores, ref, direction))


def test_chain_is_adjacent_pairs():
    assert chain_edges(4) == [(0, 1), (1, 2), (2, 3)]
    assert uuas(chain_edges(4), GOLD) == 100.0  # the gold tree is itself a chain: {0,1}, {1,2}, {2,3}
    assert uuas(chain_edges(4), [(0, 2), (1, 2), (3, 1)]) == pytest.approx(100 / 3)  # only {1,2}


def test_gold_arcs_leave_punct_and_root_out():
    assert gold_arcs(CAT) == [(0, 1, RELATIONS.index("det")), (1, 2, RELATIONS.index("nsubj")),
                              (3, 5, RELATIONS.index("case")), (4, 5, RELATIONS.index("det")),
                              (5, 2, RELATIONS.index("obl"))]


def run_planted(tokenizer):
    enc = encode_words(tokenizer, 0, CAT.words)
    batch = make_batch([enc], tokenizer, CPU, with_words=True)
    # head 2: every word attends to [CLS] (an all-zero word row: argmax = the first other word) but the root "sat",
    # which attends to its dependent "mat": the root's own argmax is no edge, so obl {5,2} is not found
    root_to_mat = {t: {first_piece(enc, 5): 1.0} for t in pieces(enc, 2)}
    probs = batch_probs(batch, [[gold_head_rows(enc, CAT), next_token_rows(enc), root_to_mat]])
    red = TreesReducer([gold_arcs(CAT)], [CAT.heads.index(0)], n_layers=1, n_heads=3, device=CPU)
    red.start_batch(batch)
    red.update(0, probs)
    red.end_batch()
    return red.finalize()


def test_reducer_on_planted_heads(tokenizer):
    res = run_planted(tokenizer)
    acc = res.accuracy()[0]  # (R, H)
    r = {name: RELATIONS.index(name) for name in ("det", "nsubj", "case", "obl")}
    # head 0 attends to the gold parent: every arc; head 1 (next token): words 0→1, 1→2, 3→4, 4→5, 5→6, 6→? give
    # {0,1} det, {1,2} nsubj, {4,5} det; not {3,5} case nor {5,2} obl (2 is the root: its own argmax is not read)
    assert [float(acc[r[k], 0]) for k in r] == [100.0, 100.0, 100.0, 100.0]
    assert [float(acc[r[k], 1]) for k in r] == [100.0, 100.0, 0.0, 0.0]
    # head 2: word 0's argmax is word 1 (the first other word): det {0,1} of 2 det arcs; nothing else
    assert [float(acc[r[k], 2]) for k in r] == [50.0, 0.0, 0.0, 0.0]
    assert res.n_arcs[r["det"]] == 2 and res.n_trees == 1
    # per tree: head 0 100%, head 1 3/5 = 60%; the chain: (0,1) (1,2) (4,5) of 5 arcs = 60%
    assert res.chain_sum == pytest.approx(60.0)
    assert res.tree_max_sum[0].tolist() == pytest.approx([100.0, 60.0, 20.0])
    assert res.tree_sum[0].tolist() == pytest.approx([40.0, 0.0, -40.0])
    # MST of every head, both directions, in (layer, head, direction) order, on the kept sentence: head 0's
    # dependent→parent MST is the gold tree
    assert [(m.layer, m.head, m.direction) for m in res.mst] == [(0, h, d) for h in range(3) for d in range(2)]
    (m,) = [m for m in res.mst if (m.head, m.direction) == (0, 0)]
    assert m.tree_uuas == [100.0] and m.max_tree_uuas == [100.0] and m.chain_uuas == [60.0]
    assert m.hits[RELATIONS.index("det")] == 2
    # each head's MAX tree beside its MST, in both directions: the reducer's per-tree MAX UUAS of the one sentence
    assert [m.max_tree_uuas for m in res.mst] == [[100.0], [100.0], [60.0], [60.0], [20.0], [20.0]]


class _PR:
    def __init__(self, result):
        self.result = result


def test_metrics_on_planted_heads(tokenizer):
    from bertattn_bench.families.common.dependency_stats import Arc, offset_baselines

    res = run_planted(tokenizer)
    res.baselines = offset_baselines([[Arc(RELATIONS[r], d, h) for d, h, r in gold_arcs(CAT)]], relations=RELATIONS)
    # case: offset +2 is right on its one arc (100%), the best head 100%: gap 0
    assert tree_relation_gap(_PR(res), "case").value == pytest.approx(0.0)
    best = tree_best_gap(_PR(res), decoder="max")
    assert best.value == pytest.approx(40.0) and best.head == "1-1" and best.n == 1
    assert tree_best_gap(_PR(res), decoder="mst").value == pytest.approx(40.0)


def test_the_pass_through_a_tiny_model(tiny, tmp_path):
    from bertattn_bench.families.trees import prepare_trees

    folder = tmp_path / "ud_english_pud"
    folder.mkdir()
    rows = ["1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_", "2\tcat\tcat\tNOUN\tNN\t_\t3\tnsubj\t_\t_",
            "3\tsat\tsit\tVERB\tVBD\t_\t0\troot\t_\t_", "4\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_"]
    (folder / "en_pud-ud-test.conllu").write_text(("# sent_id = 1\n" + "\n".join(rows) + "\n\n") * 3)
    result = prepare_trees(tiny, tmp_path, "pud_test").run().result
    assert result.n_sentences == 3 and result.n_trees == 3 and result.hits.shape == (2, len(RELATIONS), 4)
    assert result.chain_sum == pytest.approx(300.0)  # both arcs adjacent in every sentence
    assert len(result.mst) == 16 and all(len(m.tree_uuas) == 3 for m in result.mst)  # 2 layers x 4 heads x 2 directions
    assert result.baselines["det"].offset == 1


def test_figure_writes_png(tokenizer, tmp_path):
    from types import SimpleNamespace

    from bertattn_bench.families.common.dependency_stats import Arc, offset_baselines
    from bertattn_bench.families.trees import trees_figure

    res = run_planted(tokenizer)
    res.baselines = offset_baselines([[Arc(RELATIONS[r], d, h) for d, h, r in gold_arcs(CAT)]], relations=RELATIONS)
    pr = SimpleNamespace(result=res, model=SimpleNamespace(name="tiny", slug="tiny"), corpus="pud_test")
    paths = trees_figure([pr, SimpleNamespace(result=None)], tmp_path)
    assert [p.name for p in paths] == ["trees-tiny-pud_test.png"] and paths[0].stat().st_size > 0
