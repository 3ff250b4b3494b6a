"""Trees decoded from one head's word-level attention map (Htut et al. 2019, §3), and their undirected score.

Shared by the ``trees`` family and its tests (pure functions on one sentence's map; no model).

* MAX: each word's parent is the other word it attends to most (the gold root word gets no parent, so MAX and MST
  both predict n - 1 edges for n words).
* MST: the maximum spanning arborescence rooted at the gold root word, by ÚFAL's ``ufal.chu_liu_edmonds`` (the
  Chu-Liu-Edmonds algorithm in C++, the decoder UDPipe's parsers use; a kept implementation, not a hand-written one,
  as issue 64 names it). The gold root word is put first (the library's node 0, which gets no parent), so every
  tree it returns is rooted there. Direction 0 (dependent→parent): the edge parent→child weighs
  ``scores[child, parent]`` (the child attends to its parent); direction 1 (parent→dependent): it weighs
  ``scores[parent, child]``. networkx's ``maximum_spanning_arborescence`` gives the same trees (the tests' reference;
  where two trees tie, both are maximal) at about 100 times the cost: 46 ms per 23-word tree, which bounded the
  decoding to two heads until stop 69.
* UUAS: gold edges whose undirected pair is among the predicted edges.
"""
from __future__ import annotations

import numpy as np
from ufal.chu_liu_edmonds import chu_liu_edmonds

DECODERS = ("max", "mst")
DIRECTIONS = ("dependent→parent", "parent→dependent")


def max_edges(scores: np.ndarray, root: int) -> list[tuple[int, int]]:
    """(dependent, parent) for every word but ``root``: the parent is the row's argmax over the other words."""
    s = np.array(scores, dtype=np.float64, copy=True)
    np.fill_diagonal(s, -np.inf)
    return [(d, int(np.argmax(s[d]))) for d in range(len(s)) if d != root]


def mst_edges(scores: np.ndarray, root: int, direction: int = 0) -> list[tuple[int, int]]:
    """(dependent, parent) edges of the maximum spanning arborescence rooted at ``root`` (ufal.chu_liu_edmonds)."""
    n = len(scores)
    if n == 1:
        return []
    s = np.asarray(scores, dtype=np.float64)
    order = np.array([root] + [i for i in range(n) if i != root])  # the root word first: the library's node 0
    # the library's matrix: m[i, j] is the score of word i having word j as its parent; nan: no such edge
    m = (s if direction == 0 else s.T)[np.ix_(order, order)].copy()
    np.fill_diagonal(m, np.nan)
    m[0, :] = np.nan  # nothing enters the root
    parents, _ = chu_liu_edmonds(m)
    return sorted((int(order[c]), int(order[p])) for c, p in enumerate(parents) if c > 0)


def undirected_hits(predicted: list[tuple[int, int]], gold: list[tuple[int, int]]) -> list[bool]:
    """For each gold (dependent, parent) edge: whether its undirected pair was predicted."""
    pairs = {frozenset(e) for e in predicted}
    return [frozenset(e) in pairs for e in gold]


def uuas(predicted: list[tuple[int, int]], gold: list[tuple[int, int]]) -> float:
    """Percent of ``gold`` edges found (undirected); 0 for no gold edge."""
    hits = undirected_hits(predicted, gold)
    return 100.0 * sum(hits) / len(hits) if hits else 0.0


def chain_edges(n: int) -> list[tuple[int, int]]:
    """The trivial tree: each word's parent is the next word (undirected, the same edges as the left chain)."""
    return [(i, i + 1) for i in range(n - 1)]
