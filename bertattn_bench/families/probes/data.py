"""Clark §5 probes: training sentences sampled from the GUM train documents, and the gold trees (SD-like or UD)."""
from __future__ import annotations

import random
from pathlib import Path

import numpy as np

from ..common.dependency_stats import sd_arcs

# ---- data ------------------------------------------------------------------------------------------------------

def sample_train_sentences(paths: list[Path], n: int | None, seed: int) -> tuple[list, int]:
    """Documents in a seeded order, read until they hold 2n sentences of >= 2 words; a seeded sample of n of those
    (``n`` None: every sentence of >= 2 words of every document, in that order).

    Returns (sentences, documents read). Only the documents needed are parsed (CPU budget).
    """
    from ...data.ud import read_conllu

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


