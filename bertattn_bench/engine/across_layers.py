"""Readings of attention across layers and past the map: attention rollout and attention flow (Abnar & Zuidema 2020)
and effective attention (Brunner et al. 2020).

**Rollout** follows the authors' ``compute_joint_attention`` (samiraabnar/attention_flow at 8044f53,
``attention_graph_util.py`` l.104-119): each layer's head-averaged map W plus the identity (the residual), rows
divided by their sums (l.105-108: ``(W + I) / rowsum``, which is ``0.5 W + 0.5 I`` when W's rows sum to 1, as the
paper writes it), then multiplied down the layers, ``J_1 = A_1``, ``J_l = A_l J_{l-1}`` (l.115-117). Padded
positions take no part: their rows and columns are zero in W, and zero in every output.

**Flow** follows ``get_adjmat`` (l.8-24: node ``(i, k)`` of layer i = 1..L has an edge to ``(i-1, k')`` with
capacity ``A_i[k, k']``, the residual-mixed map as ``compute_corel_distilbert_sst.py`` l.70-74 builds it) and
``compute_node_flow`` (l.88-102: the max-flow value from an output node to each input token, the row divided by its
sum). The authors call networkx's ``maximum_flow_value`` (Edmonds-Karp); this module runs scipy's
``csgraph.maximum_flow`` (compiled, Dinic) on capacities scaled to integers (:data:`FLOW_SCALE`; a flow of capacities
rounded to 1e-6 each), and the unit tests check it against networkx on planted graphs. Flow costs one max-flow per
(layer, output node, input token): callers bound the output nodes (the [CLS] row) and the sentences.

**Effective attention** (Brunner et al. §3-4): head h's output is ``A T`` with ``T = (X W_V + b_V) W_O^h`` (n x
hidden, rank <= d_head); the part of each row of A in T's left null space (null(T^T)) changes no output. Effective
attention is A with that part removed, ``A_eff = A P`` with P the orthogonal projector onto T's column space (from
T's singular vectors whose singular value exceeds the rank tolerance): ``A_eff T = A T`` and ``A_eff u = 0`` for every u
with ``u^T T = 0``. Where n <= rank(T) (a sequence no longer than the head dimension) the null space is empty and
``A_eff = A``.
"""
from __future__ import annotations

import numpy as np
import torch

FLOW_SCALE = 1_000_000  # capacities in [0, 1] as integers: the max-flow of capacities rounded to 1e-6


