"""Trees decoded from one head's word-level attention map (Htut et al. 2019, §3), and their undirected score.

Shared by the ``trees`` family and its tests (pure functions on one sentence's map; no model).

* MAX: each word's parent is the other word it attends to most (the gold root word gets no parent, so MAX and MST
  both predict n - 1 edges for n words).
* MST: the maximum spanning arborescence rooted at the gold root word, by networkx's
  ``maximum_spanning_arborescence`` (Edmonds' algorithm; a kept implementation, not a hand-written one). Direction 0
  (dependent→parent): the edge parent→child weighs ``scores[child, parent]`` (the child attends to its parent);
  direction 1 (parent→dependent): it weighs ``scores[parent, child]``.
* UUAS: gold edges whose undirected pair is among the predicted edges.
"""
from __future__ import annotations

import networkx as nx
import numpy as np

DECODERS = ("max", "mst")
DIRECTIONS = ("dependent→parent", "parent→dependent")


def max_edges(scores: np.ndarray, root: int) -> list[tuple[int, int]]:
    """(dependent, parent) for every word but ``root``: the parent is the row's argmax over the other words."""
    s = np.array(scores, dtype=np.float64, copy=True)
    np.fill_diagonal(s, -np.inf)
    return [(d, int(np.argmax(s[d]))) for d in range(len(s)) if d != root]


def mst_edges(scores: np.ndarray, root: int, direction: int = 0) -> list[tuple[int, int]]:
    """(dependent, parent) edges of the maximum spanning arborescence rooted at ``root`` (networkx)."""
    n = len(scores)
    if n == 1:
        return []
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    for p in range(n):
        for c in range(n):
            if c != p and c != root:  # nothing enters the root: every arborescence is rooted there
                g.add_edge(p, c, weight=float(scores[c, p] if direction == 0 else scores[p, c]))
    tree = nx.maximum_spanning_arborescence(g, attr="weight", preserve_attrs=False)
    return sorted((c, p) for p, c in tree.edges())


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
