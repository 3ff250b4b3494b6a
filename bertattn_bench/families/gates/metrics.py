"""Voita et al. 2019 §6 (the ``gates`` family): the claim metrics, named by reference_numbers/voita2019_gates.toml.
Each reads the gates' pass (one λ sweep per seed); the comparisons read the ``prune`` pass (Michel's importance,
same checkpoints) and the ``roles`` pass (positional, syntactic and rare-word heads: :mod:`.roles_read`) beside it."""
from __future__ import annotations

import numpy as np

from ...claims.registry import Measurement, NotApplicable, metric
from ...claims.stats import tost_paired, wilson_bounds
from ...engine.attention import head_name
from ...training.glue_pass import result_of
from .roles_read import ROLES, role_heads
from .run import GatesResult


def _res(pr) -> GatesResult:
    r = result_of(pr)
    if not isinstance(r, GatesResult):
        raise NotApplicable("not a gates pass")
    return r


def _curve(r: GatesResult, s: int) -> str:
    return "; ".join(f"λ {lam:g}: {int(k)} kept, {x:.2f} ({x - r.base[s]:+.2f})"
                     for lam, k, x in zip(r.lambdas, r.n_kept[s], r.scores[s]))


def _pruned_share_of_seed(r: GatesResult, s: int, max_drop: float, alpha: float) -> tuple[float, float, float, str]:
    """One seed's (value, lower, upper, detail) of :func:`gates_pruned_share`."""
    shares, shown, not_beyond, parts = [0.0], [0.0], [0.0], []
    for lam, k, (lost, gained) in zip(r.lambdas, r.n_kept[s], r.flips[s]):
        share = 1.0 - int(k) / r.n_total
        t = tost_paired(int(lost), int(gained), r.n_dev, max_drop, alpha)
        delta, se = t["delta"], t["se"]
        if delta >= -max_drop:
            shares.append(share)
        if t["p_lower"] < alpha:
            shown.append(share)
        if t["lower"] != "beyond":
            not_beyond.append(share)
        parts.append(f"λ {lam:g}: {r.n_total - int(k)} of {r.n_total} pruned, Δ {delta:+.2f} (SE {se:.2f}, lost "
                     f"{int(lost)} / gained {int(gained)}, p(drop <= {max_drop:g}) {t['p_lower']:.2g})")
    value = max(shares)
    return value, min(max(shown), value), max(max(not_beyond), value), "; ".join(parts)


@metric("gates_pruned_share")
def gates_pruned_share(pr, max_drop: float = 1.0, alpha: float = 0.05) -> Measurement:
    """Voita §6: the largest share of heads the gates close (over the λ sweep) at a dev drop of at most
    ``max_drop`` points. Per seed: the value is the share among the runs whose paired Δ (pruned − unpruned, same dev
    examples) is >= −max_drop; its bounds: lower, the largest share whose drop is *shown* within ``max_drop``
    (one-sided half of TOST on the discordant counts, :func:`stats.tost_paired`); upper, the largest share whose
    drop is not shown beyond it. Several seeds: the mean of the seeds' values and of their bounds (the judge adds the
    seeds' spread, ``claims.checks.per_seed_values``). Regression tasks: no paired counts (NotApplicable)."""
    r = _res(pr)
    if r.metric != "acc":
        raise NotApplicable(f"{r.task} is scored by {r.metric}: no paired per-example test")
    per = [_pruned_share_of_seed(r, s, max_drop, alpha) for s in range(len(r.seeds))]
    value, lo, hi = (float(np.mean([p[i] for p in per])) for i in range(3))
    detail = " | ".join(f"seed {seed} (base {r.base[s]:.2f}): value {per[s][0]:.3f}; {per[s][3]}"
                        for s, seed in enumerate(r.seeds))
    return Measurement(value, r.n_dev, "dev examples", unit="fraction of heads pruned", bounds=(lo, hi),
                       detail=f"{r.task} n {r.n_dev} (one example {r.step:.2f}), mean over seeds {list(r.seeds)}: "
                              + detail + f"; gates trained {r.steps} steps on {r.n_train} training rows")


