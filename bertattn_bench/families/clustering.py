"""Clark et al. §6, Fig. 6: clustering attention heads by the Jensen–Shannon divergence of their attention.

Clark's distance between heads i and j is ``Σ_{token ∈ data} JS(H_i(token), H_j(token))``: the JS divergence
between the two heads' attention distributions from the same query token. Here it is the *mean* over query
tokens (nats, 0..ln 2), so it is comparable across corpus sizes; a mean is a rescaled sum, so every ranking,
ratio and the MDS map up to scale are Clark's.

Cost is (heads² / 2) x tokens x keys logarithms (the 1,000 §3 segments of ~127 pieces hold ~127,000 query
tokens: several minutes on 2 CPU cores for all of them), so the pass averages over a random ``QUERY_FRACTION``
(5%: ~6,300 query tokens of WikiText-2) of the query tokens: each real token
is kept with that probability, seeded per segment (batch-independent, token-weighted like Clark's sum;
``query_fraction=None`` uses every token, Clark's sum exactly). The §3
statistics of the same segments (all their tokens, :class:`~.common.surface_stats.SurfaceReducer`) come out of the same
forward pass and give each head its behaviour label (§3: [CLS], [SEP], '.'/',', previous/next/current token,
broad). Padded queries never enter (the sample is drawn among real tokens) and padded keys have probability 0.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..base.plotting import pyplot, save_figure
from ..claims.registry import Measurement, NotApplicable, family, figure, metric
from ..claims.stats import jackknife_se, permutation_p, wilson_bounds
from ..data.segments import CORPORA as SEGMENT_CORPORA
from ..engine.attention import Reducer, head_name
from .common.surface_stats import SurfaceReducer, SurfaceResult, segments_pass

QUERY_FRACTION = 0.05  # of the query tokens: ~6,300 on the 1,000 WikiText-2 segments
QUERY_SEED = 0
N_PERMUTATIONS = 1000
PERMUTATION_SEED = 0
MDS_SEED = 0
CHUNK_ELEMENTS = 1 << 24  # floats in one (heads, rows, keys) temporary (64 MB)
_EPS = 1e-30  # log(0 + eps): padded keys have p = 0 and contribute 0 * log(eps) = 0

# §3 behaviours (label, statistic): a head whose mean share on the target exceeds BEHAVIOR_SHARE gets the label
BEHAVIOR_TARGETS = (("[CLS]", "to_cls"), ("[SEP]", "to_sep"), (". ,", "to_punct"),
                    ("previous", "prev"), ("next", "next"), ("current", "self"))
BEHAVIOR_SHARE = 0.5
BROAD_QUANTILE = 0.75  # "broad": mean entropy in the top quartile of the model's heads
OTHER = "other"


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
        from ..engine.batching import to_device

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


# ---- analysis ------------------------------------------------------------------------------------------------

def _pairs(n: int):
    return np.triu_indices(n, 1)


def layer_ratio(distance: np.ndarray, layers: np.ndarray) -> tuple[float, float, float]:
    """(mean within-layer distance, mean between-layer distance, within / between) over head pairs."""
    iu = _pairs(len(layers))
    d = distance[iu]
    same = layers[iu[0]] == layers[iu[1]]
    within, between = float(d[same].mean()), float(d[~same].mean())
    return within, between, within / between if between > 0 else float("nan")


def layer_permutation_test(distance: np.ndarray, layers: np.ndarray, n_permutations: int = N_PERMUTATIONS,
                           seed: int = PERMUTATION_SEED) -> tuple[float, float, np.ndarray]:
    """One-sided test of "heads of a layer are closer than heads of different layers" (Clark §6).

    Statistic: within/between ratio of mean distances. Null: the layer labels permuted over heads (group sizes
    kept), ``n_permutations`` times with a fixed seed. Returns (observed ratio, p-value, null ratios), with
    p = (1 + #{null <= observed}) / (1 + n_permutations).
    """
    iu = _pairs(len(layers))
    d = distance[iu]
    rng = np.random.default_rng(seed)
    observed = layer_ratio(distance, layers)[2]
    null = []
    for start in range(0, n_permutations, 100):  # chunks bound the (permutations, pairs) masks for big models
        perms = np.stack([rng.permutation(layers) for _ in range(min(100, n_permutations - start))])
        same = perms[:, iu[0]] == perms[:, iu[1]]  # (P, pairs)
        null.append((same @ d / same.sum(1)) / (~same @ d / (~same).sum(1)))
    null = np.concatenate(null)
    p = permutation_p(observed, null)
    return observed, p, null


def behavior_silhouette(distance: np.ndarray, labels: list[str]) -> tuple[float, dict[str, float], int]:
    """Mean silhouette (in the JS distance space) of the heads that have a §3 behaviour, "other" excluded
    from the mean but kept as a group; returns (mean, per-behaviour mean, heads averaged)."""
    from sklearn.metrics import silhouette_samples

    labels_arr = np.array(labels)
    groups = sorted(set(labels))
    if len(groups) < 2:
        raise NotApplicable(f"every head has the same behaviour label ({groups[0]!r}): no clusters to compare")
    s = silhouette_samples(np.asarray(distance, dtype=np.float64), labels_arr, metric="precomputed")
    keep = labels_arr != OTHER
    per = {g: float(s[labels_arr == g].mean()) for g in groups}
    if not keep.any():
        return float("nan"), per, 0
    return float(s[keep].mean()), per, int(keep.sum())


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


# ---- claim metrics (named by reference_numbers/clark2019_clustering.toml) -----------------------------------

def _result(pr) -> ClusteringResult:
    res = pr.result
    if res.n_layers < 2 or res.n_heads < 2:
        raise NotApplicable(f"the model has {res.n_layers} layer(s) of {res.n_heads} head(s): no within- and "
                            f"between-layer pairs to compare")
    if res.n_tokens == 0:
        raise NotApplicable("no query tokens in the sample")
    return res


def _n(res: ClusteringResult) -> dict:
    return {"n": res.n_tokens, "n_unit": "query tokens"}


@metric("js_layer_permutation_p")
def js_layer_permutation_p(pr, n_permutations: int = N_PERMUTATIONS, seed: int = PERMUTATION_SEED) -> Measurement:
    """Clark §6: heads of one layer are closer in JS distance than heads of different layers. The value is the
    permutation p-value of the within/between ratio (layer labels permuted over heads)."""
    res = _result(pr)
    within, between, _ = layer_ratio(res.distance, res.layers())
    ratio, p, null = layer_permutation_test(res.distance, res.layers(), n_permutations, seed)
    per_layer = []
    iu = _pairs(res.distance.shape[0])
    lay = res.layers()
    for l in range(res.n_layers):
        same = (lay[iu[0]] == l) & (lay[iu[1]] == l)
        per_layer.append(f"L{l + 1}={res.distance[iu][same].mean():.3f}")
    detail = (f"within-layer {within:.4f} vs between-layer {between:.4f} nats (ratio {ratio:.3f}; permuted ratios "
              f"{np.quantile(null, 0.01):.3f}..{np.quantile(null, 0.99):.3f} for 1-99%, {n_permutations} permutations, "
              f"seed {seed}); within by layer: {' '.join(per_layer)}; {res.n_segments} segments")
    # the p-value's own randomness is its Monte Carlo count: Wilson's 95% bounds on (1 + hits) of (1 + permutations)
    lo, hi = wilson_bounds(int(round(p * (n_permutations + 1))), n_permutations + 1)
    return Measurement(p, unit="p-value", detail=detail + f"; Wilson 95% bounds on the permutation count "
                       f"[{lo / 100:.4g}, {hi / 100:.4g}]", bounds=(lo / 100, hi / 100), **_n(res))


@metric("behavior_silhouette")
def behavior_silhouette_metric(pr, share: float = BEHAVIOR_SHARE, broad_quantile: float = BROAD_QUANTILE,
                               min_behaviors: int = 2) -> Measurement:
    """Clark §6: heads cluster by the behaviours of §3. Mean silhouette, in the JS distance space, of the heads
    with a behaviour label; fewer than ``min_behaviors`` behaviours with >= 2 heads means no clusters to find
    and measures 0 (a silhouette of no structure)."""
    res = _result(pr)
    value, detail = _silhouette(res.distance, res.behaviors(share, broad_quantile), min_behaviors)
    se = None
    G = 0 if res.batch_js is None else len(res.batch_js)
    if G >= 3 and res.surface.per_segment is not None:  # issue 61: the sample's share, a jackknife over the batches
        starts = np.concatenate([[0], np.cumsum(res.batch_segments)])

        def without(kept):
            seg = torch.from_numpy(np.concatenate([np.arange(starts[g], starts[g + 1]) for g in kept]))
            labels = behavior_labels(res.surface.resample(seg).stats, share, broad_quantile)
            return _silhouette(res.batch_js[kept].sum(0) / max(res.batch_tokens[kept].sum(), 1), labels,
                               min_behaviors)[0]

        se, _ = jackknife_se(without, G, G)
        se = se if np.isfinite(se) else None
        detail += f"; SE {se:.3g} by a jackknife over the {G} batches of consecutive segments" if se is not None else ""
    return Measurement(value, unit="silhouette", detail=detail, standard_error=se, **_n(res))


def _silhouette(distance: np.ndarray, labels: list[str], min_behaviors: int) -> tuple[float, str]:
    """(the mean silhouette of the labelled heads, its detail); 0 with fewer than ``min_behaviors`` behaviours."""
    counts = {g: labels.count(g) for g in dict.fromkeys(labels)}
    groups = ", ".join(f"{g} {c}" for g, c in sorted(counts.items(), key=lambda kv: -kv[1]))
    real = [g for g, c in counts.items() if g != OTHER and c >= 2]
    if len(real) < min_behaviors:
        return 0.0, f"fewer than {min_behaviors} behaviours with >= 2 heads (no clusters to find): {groups}"
    value, per, n_heads = behavior_silhouette(distance, labels)
    text = ", ".join(f"{g} {per[g]:+.2f}" for g in sorted(per, key=lambda g: -counts[g]))
    return value, f"mean over {n_heads} labelled heads; heads: {groups}; silhouette by behaviour: {text}"


# ---- figure (Clark Fig. 6) -----------------------------------------------------------------------------------

_MARKERS = {"[CLS]": "s", "[SEP]": "D", ". ,": "P", "previous": "<", "next": ">", "current": "^", "broad": "*",
            OTHER: "o"}


@figure("clustering")
def clustering_figure(pass_results, directory: Path) -> list[Path]:
    """MDS map of the heads (Clark Fig. 6): colour = layer, marker = §3 behaviour; one PNG per (model, corpus)."""
    plt = pyplot()
    paths = []
    for pr in pass_results:
        res = pr.result
        if not isinstance(res, ClusteringResult):
            continue
        xy = res.mds()
        layers, labels, names = res.layers(), res.behaviors(), res.head_names()
        fig, ax = plt.subplots(figsize=(6.4, 5.2))
        cmap = plt.get_cmap("viridis", res.n_layers)
        for label in dict.fromkeys(labels):
            idx = [i for i, g in enumerate(labels) if g == label]
            sc = ax.scatter(xy[idx, 0], xy[idx, 1], c=layers[idx] + 1, cmap=cmap, vmin=0.5, vmax=res.n_layers + 0.5,
                            marker=_MARKERS.get(label, "o"), s=46, edgecolors="k", linewidths=0.4,
                            label=f"{label} ({len(idx)})")
        for i, name in enumerate(names):
            ax.annotate(name, xy[i], fontsize=5, xytext=(2, 2), textcoords="offset points", alpha=0.7)
        bar = fig.colorbar(sc, ax=ax, ticks=range(1, res.n_layers + 1))
        bar.set_label("layer")
        leg = ax.legend(fontsize=6, title="§3 behaviour", title_fontsize=7, loc="best")
        for h in leg.legend_handles:
            h.set_array(None)
            h.set_facecolor("0.6")
        ax.set_xticks([])
        ax.set_yticks([])
        ratio = layer_ratio(res.distance, layers)[2]
        ax.set_title(f"{pr.model.name} / {pr.corpus}: heads by mean JS divergence (MDS)\n"
                     f"{res.n_tokens} query tokens, {res.n_segments} segments; within/between-layer "
                     f"mean distance {ratio:.2f}", fontsize=8)
        paths.append(save_figure(fig, directory, f"clustering-mds-{pr.model.slug}-{pr.corpus}.png", dpi=130))
    return paths


__all__ = ["ClusteringReducer", "ClusteringResult", "behavior_labels", "behavior_silhouette", "js_pair_sums",
           "layer_permutation_test", "layer_ratio", "mds_embedding", "prepare_clustering", "sample_queries"]
