"""Michel et al. (the prune family): the claim metrics (named by reference_numbers/michel2019_prune.toml)."""
from __future__ import annotations

import numpy as np

from ...claims.registry import Measurement, NotApplicable, metric
from ...claims.stats import mann_whitney_null_se, noise_bar, rank_correlation
from ...engine.attention import head_name
from ...training.glue_pass import result_of
from .constants import RANDOM_ORDERS, STEPS, TABLE3_BERT
from .run import PruneResult

# ---- claim metrics (named by reference_numbers/michel2019_prune.toml) ------------------------------------------

def _classification(r: PruneResult, what: str) -> None:
    if r.metric != "acc":
        raise NotApplicable(f"{r.task} is scored by {r.metric} (regression): no paired per-example test for {what}")


def _noise(r: PruneResult, seed_sd: dict | None) -> tuple[float, str]:
    """The noise bar of a curve (:func:`stats.noise_bar`): one example's step and the seed sd of the fine-tuned
    score (measured with >= 2 seeds, else the value recorded in the claim file from the full tier)."""
    step = 0.0 if np.isnan(r.step) else r.step
    bar, sd, where = noise_bar(step, r.seeds, r.seed_sd if len(r.seeds) > 1 else float("nan"), r.task, seed_sd)
    return bar, f"one example {step:.2f}, seed sd {sd:.2f} ({where})"


def _curve_txt(r: PruneResult, curve: np.ndarray) -> str:
    return ", ".join(f"{int(100 * f)}% ({c}) {v:.1f}" for f, c, v in zip(r.fractions, r.counts, curve))


@metric("michel_not_significant_share")
def michel_not_significant_share(pr, alpha: float = 0.01, margin: float = 1.0, equivalence_alpha: float = 0.05
                                 ) -> Measurement:
    """§3.2: the share (%) of heads whose masking alone changes the dev score not significantly.

    Value: the paper's reading, the share whose exact McNemar p >= ``alpha`` (mean over seeds). A failure to reject
    is no evidence of absence (few dev examples reject nothing), so the value carries **bounds**: the lower, the
    share of heads shown unchanged, their paired Δ (mean over seeds, SE the mean of the seeds' paired SEs from the
    discordant counts) inside ± ``margin`` points by an equivalence test (TOST at ``equivalence_alpha``,
    :func:`stats.tost`); the upper, the value. The claim (threshold: a share) holds when the shown-unchanged share
    reaches it, does not hold when even the not-rejected share misses it, and is inconclusive in between."""
    from ...claims.stats import paired_counts_se, tost

    r = result_of(pr)
    _classification(r, "single heads")
    deltas = 100.0 * (r.head_flips[..., 1] - r.head_flips[..., 0]) / r.n_dev  # (S, L, H) gained - lost
    ses = np.vectorize(lambda lost, gained: paired_counts_se(int(lost), int(gained), r.n_dev))(
        r.head_flips[..., 0], r.head_flips[..., 1])
    equivalent = np.array([[tost(float(deltas[:, l, h].mean()), float(ses[:, l, h].mean()), margin,
                                 equivalence_alpha)["p"] < equivalence_alpha for h in range(r.n_heads)]
                           for l in range(r.n_layers)])
    shown = 100.0 * float(equivalent.mean())
    shares, parts = [], []
    for s, seed in enumerate(r.seeds):
        sig = r.head_p[s] < alpha
        up = int((sig & (r.head_delta[s] > 0)).sum())
        shares.append(100.0 * float((~sig).mean()))
        worst = np.unravel_index(int(np.argmin(r.head_delta[s])), r.head_delta[s].shape)
        best = np.unravel_index(int(np.argmax(r.head_delta[s])), r.head_delta[s].shape)
        parts.append(f"seed {seed}: {int(sig.sum())} of {sig.size} significant ({up} of them gains); worst "
                     f"{head_name(*worst)} {r.head_delta[s][worst]:+.2f} (p {r.head_p[s][worst]:.2g}), best "
                     f"{head_name(*best)} {r.head_delta[s][best]:+.2f} (p {r.head_p[s][best]:.2g}); "
                     f"{int((r.head_delta[s] > 0).sum())} heads above base")
    value = float(np.mean(shares))
    return Measurement(value, r.n_dev, "dev examples", unit="% of heads", bounds=(min(shown, value), value),
                       values={"shown_unchanged_share": shown},
                       detail=f"{r.task} base {np.mean(r.base):.2f}, one example = {r.step:.2f} points; "
                              f"{int(equivalent.sum())} of {equivalent.size} heads shown unchanged (Δ within "
                              f"±{margin:g} points, TOST α {equivalence_alpha:g}; a one-example SE is "
                              f"{paired_counts_se(1, 0, r.n_dev):.2f}); " + "; ".join(parts))


