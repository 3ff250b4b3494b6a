"""The head roles the gates' "specialised" claims compare with, read by field from the ``roles`` pass beside them
(no family imports another's module, issue 44): positional, syntactic and rare-word heads by Voita et al.'s rules
on the pre-trained encoder's maps."""
from __future__ import annotations

import numpy as np

from ...claims.registry import NotApplicable

ROLES = ("positional", "syntactic", "rare")
# Voita et al. Table 1's relations (SD names; dobj = UD obj), both directions (0 dependent→head, 1 head→dependent)
SYNTACTIC_RELATIONS = ("nsubj", "dobj", "amod", "advmod")


def _roles_result(passes):
    for p in passes:
        res = getattr(p, "result", None)
        if getattr(res, "offset_share", None) is not None and getattr(res, "dependency", None) is not None:
            return p, res
    raise NotApplicable("no roles pass (head roles) beside the gates")


def syntactic_mask(dep, margin: float, relations=SYNTACTIC_RELATIONS) -> tuple[np.ndarray, list[str]]:
    """(L, H) bool: the heads whose accuracy on one of ``relations`` in one direction is >= ``margin`` points above
    that relation's offset baseline (the dependency statistics' ``accuracy()`` (L, 2, R, H) and ``baselines``);
    beside it the (head, relation, direction) found, for the detail."""
    acc = np.asarray(dep.accuracy(), dtype=np.float64)  # (L, 2, R, H)
    mask = np.zeros((acc.shape[0], acc.shape[-1]), dtype=bool)
    found = []
    for rel in relations:
        if rel not in dep.baselines or rel not in dep.relations:
            continue
        r = dep.relations.index(rel)
        gap = acc[:, :, r, :] - float(dep.baselines[rel].accuracy)  # (L, 2, H)
        for d in (0, 1):
            hit = gap[:, d, :] >= margin
            mask |= hit
            found += [f"{li + 1}-{hi + 1} {rel}/{d}" for li, hi in zip(*np.nonzero(hit))]
    return mask, found


def role_heads(passes, roles=ROLES, positional_share: float = 90.0, syntactic_margin: float = 10.0,
               rare_margin: float = 10.0, rare_layer: int = 0) -> tuple[dict[str, np.ndarray], str]:
    """Per role in ``roles`` the (L, H) bool mask of its heads in the roles pass's result, and where they were read.

    * positional: argmax at +1 or −1 for >= ``positional_share`` % of the queries (``offset_share`` (3, L, H));
    * syntactic: :func:`syntactic_mask` with ``syntactic_margin`` (Voita's 10 points);
    * rare: heads of layer ``rare_layer`` (Voita: the first) whose share of sentences pointing to a rarest word is
      >= ``rare_margin`` points above the chance rate (the roles claim's margin)."""
    p, res = _roles_result(passes)
    offsets = np.asarray(res.offset_share, dtype=np.float64)
    shape = offsets.shape[1:]
    masks = {}
    for role in roles:
        if role == "positional":
            masks[role] = offsets[:2].max(0) >= positional_share
        elif role == "syntactic":
            masks[role] = syntactic_mask(res.dependency, syntactic_margin)[0]
        elif role == "rare":
            share = 100.0 * np.asarray(res.rare_hits, dtype=np.float64) / max(res.n_sentences, 1)
            m = np.zeros(shape, dtype=bool)
            m[rare_layer] = share[rare_layer] - float(res.rare_chance) >= rare_margin
            masks[role] = m
        else:
            raise ValueError(f"unknown role {role!r} (known: {ROLES})")
    return masks, f"roles pass ({p.corpus}, {res.n_sentences} sentences, {res.n_queries} queries)"
