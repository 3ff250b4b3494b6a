"""Voita et al. 2019 §6 (the ``gates`` family): the claim metrics, named by reference_numbers/voita2019_gates.toml.
Each reads the gates' pass; the comparisons read the ``prune`` pass (Michel's importance, same checkpoint) and the
``roles`` pass (positional heads) beside it."""
from __future__ import annotations

import numpy as np

from ...claims.registry import Measurement, NotApplicable, metric
from ...claims.stats import tost_paired, wilson_bounds
from ...engine.attention import head_name
from ...training.glue_pass import result_of
from .run import GatesResult


def _res(pr) -> GatesResult:
    r = result_of(pr)
    if not isinstance(r, GatesResult):
        raise NotApplicable("not a gates pass")
    return r


def _curve(r: GatesResult) -> str:
    return "; ".join(f"λ {lam:g}: {k} kept, {s:.2f} ({s - r.base:+.2f})"
                     for lam, k, s in zip(r.lambdas, r.n_kept, r.scores))


@metric("gates_pruned_share")
def gates_pruned_share(pr, max_drop: float = 1.0, alpha: float = 0.05) -> Measurement:
    """Voita §6: the largest share of heads the gates close (over the λ sweep) at a dev drop of at most
    ``max_drop`` points. Value: the share among the runs whose paired Δ (pruned − unpruned, same dev examples)
    is >= −max_drop. Bounds: lower, the largest share whose drop is *shown* within ``max_drop`` (one-sided half of
    TOST on the discordant counts, :func:`stats.tost_paired`); upper, the largest share whose drop is not shown
    beyond it (not Δ + z·SE < −max_drop). Regression tasks: no paired counts (NotApplicable)."""
    r = _res(pr)
    if r.metric != "acc":
        raise NotApplicable(f"{r.task} is scored by {r.metric}: no paired per-example test")
    shares, shown, not_beyond, parts = [0.0], [0.0], [0.0], []
    for lam, k, (lost, gained) in zip(r.lambdas, r.n_kept, r.flips):
        share = 1.0 - k / r.n_total
        t = tost_paired(lost, gained, r.n_dev, max_drop, alpha)
        delta, se = t["delta"], t["se"]
        if delta >= -max_drop:
            shares.append(share)
        if t["p_lower"] < alpha:
            shown.append(share)
        if t["lower"] != "beyond":
            not_beyond.append(share)
        parts.append(f"λ {lam:g}: {r.n_total - k} of {r.n_total} pruned, Δ {delta:+.2f} (SE {se:.2f}, lost "
                     f"{lost} / gained {gained}, p(drop <= {max_drop:g}) {t['p_lower']:.2g})")
    value = max(shares)
    return Measurement(value, r.n_dev, "dev examples", unit="fraction of heads pruned",
                       bounds=(min(max(shown), value), max(max(not_beyond), value)),
                       detail=f"{r.task} base {r.base:.2f} (n {r.n_dev}, one example {r.step:.2f}); "
                              + "; ".join(parts) + f"; gates trained {r.steps} steps on {r.n_train} training rows")


def _prune_result(passes):
    for p in passes:
        r = result_of(p)
        if hasattr(r, "importance") and getattr(r, "importance", None) is not None:
            return r
    raise NotApplicable("no prune pass (Michel's importance) beside the gates")


def _chosen(r: GatesResult) -> int:
    """The λ run compared: the one pruning most among those that keep between 1 and all-but-one heads."""
    inside = [i for i, k in enumerate(r.n_kept) if 0 < k < r.n_total]
    if not inside:
        raise NotApplicable(f"every λ keeps all heads or none ({_curve(r)}): no count to compare at")
    return min(inside, key=lambda i: r.n_kept[i])