@metric("michel_all_but_one_share")
def michel_all_but_one_share(pr, max_drop: float = 1.0) -> Measurement:
    """§3.3, Table 3: per layer, every head but one masked; the best kept head's Δ (chosen on dev, as Table 3).
    Value: the share (%) of layers whose best Δ >= -max_drop points, mean over seeds."""
    r = result_of(pr)
    if r.abo_delta is None:
        raise NotApplicable(f"the all-but-one sweep (L·H = {r.n_layers * r.n_heads} configurations) runs in "
                            f"--tier full (this pass: {r.tier})")
    best = r.abo_delta.max(-1)  # (S, L)
    arg = r.abo_delta.argmax(-1)
    share = float((best >= -max_drop).mean()) * 100
    s0 = r.seeds[0]
    rows = []
    for l in range(r.n_layers):
        h = int(arg[0, l])
        p = r.abo_p[0, l, h]
        ptxt = "" if np.isnan(p) else f" p {p:.2g}"
        rows.append(f"L{l + 1} {head_name(l, h)} {best[:, l].mean():+.2f}{ptxt}")
    sig = "" if np.isnan(r.abo_p).all() else (
        f"; layers whose best is significant (p < 0.01, seed {s0}): "
        f"{int((np.take_along_axis(r.abo_p[0], arg[0][:, None], 1)[:, 0] < 0.01).sum())} of {r.n_layers}")
    return Measurement(share, r.n_dev, "dev examples", unit="% of layers",
                       detail=f"{r.task}, best kept head per layer (seed {s0}) and Δ mean over seeds "
                              f"{list(r.seeds[:len(r.abo_delta)])}: "
                              + ", ".join(rows) + sig + "; paper Table 3 (bert-base, MNLI-m, %): "
                              + " ".join(f"L{i + 1} {v:+.2f}" for i, v in enumerate(TABLE3_BERT)))


@metric("michel_importance_vs_delta")
def michel_importance_vs_delta(pr) -> Measurement:
    """§4.1: Spearman between the per-layer-normalised I_h and -Δ_h (single head masked), over all heads, mean
    over seeds; the raw (unnormalised) scores' Spearman in the detail."""

    r = result_of(pr)
    rhos, parts = [], []
    for s, seed in enumerate(r.seeds):
        d = -r.head_delta[s].reshape(-1)
        if np.std(d) == 0:
            raise NotApplicable(f"seed {seed}: masking any single head changes no dev score: nothing to rank")
        rho, p = rank_correlation(r.importance[s], d)
        raw, _ = rank_correlation(r.importance_raw[s], d)
        rhos.append(float(rho))
        top = np.unravel_index(int(np.argmax(r.importance[s])), r.importance[s].shape)
        parts.append(f"seed {seed}: ρ {rho:.3f} (p {p:.2g}), raw scores ρ {raw:.3f}; most important {head_name(*top)}")
    return Measurement(float(np.mean(rhos)), r.n_layers * r.n_heads, "heads", unit="Spearman ρ",
                       detail=f"{r.task}: I_h on {r.n_importance} training examples, Δ on {r.n_dev} dev examples; "
                              + "; ".join(parts))


def _prunable(r: PruneResult, curve: np.ndarray, tol: float) -> float:
    """The largest nominal fraction k/10 with every step up to it within -tol of the unpruned score."""
    ok = 0.0
    for f, v in zip(r.fractions, curve):
        if v - curve[0] < -tol:
            break
        ok = float(f)
    return ok


