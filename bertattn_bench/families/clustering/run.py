"""The clustering family's pass (``-k clustering``): the result, the Jensen-Shannon kernel, the reducer and the prepare
(what the cache key follows)."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ...claims.registry import family
from ...data.segments import CORPORA as SEGMENT_CORPORA
from ...engine.attention import Reducer, head_name
from ..common.surface_stats import SurfaceReducer, SurfaceResult, segments_pass
from .constants import (
    BEHAVIOR_SHARE,
    BEHAVIOR_TARGETS,
    BROAD_QUANTILE,
    CHUNK_ELEMENTS,
    MDS_SEED,
    OTHER,
    QUERY_FRACTION,
    QUERY_SEED,
)

_EPS = 1e-30  # log(0 + eps): padded keys have p = 0 and contribute 0 * log(eps) = 0

@dataclass
class ClusteringResult:
    """The (L·H) x (L·H) mean-JS matrix (row ``layer * n_heads + head``), and the same segments' §3 statistics."""

    distance: np.ndarray  # float64, symmetric, zero diagonal, nats
    n_layers: int
    n_heads: int
    n_segments: int
    n_tokens: int  # query tokens the JS mean runs over
    surface: SurfaceResult  # per-head §3 statistics over every token of the segments (behaviour labels)
    query_fraction: float | None = QUERY_FRACTION
    seed: int = QUERY_SEED
    # per batch of consecutive segments (issue 61: the jackknife over them): the JS sums (G, N, N), the query tokens
    # and the segments of each batch
    batch_js: np.ndarray | None = None
    batch_tokens: np.ndarray | None = None
    batch_segments: np.ndarray | None = None

    def layers(self) -> np.ndarray:
        """0-based layer of each row of ``distance``."""
        return np.repeat(np.arange(self.n_layers), self.n_heads)

    def head_names(self) -> list[str]:
        return [head_name(l, h) for l in range(self.n_layers) for h in range(self.n_heads)]

    def behaviors(self, share: float = BEHAVIOR_SHARE, broad_quantile: float = BROAD_QUANTILE) -> list[str]:
        return behavior_labels(self.surface.stats, share, broad_quantile)

    def mds(self, seed: int = MDS_SEED) -> np.ndarray:
        return mds_embedding(self.distance, seed)


def behavior_labels(stats: dict, share: float = BEHAVIOR_SHARE, broad_quantile: float = BROAD_QUANTILE) -> list[str]:
    """One §3 behaviour per head, row order ``layer * n_heads + head``: the target that gets > ``share`` of its
    attention (largest first), else "broad" for the top quartile of heads by mean entropy, else "other"."""
    shares = torch.stack([stats[s].flatten().float() for _, s in BEHAVIOR_TARGETS])  # (targets, L*H)
    entropy = stats["entropy"].flatten().double().numpy()
    n_top = math.ceil((1 - broad_quantile) * len(entropy))
    top = set(np.argsort(-entropy, kind="stable")[:n_top].tolist())
    labels = []
    for k in range(len(entropy)):
        best = int(torch.argmax(shares[:, k]))
        if float(shares[best, k]) > share:
            labels.append(BEHAVIOR_TARGETS[best][0])
        elif k in top:
            labels.append("broad")
        else:
            labels.append(OTHER)
    return labels


def mds_embedding(distance: np.ndarray, seed: int = MDS_SEED) -> np.ndarray:
    """2-D metric MDS of a precomputed distance matrix (Clark §6, Kruskal 1964), fixed seed."""
    import inspect

    from sklearn.manifold import MDS

    params = inspect.signature(MDS.__init__).parameters
    if "metric_mds" in params:  # scikit-learn >= 1.8
        mds = MDS(n_components=2, metric="precomputed", init="classical_mds", random_state=seed)
    else:
        mds = MDS(n_components=2, dissimilarity="precomputed", n_init=4, random_state=seed)
    return mds.fit_transform(np.asarray(distance, dtype=np.float64))


# ---- the JS kernel -------------------------------------------------------------------------------------------