def _prune_result(passes):
    for p in passes:
        r = result_of(p)
        if hasattr(r, "importance") and getattr(r, "importance", None) is not None:
            return r
    raise NotApplicable("no prune pass (Michel's importance) beside the gates")


def chosen(r: GatesResult, s: int) -> int:
    """Seed ``s``'s λ run compared: the one pruning most among those that keep between 1 and all-but-one heads."""
    inside = [i for i, k in enumerate(r.n_kept[s]) if 0 < k < r.n_total]
    if not inside:
        raise NotApplicable(f"every λ keeps all heads or none ({_curve(r, s)}): no count to compare at")
    return min(inside, key=lambda i: r.n_kept[s][i])


def _of_seed(m, field: str, seed: int) -> np.ndarray:
    """The prune pass's per-seed array ``field`` for ``seed`` (that seed's checkpoint); the mean over its seeds
    where it did not train that seed."""
    a = np.asarray(getattr(m, field), dtype=np.float64)
    seeds = list(getattr(m, "seeds", ()) or ())
    return a[seeds.index(seed)] if seed in seeds and len(seeds) == len(a) else a.mean(0)


@metric("gates_importance_jaccard")
def gates_importance_jaccard(pr, passes: list) -> Measurement:
    """Gates vs Michel's importance, per seed: at the count k the gates keep (the λ run that prunes most while
    keeping 1..N−1 heads), the Jaccard index of the gates' kept set and the k most important heads by I_h (ℓ2 per
    layer, the prune pass's same seed; their mean where it lacks the seed). Value: the mean over seeds. Bounds (issue
    61): Wilson's 95% bounds on the shared share (the seeds' shared heads pooled over their k), through Jaccard =
    s / (2 − s). Beside it: the two random k-sets' expected Jaccard k / (2N − k), the hypergeometric p
    (scipy.stats.hypergeom) and the dev scores of both at k (Michel's curve interpolated at N − k pruned)."""
    from scipy.stats import hypergeom

    r, m = _res(pr), _prune_result(passes)
    n, h = r.n_total, r.n_heads
    jacs, inters, ks, ps, chances, parts = [], [], [], [], [], []
    for s, seed in enumerate(r.seeds):
        i = chosen(r, s)
        k = int(r.n_kept[s][i])
        imp = _of_seed(m, "importance", seed).reshape(-1)
        if imp.size != n:
            raise NotApplicable(f"the prune pass has {imp.size} heads, the gates' {n}")
        top = set(np.argsort(-imp, kind="stable")[:k].tolist())
        gates = set(np.flatnonzero(r.kept[s][i].reshape(-1)).tolist())
        inter = len(top & gates)
        jacs.append(inter / len(top | gates))
        inters.append(inter)
        ks.append(k)
        ps.append(float(hypergeom.sf(inter - 1, n, k, k)))
        chances.append(k / (2 * n - k))
        michel_at = float(np.interp(n - k, m.counts, _of_seed(m, "curve", seed)))
        parts.append(f"seed {seed}, λ {r.lambdas[i]:g}: {k} of {n} heads kept; {inter} shared with the {k} most "
                     f"important by I_h (Jaccard {jacs[-1]:.3f}, chance {chances[-1]:.3f}, hypergeometric p "
                     f"{ps[-1]:.2g}); dev at {k} kept: gates {r.scores[s][i]:.2f}, Michel's order {michel_at:.2f} "
                     f"(interpolated on {[int(c) for c in m.counts]} pruned); gates keep "
                     + ", ".join(head_name(*divmod(g, h)) for g in sorted(gates)) + "; curves: gates " + _curve(r, s))
    jac = float(np.mean(jacs))
    lo, hi = (x / 100 for x in wilson_bounds(sum(inters), sum(ks))) if sum(ks) else (0.0, 1.0)
    return Measurement(jac, n, "heads", unit="Jaccard", bounds=(min(lo / (2 - lo), jac), max(hi / (2 - hi), jac)),
                       values={"overlap": sum(inters), "k": sum(ks), "chance": float(np.mean(chances)),
                               "hypergeom_p": max(ps), "per_seed": jacs} if len(jacs) > 1 else
                       {"overlap": inters[0], "k": ks[0], "chance": chances[0], "hypergeom_p": ps[0]},
                       detail=" | ".join(parts))