def residual_mixed(maps: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """``(W + I) / rowsum`` per layer (the authors' l.105-108), ``maps`` (..., L, n, n) head-averaged; ``mask``
    (..., n) bool of real tokens: padded rows and columns are zero in the result."""
    w = maps.double()
    n = w.shape[-1]
    eye = torch.eye(n, dtype=w.dtype, device=w.device)
    if mask is not None:
        valid = (mask[..., None, :, None] & mask[..., None, None, :]).to(w.dtype)  # (..., 1, n, n)
        w = w * valid
        eye = eye * valid
    a = w + eye
    return a / a.sum(-1, keepdim=True).clamp_min(1e-300)


def rollout(maps: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Attention rollout (the authors' ``compute_joint_attention`` with ``add_residual=True``): ``J`` (..., L, n, n)
    with ``J[l]`` the product ``A_l ... A_1`` of the residual-mixed maps (:func:`residual_mixed`), float64."""
    a = residual_mixed(maps, mask)
    out = [a[..., 0, :, :]]
    for i in range(1, a.shape[-3]):
        out.append(a[..., i, :, :] @ out[-1])
    return torch.stack(out, dim=-3)


def flow_graph(mixed: np.ndarray):
    """The authors' layered graph (``get_adjmat``) of one sentence's residual-mixed maps ``mixed`` (L, n, n) as a
    scipy CSR matrix of integer capacities: node ``i * n + k`` is token k at layer i (0: the input tokens)."""
    from scipy.sparse import csr_matrix

    n_layers, n, _ = mixed.shape
    rows, cols, caps = [], [], []
    k_f, k_t = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    for i in range(1, n_layers + 1):
        cap = np.rint(np.asarray(mixed[i - 1], np.float64) * FLOW_SCALE).astype(np.int64)
        keep = cap > 0
        rows.append((i * n + k_f)[keep])
        cols.append(((i - 1) * n + k_t)[keep])
        caps.append(cap[keep])
    size = (n_layers + 1) * n
    return csr_matrix((np.concatenate(caps).astype(np.int32), (np.concatenate(rows), np.concatenate(cols))),
                      shape=(size, size))


def flow(mixed: np.ndarray, queries=(0,), layers=None) -> np.ndarray:
    """Attention flow of one sentence: ``F`` (len(layers), len(queries), n), ``F[a, b, v]`` the max-flow value from
    token ``queries[b]`` at the output of layer ``layers[a]`` (0-based; default all) to input token v, the row
    divided by its sum (the authors' ``compute_node_flow``). ``mixed`` (L, n, n): residual-mixed maps of the real
    tokens only (:func:`residual_mixed`)."""
    from scipy.sparse.csgraph import maximum_flow

    mixed = np.asarray(mixed, np.float64)
    n_layers, n, _ = mixed.shape
    layers = range(n_layers) if layers is None else layers
    graph = flow_graph(mixed)
    out = np.zeros((len(layers), len(queries), n))
    for a, layer in enumerate(layers):
        for b, q in enumerate(queries):
            src = (layer + 1) * n + q
            for v in range(n):
                out[a, b, v] = maximum_flow(graph, src, v).flow_value
            total = out[a, b].sum()
            if total > 0:
                out[a, b] /= total
    return out


def value_transforms(values: torch.Tensor, w_out: torch.Tensor, n_heads: int) -> torch.Tensor:
    """``T`` (B, H, n, hidden) per head, ``T^h = (X W_V + b_V) W_O^h`` from the value projection's output ``values``
    (B, n, H * D) and the output projection's weight ``w_out`` (hidden, H * D) (as :mod:`.attention_norms` reads
    them)."""
    b, n, _ = values.shape
    dtype = torch.float64 if values.dtype == torch.float64 else torch.float32  # bf16/fp16 read in float32
    v = values.to(dtype).view(b, n, n_heads, -1)
    w = w_out.to(dtype).view(w_out.shape[0], n_heads, -1)
    return torch.einsum("bkhd,ohd->bhko", v, w)


def column_projector(t: torch.Tensor, rtol: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(P, rank): the orthogonal projector (..., n, n) onto the column space of ``t`` (..., n, d) and its rank: the
    eigenvectors of the Gram matrix T T^T (float64) whose eigenvalue, a squared singular value of T, exceeds
    ``rtol``^2 x the largest (at least the Gram's rounding), ``rtol`` by default max(n, d) x the eps of ``t``'s own dtype (numpy's ``matrix_rank``
    rule: a float32 T of rank d has float32 noise, not zeros, past its d-th singular value). The Gram's eigenvectors
    rather than T's SVD: the same subspace, and torch's CPU SVD of a wide matrix (n < hidden) was ~100x slower."""
    if rtol is None:
        rtol = max(t.shape[-2], t.shape[-1]) * torch.finfo(t.dtype).eps
    t64 = t.double()
    vals, vecs = torch.linalg.eigh(t64 @ t64.transpose(-1, -2))  # ascending
    # a squared singular value below the Gram's own float64 rounding (n x eps64 x the largest) is no direction either
    floor = max(rtol ** 2, t.shape[-2] * torch.finfo(torch.float64).eps)
    keep = vals > floor * vals[..., -1:].clamp_min(1e-300)
    kept = vecs * keep[..., None, :].to(vecs.dtype)
    return kept @ kept.transpose(-1, -2), keep.sum(-1)


def effective_attention(probs: torch.Tensor, t: torch.Tensor, mask: torch.Tensor | None = None,
                        rtol: float | None = None, with_rank: bool = False):
    """Brunner et al.'s effective attention ``A P`` (float64), ``probs`` (B, H, n, n) the raw maps, ``t`` (B, H, n,
    hidden) the heads' value transforms (:func:`value_transforms`), ``mask`` (B, n) bool of real tokens (padded rows
    of T and A are zeroed first, so padding neither adds to T's column space nor enters a row). ``with_rank``: also
    T's rank per head (B, H), from the same decomposition."""
    if rtol is None:
        rtol = max(t.shape[-2], t.shape[-1]) * torch.finfo(t.dtype).eps  # the precision T was computed in
    a, tt = probs.double(), t.double()
    if mask is not None:
        m = mask[:, None, :].to(a.dtype)  # (B, 1, n)
        tt = tt * m[..., None]
        a = a * m[..., None] * m[..., None, :]
    proj, rank = column_projector(tt, rtol)
    return (a @ proj, rank) if with_rank else a @ proj
