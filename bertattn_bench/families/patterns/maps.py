"""Kovaleva §4.1 (the patterns family): the map rule, the per-batch masks and the masses that classify a map into the
five types."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .constants import BLOCK, MIX, STRUCTURED, TYPES

# ---- the map rule ------------------------------------------------------------------------------------------------

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


def map_features(probs: torch.Tensor, m: MapMasks) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(v, d, b)``, each ``(B, H)``: means over each map's real query rows (see the module docstring)."""
    p = probs.float()
    real, ordk = m.real, m.ordinary
    nq = m.n_real.clamp(min=1)[:, None]
    v = (torch.einsum("bhqk,bk->bhq", p, m.special) * real[:, None]).sum(-1) / nq
    d = neighbour_mass(p, m)
    own = torch.einsum("bhqk,bqk->bhq", p, m.own)
    ordm = torch.einsum("bhqk,bk->bhq", p, ordk)
    c = m.chance[:, None]
    share = torch.where(ordm > 1e-6, own / ordm.clamp(min=1e-12), c)
    excess = (share - c) / (1 - c).clamp(min=1e-9)
    bq = m.block_queries[:, None]
    b = (excess * bq).sum(-1) / bq.sum(-1).clamp(min=1)
    return v, d, b


def classify(v: torch.Tensor, d: torch.Tensor, b: torch.Tensor, structured_min: float = STRUCTURED,
             mix: float = MIX, block_min: float = BLOCK) -> torch.Tensor:
    """Type index (into :data:`TYPES`) of each map from its features (same shapes); the thresholds default to the
    settings' (scripts/pattern_thresholds.py moves them for the sensitivity analysis)."""
    s = v + d
    structured = s >= structured_min
    dshare = d / s.clamp(min=1e-12)
    # torch.where, not boolean-mask assignment (that asks the device how many, a sync per call); later rules win
    out = torch.full(v.shape, TYPES.index("heterogeneous"), dtype=torch.long, device=v.device)
    out = torch.where(~structured & (b >= block_min), TYPES.index("block"), out)
    out = torch.where(structured, TYPES.index("vertical+diagonal"), out)
    out = torch.where(structured & (dshare < mix), TYPES.index("vertical"), out)
    return torch.where(structured & (dshare > 1 - mix), TYPES.index("diagonal"), out)


def _masked_max(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """values (B, H, N), mask (B, N) bool → (B, H) max over the masked positions (0 where none)."""
    out = values.masked_fill(~mask[:, None, :], float("-inf")).amax(-1)
    return torch.where(torch.isfinite(out), out, torch.zeros_like(out))


def _masked_max_each(values: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
    """values (B, H, N), masks (B, K, N) bool → (B, H, K): :func:`_masked_max` for K masks in one reduction."""
    out = values.unsqueeze(2).masked_fill(~masks.unsqueeze(1), float("-inf")).amax(-1)
    return torch.where(torch.isfinite(out), out, torch.zeros_like(out))


def received(probs: torch.Tensor, m: MapMasks) -> torch.Tensor:
    """Kovaleva §4.4: the attention each key receives from every real query, divided by the input length (B, H, T)."""
    return (probs.float() * m.real[:, None, :, None]).sum(-2) / m.n_real.clamp(min=1)[:, None, None]