def kept_role_share(r: GatesResult, mask: np.ndarray, where: str, what: str) -> Measurement:
    """The share of the role heads ``mask`` (L, H) that the gates keep at each seed's compared λ run, pooled over
    seeds (kept role heads / (role heads x seeds)); Wilson's 95% bounds on that pooled count (the seeds' choices
    taken as independent draws); beside it the share of all heads kept (what a choice blind to roles keeps on
    average) and the hypergeometric p of keeping that many, per seed (the largest in ``values``)."""
    from scipy.stats import hypergeom

    n_role = int(mask.sum())
    if n_role == 0:
        raise NotApplicable(f"no {what} head in the {where}")
    if mask.shape != r.kept.shape[-2:]:
        raise NotApplicable("the roles pass's heads do not match the gates'")
    n = r.n_total
    kept_sum, all_share, ps, parts = 0, [], [], []
    for s, seed in enumerate(r.seeds):
        i = chosen(r, s)
        kept_role, k = int((mask & r.kept[s][i]).sum()), int(r.n_kept[s][i])
        kept_sum += kept_role
        all_share.append(k / n)
        ps.append(float(hypergeom.sf(kept_role - 1, n, n_role, k)))
        parts.append(f"seed {seed}, λ {r.lambdas[i]:g}: {kept_role} of {n_role} kept vs {k} of {n} of all heads "
                     f"({k / n:.2f}), hypergeometric p {ps[-1]:.2g}")
    total = n_role * len(r.seeds)
    lo, hi = (x / 100 for x in wilson_bounds(kept_sum, total))
    return Measurement(kept_sum / total, total, f"{what} heads x seeds", unit="share kept", bounds=(lo, hi),
                       values={"all_heads_kept_share": float(np.mean(all_share)), "hypergeom_p": max(ps),
                               "role_heads": n_role},
                       detail=f"{what} heads: " + ", ".join(head_name(a, b) for a, b in zip(*np.nonzero(mask)))
                              + "; " + "; ".join(parts) + f"; {where}")


@metric("gates_keep_positional")
def gates_keep_positional(pr, passes: list, positional_share: float = 90.0) -> Measurement:
    """Voita §6.2: the specialised heads are the last to go. Share of the positional heads (the roles family:
    argmax at offset ±1 in >= ``positional_share``% of queries (Voita: 90), on the pre-trained encoder's maps) that
    the gates keep, at the λ run compared in gates_importance_jaccard (:func:`kept_role_share`)."""
    r = _res(pr)
    masks, where = role_heads(passes, ("positional",), positional_share=positional_share)
    return kept_role_share(r, masks["positional"], where, "positional")


@metric("gates_keep_roles")
def gates_keep_roles(pr, passes: list, roles: tuple = ROLES, positional_share: float = 90.0,
                     syntactic_margin: float = 10.0, rare_margin: float = 10.0) -> Measurement:
    """Voita §6.2 with every role: the share of the heads holding any of ``roles`` (positional: ±1 in >=
    ``positional_share``% of queries; syntactic: a Table 1 relation and direction tracked >= ``syntactic_margin``
    points above its offset baseline (Voita's rule); rare: a first-layer head pointing to a rarest word >=
    ``rare_margin`` points above chance) that the gates keep, counted as :func:`gates_keep_positional`; each role's
    own share kept in ``values``."""
    r = _res(pr)
    masks, where = role_heads(passes, tuple(roles), positional_share, syntactic_margin, rare_margin)
    union = np.logical_or.reduce([masks[k] for k in roles])
    m = kept_role_share(r, union, where, "+".join(roles))
    for k in roles:
        if masks[k].any():
            per = kept_role_share(r, masks[k], where, k)
            m.values[f"{k}_kept_share"] = per.value
            m.values[f"{k}_heads"] = int(masks[k].sum())
            m.detail += f" | {k}: {per.value:.2f} of {int(masks[k].sum())} kept"
        else:
            m.detail += f" | {k}: no head"
    return m