@metric("michel_prunable_fraction")
def michel_prunable_fraction(pr, max_drop: float = 1.0, seed_sd: dict | None = None) -> Measurement:
    """§4.2: the largest nominal fraction of heads pruned (10% steps, importance order computed once) whose score
    stays within max(max_drop, noise) of the unpruned model at every step up to it; curve = mean over seeds."""
    r = result_of(pr)
    bar, how = _noise(r, seed_sd)
    tol = max(max_drop, bar)
    curve = r.curve.mean(0)
    frac = _prunable(r, curve, tol)
    extra = ""
    if r.curve_exact is not None:
        extra += f"; importance recomputed each step: {_prunable(r, r.curve_exact.mean(0), tol):.1f}"
    if r.curve_random is not None:
        extra += f"; random orders: {np.mean([_prunable(r, c, tol) for c in r.curve_random.reshape(-1, len(r.counts))]):.2f} (mean)"
    return Measurement(frac, r.n_dev, "dev examples", unit="fraction of heads",
                       detail=f"{r.task} {r.metric} by heads pruned (of {r.n_layers * r.n_heads}): {_curve_txt(r, curve)};"
                              f" allowed drop {tol:.2f} = max({max_drop}, noise: {how}){extra}")


@metric("michel_delta_at_fraction")
def michel_delta_at_fraction(pr, fraction: float = 0.4) -> Measurement:
    """Δ (points) at the nominal pruning step ``fraction`` (importance order computed once), mean over seeds."""
    r = result_of(pr)
    k = int(round(fraction * STEPS))
    d = r.curve[:, k] - r.curve[:, 0]
    return Measurement(float(d.mean()), r.n_dev, "dev examples", unit="points",
                       detail=f"{r.task}: {r.counts[k]} of {r.n_layers * r.n_heads} heads pruned: "
                              + ", ".join(f"seed {s} {x:+.2f}" for s, x in zip(r.seeds, d))
                              + f"; McNemar p {', '.join(f'{x:.2g}' for x in r.curve_p[:, k])}")


@metric("michel_single_head_model")
def michel_single_head_model(pr) -> Measurement:
    """Δ (points) of the model reduced to one head per layer in every layer at once (the most important head by
    I_h kept), mean over seeds; the best-per-layer heads from the all-but-one sweep in the detail (full tier). A
    classifier's Δ has a standard error: each seed's paired over the dev examples it lost and gained
    (stats.paired_counts_se), the seeds sharing those examples counted as one (their mean SE², not divided by the
    seeds); a regressor's (STS-B) none. The seeds' spread: the judge adds it (claims.checks.seed_interval)."""
    from ...claims.stats import paired_counts_se

    r = result_of(pr)
    d = r.one_head - r.base
    extra = ""
    if r.one_head_best is not None:
        e = len(r.one_head_best)
        extra = (f"; with each layer's best all-but-one head (chosen on dev; seeds {list(r.seeds[:e])}) "
                 f"{np.mean(r.one_head_best - r.base[:e]):+.2f}")
    se = None
    if r.one_head_flips is not None and not np.isnan(r.step):  # classification: one example is r.step points
        per_seed = [paired_counts_se(int(lost), int(gained), r.n_dev) for lost, gained in r.one_head_flips]
        se = float(np.sqrt(np.mean(np.square(per_seed))))
        extra += (f"; SE {se:.2f} (examples lost/gained per seed "
                  + ", ".join(f"{int(a)}/{int(b)}" for a, b in r.one_head_flips) + ")")
    return Measurement(float(d.mean()), r.n_dev, "dev examples", unit="points", standard_error=se,
                       detail=f"{r.task} base {np.mean(r.base):.2f}; {r.n_layers} of {r.n_layers * r.n_heads} heads kept "
                              f"(seed {r.seeds[0]}: {', '.join(r.one_head_kept[0])}): "
                              + ", ".join(f"seed {s} {x:+.2f}" for s, x in zip(r.seeds, d)) + extra)