@metric("gates_importance_jaccard")
def gates_importance_jaccard(pr, passes: list) -> Measurement:
    """Gates vs Michel's importance: at the count k the gates keep (the λ run that prunes most while keeping
    1..N−1 heads), the Jaccard index of the gates' kept set and the k most important heads by I_h (ℓ2 per layer,
    mean over the prune pass's seeds). Beside it: the two random k-sets' expected Jaccard k / (2N − k), the
    hypergeometric p of an overlap that large by chance (scipy.stats.hypergeom), and the dev scores of both at k
    (Michel's curve interpolated at N − k pruned)."""
    from scipy.stats import hypergeom

    r, m = _res(pr), _prune_result(passes)
    i = _chosen(r)
    k, n = r.n_kept[i], r.n_total
    imp = np.asarray(m.importance, dtype=np.float64).mean(0).reshape(-1)
    if imp.size != n:
        raise NotApplicable(f"the prune pass has {imp.size} heads, the gates' {n}")
    top = set(np.argsort(-imp, kind="stable")[:k].tolist())
    gates = set(np.flatnonzero(r.kept[i].reshape(-1)).tolist())
    inter = len(top & gates)
    jac = inter / len(top | gates)
    p = float(hypergeom.sf(inter - 1, n, k, k))
    michel_at = float(np.interp(n - k, m.counts, m.curve.mean(0)))
    h = r.n_heads
    # bounds (issue 61): Wilson's 95% bounds on the shared share inter / k, through Jaccard = s / (2 - s) (one gate
    # run: the heads each keeps read as k draws; a seed spread of the gates is not measured)
    lo, hi = (x / 100 for x in wilson_bounds(inter, k)) if k else (0.0, 1.0)
    return Measurement(jac, n, "heads", unit="Jaccard", bounds=(min(lo / (2 - lo), jac), max(hi / (2 - hi), jac)),
                       values={"overlap": inter, "k": k, "chance": k / (2 * n - k), "hypergeom_p": p},
                       detail=f"λ {r.lambdas[i]:g}: {k} of {n} heads kept; {inter} shared with the {k} most important "
                              f"by I_h (chance Jaccard {k / (2 * n - k):.3f}, hypergeometric p {p:.2g}); dev at {k} kept: "
                              f"gates {r.scores[i]:.2f}, Michel's importance order {michel_at:.2f} (interpolated on "
                              f"{[int(c) for c in m.counts]} pruned); gates keep "
                              + ", ".join(head_name(*divmod(g, h)) for g in sorted(gates)) + "; curves: gates "
                              + _curve(r))


def _positional(passes, share: float) -> tuple[np.ndarray, str]:
    """The positional heads of the roles pass beside (its result's ``offset_share`` (3, L, H): % of queries whose
    argmax is at +1, -1, 0), read by field: no family imports another's module (issue 44)."""
    for p in passes:
        res = getattr(p, "result", None)
        offsets = getattr(res, "offset_share", None)
        if offsets is not None:
            return np.asarray(offsets[:2].amax(0).cpu()) >= share, f"roles pass ({p.corpus}, {res.n_queries} queries)"
    raise NotApplicable("no roles pass (positional heads) beside the gates")


@metric("gates_keep_positional")
def gates_keep_positional(pr, passes: list, positional_share: float = 90.0) -> Measurement:
    """Voita §6.2: the specialised heads are the last to go. Share of the positional heads (the roles family:
    argmax at offset ±1 in >= ``positional_share``% of queries (Voita: 90), on the pre-trained encoder's maps) that the gates keep, at the λ run
    compared in gates_importance_jaccard; beside it the share of all heads kept (what a choice blind to roles
    would keep of them on average) and the hypergeometric p of keeping that many."""
    from scipy.stats import hypergeom

    r = _res(pr)
    pos, where = _positional(passes, positional_share)
    i = _chosen(r)
    if pos.shape != r.kept[i].shape:
        raise NotApplicable("the roles pass's heads do not match the gates'")
    n_pos = int(pos.sum())
    if n_pos == 0:
        raise NotApplicable(f"no positional head in the {where}")
    kept_pos = int((pos & r.kept[i]).sum())
    k, n = r.n_kept[i], r.n_total
    p = float(hypergeom.sf(kept_pos - 1, n, n_pos, k))
    lo, hi = (x / 100 for x in wilson_bounds(kept_pos, n_pos))  # issue 61: Wilson's 95% bounds on the share
    return Measurement(kept_pos / n_pos, n_pos, "positional heads", unit="share kept", bounds=(lo, hi),
                       values={"all_heads_kept_share": k / n, "hypergeom_p": p},
                       detail=f"λ {r.lambdas[i]:g}: {kept_pos} of {n_pos} positional heads kept ("
                              + ", ".join(head_name(a, b) for a, b in zip(*np.nonzero(pos)))
                              + f") vs {k} of {n} of all heads ({k / n:.2f}); hypergeometric p {p:.2g}; {where}")