def js_pair_sums(p: torch.Tensor, chunk_elements: int = CHUNK_ELEMENTS) -> torch.Tensor:
    """``p`` (N heads, R query rows, K keys), each row a distribution → (N, N) float64 sums over the rows of
    JS(p_i[row], p_j[row]) in nats, symmetric with a zero diagonal.

    JS = H((p+q)/2) - (H(p) + H(q))/2. Only H of the mixture needs a pass per pair; with M = p + q,
    Σ -m log m = -(Σ M log M)/2 + (ln 2 / 2) Σ M. Chunked over the second head so a temporary holds at most
    ``chunk_elements`` floats.
    """
    n, r, k = p.shape
    p = p.float()
    h = -(p * p.add(_EPS).log()).sum((1, 2)).double()  # (N,) Σ over rows of H(p_i)
    mass = p.sum((1, 2)).double()  # (N,) = R for rows summing to 1
    out = torch.zeros(n, n, dtype=torch.float64, device=p.device)
    step = max(1, chunk_elements // max(1, r * k))
    # per head i, its pairs with every later head at once: (N-1-i)·R·K elements an operator, not launch-bound. One
    # chunk of all pairs (gathered) ran 7x slower on 2 CPU cores: 64 MB temporaries, page faults (docs/speed.md)
    for i in range(n - 1):
        for j0 in range(i + 1, n, step):
            out[i, j0:j0 + step] = _mix_sum(p[i], p[j0:j0 + step])
    mixture = -0.5 * out + 0.5 * math.log(2.0) * (mass[:, None] + mass[None, :])  # Σ_rows H((p_i+p_j)/2)
    js = torch.triu(mixture - 0.5 * (h[:, None] + h[None, :]), diagonal=1)
    return (js + js.T).clamp_(min=0.0)


def _mix_sum(pi: torch.Tensor, pj: torch.Tensor) -> torch.Tensor:
    """Σ over rows and keys of M log M, M = pi + pj[n] → (n,) float64."""
    m = pj + pi
    return (m * m.add(_EPS).log_()).sum((1, 2)).double()


def sample_queries(length: int, index: int, fraction: float | None, seed: int = QUERY_SEED) -> np.ndarray:
    """Query positions of one segment (example ``index``, ``length`` real tokens): each kept with probability
    ``fraction``, seeded per (seed, example) so the sample is the same whatever the batching; all when None."""
    if fraction is None or fraction >= 1:
        return np.arange(length)
    return np.flatnonzero(np.random.default_rng([seed, index]).random(length) < fraction)


class ClusteringReducer(Reducer):
    """Per batch: the sampled query rows of every layer's heads, stacked (L·H, R, T) once the last layer is in,
    reduced to JS sums; plus the §3 statistics of the batch for the behaviour labels."""

    maps_only = True  # reads nothing but the maps: each forward pass may stop after the last one

    def __init__(self, n_layers: int, n_heads: int, device, query_fraction: float | None = QUERY_FRACTION,
                 seed: int = QUERY_SEED, chunk_elements: int = CHUNK_ELEMENTS):
        self.n_layers, self.n_heads = n_layers, n_heads
        self.fraction, self.seed, self.chunk = query_fraction, seed, chunk_elements
        self.surface = SurfaceReducer(n_layers, n_heads, device)
        self.js = torch.zeros(n_layers * n_heads, n_layers * n_heads, dtype=torch.float64, device=device)
        self.n_tokens = 0
        self.rows: list = [None] * n_layers
        self.batch_js: list = []
        self.batch_tokens: list[int] = []
        self.batch_segments: list[int] = []

    def start_batch(self, batch) -> None:
        from ...engine.batching import to_device

        self.surface.start_batch(batch)
        # the sampled queries as (segment, position) pairs, chosen on the host from the examples' lengths and copied
        # once (issue 47: no length read back from the device, no boolean index with a data-dependent shape); in
        # row-major order, as a boolean mask reads them
        picks = [(b, q) for b, ex in enumerate(batch.examples)
                 for q in sample_queries(len(ex.input_ids), ex.index, self.fraction, self.seed)]
        at = to_device(np.array(picks, dtype=np.int64).reshape(-1, 2).T.copy(), batch.input_ids.device)
        self.query_b, self.query_t = at[0], at[1]
        self.n_tokens += len(picks)
        self.batch_tokens.append(len(picks))
        self.batch_segments.append(len(batch.examples))
        self.rows = [None] * self.n_layers

    def update(self, layer: int, probs: torch.Tensor) -> None:
        self.surface.update(layer, probs)
        self.rows[layer] = probs.float()[self.query_b, :, self.query_t].transpose(0, 1)  # (H, R, T)
        if layer == self.n_layers - 1:
            if any(r is None for r in self.rows):
                raise RuntimeError("ClusteringReducer: a layer's attention was not observed in this batch")
            part = js_pair_sums(torch.cat(self.rows), self.chunk)
            self.js += part
            self.batch_js.append(part)
            self.rows = [None] * self.n_layers

    def finalize(self) -> ClusteringResult:
        surface = self.surface.finalize()
        d = (self.js / max(self.n_tokens, 1)).cpu().numpy()
        per_batch = torch.stack(self.batch_js).cpu().numpy() if self.batch_js else None
        return ClusteringResult(d, self.n_layers, self.n_heads, surface.n_segments, self.n_tokens, surface,
                                self.fraction, self.seed, per_batch, np.array(self.batch_tokens),
                                np.array(self.batch_segments))


@family("clustering", corpora=tuple(SEGMENT_CORPORA), default_corpus="wikitext2", quick_limit=300)
def prepare_clustering(loaded, data_dir: Path, corpus: str = "wikitext2", max_tokens: int = 128,
                       limit: int | None = None, batch_size: int = 32,
                       query_fraction: float | None = QUERY_FRACTION):
    """Clark §6: the §3 segments (same loading and encoding as the surface pass), a JS reducer instead."""
    prepared = segments_pass(loaded, data_dir, corpus, max_tokens=max_tokens, limit=limit, batch_size=batch_size)
    info = loaded.info
    sample = "every query token" if query_fraction is None or query_fraction >= 1 else \
        f"a random {query_fraction:.0%} of the query tokens (seed {QUERY_SEED})"
    return dataclasses.replace(
        prepared, family="clustering", data=f"{prepared.data}; JS over {sample}",
        make_reducer=lambda: ClusteringReducer(info.n_layers, info.n_heads, info.device, query_fraction),
        finish=lambda r: r)