@metric("michel_cross_set_correlation")
def michel_cross_set_correlation(pr, min_auc_z: float = 2.0) -> Measurement:
    """§3.4: Pearson r (the paper's) between the single-head Δ on this task's dev set and on a second evaluation
    set of the same model (MRPC: STS-B dev binarised), seed 0. The Δ is the margin's ROC AUC, not accuracy: the two
    sets' class balances differ (MRPC dev 68% paraphrases, STS-B >= 4 18%), so a head that only moves the decision
    bias gains accuracy on one and loses it on the other; the accuracy r (the paper's score, same-distribution sets
    there) is in the detail. NaN (does not hold) unless the unmasked model's AUC on the second set exceeds chance by
    ``min_auc_z`` null SEs (Mann-Whitney: sqrt((n1 + n2 + 1) / (12 n1 n2))): heads cannot "matter on another set"
    where the model does not do the task at all (the random-init twin: AUC 47.9 on STS-B, r 0.35 from noise)."""

    r = result_of(pr)
    if r.cross is None:
        why = ("runs in --tier full (one more single-head sweep of the 1,500 STS-B dev pairs)" if r.tier != "full"
               else "needs STS-B dev (MRPC pass only)")
        raise NotApplicable(f"the second evaluation set {why}; MNLI matched/mismatched is not in the data")
    c = r.cross
    a, b = c["own_head_auc_delta"].reshape(-1), c["head_auc_delta"].reshape(-1)
    acc_a, acc_b = r.head_delta[0].reshape(-1), c["head_delta"].reshape(-1)
    if np.std(a) == 0 or np.std(b) == 0:
        raise NotApplicable("no single head changes a score on one of the sets")
    rr, p = rank_correlation(a, b, "pearson")
    rho, _ = rank_correlation(a, b)
    acc = (f"{rank_correlation(acc_a, acc_b, 'pearson')[0]:.3f} (Spearman {rank_correlation(acc_a, acc_b)[0]:.3f})"
           if np.std(acc_a) > 0 and np.std(acc_b) > 0 else "undefined (a constant Δ)")
    n_pos, n_neg = int(c["positives"]), int(c["n"]) - int(c["positives"])
    floor = 50 + min_auc_z * 100 * mann_whitney_null_se(n_pos, n_neg)  # AUC in points
    transfers = c["auc_base"] > floor
    return Measurement(float(rr) if transfers else float("nan"), r.n_layers * r.n_heads, "heads",
                       unit="Pearson r of Δ AUC",
                       detail=f"{r.task} dev ({r.n_dev}, accuracy {r.base[0]:.2f}, AUC {c['own_auc_base']:.2f}) vs "
                              f"{c['set']} ({c['n']} pairs, {c['positives']} positive, accuracy {c['base']:.2f}, AUC "
                              f"{c['auc_base']:.2f}): per-head Δ of the margin's ROC AUC r {rr:.3f} (p {p:.2g}), "
                              f"Spearman {rho:.3f}; per-head accuracy Δ (the paper's score) r {acc}; seed {r.seeds[0]}"
                              + ("" if transfers else f"; NaN: the model's AUC on {c['set']} is not above chance + "
                                 f"{min_auc_z:g} SE ({floor:.2f}), so no head can matter there"))


@metric("michel_early_importance")
def michel_early_importance(pr) -> Measurement:
    """§6 substitute: Spearman(I after epoch 1, I final) - Spearman(I at step 0, I final), seed 0."""

    r = result_of(pr)
    if r.early is None:
        raise NotApplicable(f"importance at fine-tuning checkpoints needs one more epoch of fine-tuning: --tier full "
                            f"(this pass: {r.tier})")
    f = r.early["final"].reshape(-1)
    r1 = rank_correlation(r.early["epoch1"], f)[0]
    r0 = rank_correlation(r.early["step0"], f)[0]
    return Measurement(r1 - r0, r.n_layers * r.n_heads, "heads", unit="Δ Spearman ρ",
                       detail=f"{r.task} seed {r.seeds[0]}: ρ(epoch 1, final) {r1:.3f}, ρ(step 0, final) {r0:.3f}; "
                              f"I_h on {r.n_importance} training examples")


@metric("michel_importance_beats_random")
def michel_importance_beats_random(pr) -> Measurement:
    """Beyond the paper: mean score over the curve's steps (area, points) in importance order minus the mean over
    random orders, mean over seeds."""
    r = result_of(pr)
    if r.curve_random is None:
        raise NotApplicable(f"random pruning orders run in --tier full (this pass: {r.tier})")
    imp = r.curve[:len(r.curve_random)].mean(-1)  # the seeds that ran the random orders
    rnd = r.curve_random.mean(-1).mean(-1)
    dorder = f"; single-head-Δ order {r.curve_delta_order.mean():.2f}" if r.curve_delta_order is not None else ""
    return Measurement(float((imp - rnd).mean()), r.n_dev, "dev examples", unit="points (curve mean)",
                       detail=f"{r.task} (seeds {list(r.seeds[:len(rnd)])}): mean over 0-90% pruned, importance order "
                              f"{imp.mean():.2f}, {RANDOM_ORDERS} random "
                              f"orders {rnd.mean():.2f}{dorder}; curves: importance {_curve_txt(r, r.curve.mean(0))}; "
                              f"random {_curve_txt(r, r.curve_random.mean((0, 1)))}")
