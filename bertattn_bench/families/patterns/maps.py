"""Kovaleva §4.1 (the patterns family): the map rule and the masses that classify a map into the five types (the
per-batch masks and the ±1-neighbour mass are shared with coref: :mod:`..common.head_maps`)."""
from __future__ import annotations

import torch

from ..common.head_maps import MapMasks as MapMasks  # the aliased names: re-exported from their old home
from ..common.head_maps import map_masks as map_masks
from ..common.head_maps import neighbour_mass
from .constants import BLOCK, MIX, STRUCTURED, TYPES

# ---- the map rule ------------------------------------------------------------------------------------------------

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


def masked_max_each(values: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
    """values (B, H, N), masks (B, K, N) bool → (B, H, K): :func:`_masked_max` for K masks in one reduction."""
    out = values.unsqueeze(2).masked_fill(~masks.unsqueeze(1), float("-inf")).amax(-1)
    return torch.where(torch.isfinite(out), out, torch.zeros_like(out))


def received(probs: torch.Tensor, m: MapMasks) -> torch.Tensor:
    """Kovaleva §4.4: the attention each key receives from every real query, divided by the input length (B, H, T)."""
    return (probs.float() * m.real[:, None, :, None]).sum(-2) / m.n_real.clamp(min=1)[:, None, None]
