"""The clustering family's analyses (layer ratio, permutation test, silhouette, MDS) and claim metrics (named by
reference_numbers/clark2019_clustering.toml)."""
from __future__ import annotations

import numpy as np
import torch

from ...claims.registry import Measurement, NotApplicable, metric
from ...claims.stats import jackknife_se, permutation_p, wilson_bounds
from .constants import BEHAVIOR_SHARE, BROAD_QUANTILE, N_PERMUTATIONS, OTHER, PERMUTATION_SEED
from .run import ClusteringResult, behavior_labels

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
