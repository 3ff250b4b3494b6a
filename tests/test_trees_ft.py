"""The fine-tuned trees (families/trees_ft): the best MAX head of each encoder read from the reduced sums, and
their difference with its SE, by hand."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from bertattn_bench.families.common.tree_scoring import RELATIONS, TreesResult, best_max_tree
from bertattn_bench.families.trees_ft import TreesFtResult, tree_finetune_change


def _trees(best: tuple[int, int], total: float, squares: float, nsubj_hits: float) -> TreesResult:
    """2 x 2 heads, 4 trees, chain 40% on each; head ``best`` sums ``total`` points over the chain (the others 4)."""
    tree_sum = torch.full((2, 2), 4.0, dtype=torch.float64)
    tree_sum[best] = total
    tree_sq = torch.full((2, 2), 4.0, dtype=torch.float64)
    tree_sq[best] = squares
    hits = torch.zeros(2, len(RELATIONS), 2, dtype=torch.float64)
    hits[best[0], RELATIONS.index("nsubj"), best[1]] = nsubj_hits
    return TreesResult(RELATIONS, hits, np.full(len(RELATIONS), 10), tree_sum, tree_sq, tree_sum + 160.0, 160.0, 4, 4)


def test_best_max_tree_by_hand():
    """Head 2-1 sums 40 over 4 trees (mean 10) with squares 500: variance (500/4 - 100) x 4/3 = 33.3, SE 2.887."""
    layer, head, mean, se = best_max_tree(_trees((1, 0), 40.0, 500.0, 5.0))
    assert (layer, head) == (1, 0) and mean == pytest.approx(10.0) and se == pytest.approx(math.sqrt(100 / 3) / 2)


def test_the_change_is_the_absolute_difference_of_the_best_heads_with_both_ses():
    """Pre-trained 2-1 mean 10 (SE 2.887), fine-tuned 1-2 mean 12 (squares 640: variance 16 x 4/3, SE 2.309): |Δ| 2,
    SE hypot(2.887, 2.309) = 3.697; nsubj best 50% → 70%."""
    pt, ft = _trees((1, 0), 40.0, 500.0, 5.0), _trees((0, 1), 48.0, 640.0, 7.0)
    m = tree_finetune_change(SimpleNamespace(result=TreesFtResult(pt, ft, "mrpc", 0, "quick")))
    assert m.value == pytest.approx(2.0) and m.values["signed"] == pytest.approx(2.0)
    assert m.standard_error == pytest.approx(math.hypot(math.sqrt(100 / 3) / 2, math.sqrt(64 / 3) / 2))
    assert m.head == "1-2" and "nsubj 50.0 → 70.0" in m.detail and "2-1 50.0%" in m.detail
    back = tree_finetune_change(SimpleNamespace(result=TreesFtResult(ft, pt, "mrpc", 0, "quick")))
    assert back.value == pytest.approx(2.0) and back.values["signed"] == pytest.approx(-2.0)
