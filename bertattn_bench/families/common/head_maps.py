"""The masks of a batch's attention maps and each map's ±1-neighbour (diagonal) mass, with the test of "detector"
heads built on it (Kovaleva §4.1, §4.5), shared by the patterns family and the coreference family (issue 44: no
family imports another's module)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ...claims.registry import NotApplicable
from ...engine.attention import head_name


@dataclass
class MapMasks:
    real: torch.Tensor  # (B, T) float
    special: torch.Tensor  # (B, T) float: [CLS] and [SEP] keys
    ordinary: torch.Tensor  # (B, T) float
    own: torch.Tensor  # (B, T, T) float: query and key ordinary and in the same sentence
    chance: torch.Tensor  # (B, T): own sentence's share of the ordinary tokens
    block_queries: torch.Tensor  # (B, T) float: ordinary queries with another sentence beside them
    n_real: torch.Tensor  # (B,)
    seg: torch.Tensor | None = None  # (B, T) long: the sentence of each token (how many [SEP]s come before it)


def map_masks(batch) -> MapMasks:
    """Masks of one padded batch; the sentence of a token = how many [SEP]s come before it."""
    real = batch.token_mask
    sep = batch.is_sep.long()
    special = (batch.is_cls | batch.is_sep) & real
    ordinary = real & ~special
    seg = torch.cumsum(sep, -1) - sep
    own = (seg[:, :, None] == seg[:, None, :]) & ordinary[:, :, None] & ordinary[:, None, :]
    n_ord = ordinary.sum(-1, keepdim=True).clamp(min=1)
    chance = own.sum(-1) / n_ord
    block_q = ordinary & (chance < 1 - 1e-9)
    return MapMasks(real.float(), special.float(), ordinary.float(), own.float(), chance.float(), block_q.float(),
                    real.sum(-1).float(), seg)


def neighbour_mass(probs: torch.Tensor, m: MapMasks) -> torch.Tensor:
    """``d`` of each map, ``(B, H)``: the mean over its real query rows of the mass on the ±1 neighbours (keys that
    are ordinary tokens; [CLS]/[SEP] keys excluded, so a sink next to a token does not count as diagonal)."""
    p = probs.float()
    real, ordk = m.real, m.ordinary
    nq = m.n_real.clamp(min=1)[:, None]
    prev = p.diagonal(offset=-1, dim1=-2, dim2=-1)  # [q+1, q]: query q+1, key q
    nxt = p.diagonal(offset=1, dim1=-2, dim2=-1)  # [q, q+1]
    return ((prev * (ordk[:, :-1] * real[:, 1:])[:, None]).sum(-1)
            + (nxt * (ordk[:, 1:] * real[:, :-1])[:, None]).sum(-1)) / nq


def top_heads_neighbour_ratio(score, neighbour, k: int, score_name: str) -> tuple[float, str]:
    """Kovaleva §4.5's test of "detector" heads: the mean ±1-neighbour mass of the ``k`` heads with the highest
    ``score`` (``(L, H)``) over the median head's, and a text naming them (with the 75th percentile of the mass)."""
    score, neighbour = np.asarray(score, dtype=float), np.asarray(neighbour, dtype=float)
    n_heads = score.shape[-1]
    att, diag = score.reshape(-1), neighbour.reshape(-1)
    if att.size < 2 * k:
        raise NotApplicable(f"the model has {att.size} heads: its top {k} would be most of them")
    top = np.argsort(-att, kind="stable")[:k]
    median = float(np.median(diag))
    q75 = float(np.quantile(diag, 0.75))
    value = float(diag[top].mean()) / median if median > 0 else float("inf")
    return value, (", ".join(f"{head_name(*divmod(int(i), n_heads))} ({score_name} {att[i]:.2f}, ±1 mass {diag[i]:.2f})"
                             for i in top) + f"; ±1 mass over all heads: median {median:.3f}, 75th percentile "
                                             f"{q75:.3f} ({int((diag[top] > q75).sum())} of {k} above it)")
