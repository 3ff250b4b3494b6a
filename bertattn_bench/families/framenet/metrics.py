"""The framenet family's claim metrics (named by reference_numbers/kovaleva2019_framenet.toml)."""
from __future__ import annotations

import numpy as np

from ...claims.registry import Measurement, NotApplicable, metric
from ...claims.stats import one_sided_t_p
from ...engine.attention import head_name
from ...training.glue_pass import result_of
from ..common.surface_stats import resampled_bounds
from .constants import ALPHA, PERCENTILE
from .reduce import FrameResult


def _result(pr) -> FrameResult:
    r = result_of(pr)
    if r.n_sentences < 2:
        raise NotApplicable(f"{r.n_sentences} sentence(s): no spread over sentences to test against the control")
    return r


def frame_heads(r: FrameResult, direction: str | None = None, percentile: float = PERCENTILE, alpha: float = ALPHA):
    """The frame-semantic heads, strongest first: [(layer, head, score, control, p)], the control's percentile
    threshold, and every head's one-sided paired p-value (L, H)."""
    d = r.d(direction)
    score, control = r.score[d], r.control[d]
    _, _, p = one_sided_t_p(r.diff_mean[d], r.diff_sd[d], r.n_sentences)
    threshold = float(np.percentile(control, percentile))
    n_heads = score.size
    ok = (score > threshold) & (p * n_heads < alpha)
    heads = [(int(l), int(h), float(score[l, h]), float(control[l, h]), float(p[l, h]))
             for l, h in zip(*np.nonzero(ok))]
    return sorted(heads, key=lambda x: -x[2]), threshold, p


def _n(r: FrameResult) -> dict:
    return {"n": r.n_sentences, "n_unit": "sentences"}


@metric("framenet_heads")
def framenet_heads(pr, direction: str | None = None, percentile: float = PERCENTILE, alpha: float = ALPHA) -> Measurement:
    """Number of frame-semantic heads (module docstring: above the control's 99th percentile over all heads and
    beating their own matched-distance control), listed ``layer-head`` with score / control."""
    r = _result(pr)
    heads, threshold, p = frame_heads(r, direction, percentile, alpha)
    m = _framenet_heads(r, heads, threshold, p, direction, percentile, alpha)
    return resampled_bounds(m, r, lambda again: float(len(frame_heads(again, direction, percentile, alpha)[0])),
                            0 if r.score_per_sentence is None else r.n_sentences, "sentences")


def _framenet_heads(r: FrameResult, heads, threshold, p, direction, percentile: float, alpha: float) -> Measurement:
    d = r.d(direction)
    score = r.score[d]
    paper_threshold = float(np.percentile(score, percentile))
    above_paper = [divmod(int(i), score.shape[1]) for i in np.argsort(-score, axis=None) if score.flat[i] > paper_threshold]
    top = [divmod(int(i), score.shape[1]) for i in np.argsort(-score, axis=None)[:5]]
    listed = ", ".join(f"{head_name(l, h)} {s:.3f} vs control {c:.3f} (p {pv:.1e})" for l, h, s, c, pv in heads)
    direction = r.direction(direction)
    return Measurement(float(len(heads)), unit="heads", **_n(r), head=head_name(*heads[0][:2]) if heads else None,
                       detail=f"{direction}: {listed or 'none'}; control p{percentile:g} over {score.size} heads "
                              f"{threshold:.3f}; paper's criterion (p{percentile:g} of the heads' own scores, "
                              f"{paper_threshold:.3f}): {', '.join(head_name(*x) for x in above_paper)}; top 5 by "
                              f"score: " + ", ".join(f"{head_name(l, h)} {score[l, h]:.3f}/{r.control[d][l, h]:.3f}"
                                                     for l, h in top)
                              + f"; {r.n_pairs} linked pairs, {r.draws} control draws per sentence "
                                f"({r.n_fallback // max(r.draws, 1)} pairs without another at their distance reuse "
                                f"themselves); {int((p * p.size < alpha).sum())} heads beat their control by the paired "
                                f"test alone")


@metric("framenet_top_score")
def framenet_top_score(pr, direction: str | None = None) -> Measurement:
    """The highest head score (mean over sentences of the max linked-pair attention) and its head (paper: 0.209)."""
    r = _result(pr)
    score = r.score[r.d(direction)]
    l, h = divmod(int(np.argmax(score)), score.shape[1])
    return Measurement(float(score[l, h]), unit="attention", head=head_name(l, h), **_n(r),
                       detail=f"{r.direction(direction)} ({r.level} level): control {r.control[r.d(direction)][l, h]:.3f}; median head "
                              f"{np.median(score):.3f}")


@metric("framenet_example_argmax")
def framenet_example_argmax(pr, top: int = 2, direction: str | None = None) -> Measurement:
    """In the paper's example ("He was becoming agitated"), how many of the ``top`` strongest frame-semantic heads
    put the argmax of the plotted row on the linked partner: the notebook corpus plots the row of "he" (cells
    71-72, the FE's first piece) and a hit is its argmax on a piece of "agitated"; the project's word-level
    variants read the row of "agitated" and a hit is "He". [CLS]/[SEP] and the row's own token are not candidates.
    No frame-semantic head: 0."""
    r = _result(pr)
    ex = r.example
    if ex.get("rows") is None:
        raise NotApplicable("the paper's example sentence was not in the pass")
    heads, _, _ = frame_heads(r, direction)
    labels, row_of = ex["labels"], ex["row"]

    def argmax(l, h):
        row = np.asarray(ex["rows"][l, h], dtype=float).copy()
        row[ex["exclude"]] = -np.inf
        return int(np.argmax(row)), row

    hits, parts = 0, []
    for l, h, s, c, _ in heads[:top]:
        arg, row = argmax(l, h)
        hits += arg in ex["hits"]
        parts.append(f"{head_name(l, h)}: argmax {labels[arg]!r} {row[arg]:.2f}")
    ranked = np.argsort(-r.score[r.d(direction)], axis=None)[:top]
    others = [f"{head_name(*divmod(int(i), r.score.shape[2]))} -> "
              f"{labels[argmax(*divmod(int(i), r.score.shape[2]))[0]]!r}" for i in ranked]
    return Measurement(float(hits), n=1, n_unit="sentence", unit=f"of top {top}",
                       detail=f"{' '.join(labels)!r} ({ex['lu']}, {ex['frame']}, annoset {ex['annoset_id']}; FE "
                              f"{', '.join(ex['fe_names'])}; {ex['what']}; a hit: "
                              f"{', '.join(repr(labels[i]) for i in ex['hits'])}): "
                              f"{'; '.join(parts) or 'no frame-semantic head'}; top {top} heads by score, frame-"
                              f"semantic or not: {', '.join(others)}")


EQUIVALENCE_MARGIN = 1.0  # points: the scale of the paper's single-head effects (§4.6: best gains 0.1 to 1.2)
EQUIVALENCE_ALPHA = 0.05
Z_INTERVAL = 1.96  # claims.Claim.interval_z: the claim's interval is value ± 1.96 SE


@metric("framenet_heads_disable_equivalence")
def framenet_heads_disable_equivalence(pr, passes: list, margin: float = EQUIVALENCE_MARGIN,
                                       alpha: float = EQUIVALENCE_ALPHA, direction: str | None = None) -> Measurement:
    """Kovaleva §5: disabling a frame-semantic head does not lower the score, judged as an *absence* must be: by
    an equivalence test, not by a failure to reject. For every task sweep in ``passes`` (the ``disable`` family)
    and every frame-semantic head: the paired difference Δ (disabled − intact, same dev examples), mean over the
    sweep's seeds, and its SE (each seed's paired SE from its discordant counts, :func:`stats.paired_counts_se`;
    their mean bounds the mean's SE whatever the seeds' correlation), tested one-sided against −``margin`` points
    (the lower half of :func:`stats.tost`: a gain is no drop), Bonferroni over the m (task, head) tests at
    ``alpha``.

    Value: Δ + margin of the head whose Δ is least clear of the margin (smallest (Δ + margin) / SE), points; its
    standard error is that SE x z_(1−alpha/m) / 1.96, so the claim's interval value ± 1.96 SE (threshold 0) is the
    Bonferroni one-sided bound: *holds* when every head's drop is shown to be within the margin (Δ − z·SE >
    −margin for all), *does not hold* when some head's drop is significantly beyond it (Δ + z·SE < −margin),
    otherwise *inconclusive*. A regression sweep (STS-B, Pearson) is paired by each head's predictions' r with the
    undisabled model's: its SE is the one that reproduces the bound for two overlapping correlations at the test's
    level (:func:`common.sweep_scoring.head_gain_se`); a sweep stored before it kept that r is left out and named."""
    from ...claims.stats import tost
    from ..common.sweep_scoring import head_gain_se, paired_by_correlation, pairing_text

    r = _result(pr)
    heads, _, _ = frame_heads(r, direction)
    if not heads:
        raise NotApplicable("no frame-semantic head on this model (kov.framenet_heads): nothing to disable")
    sweeps, unjudged = [], []
    for p in passes:
        dr = result_of(p)
        if (dr.n_layers, dr.n_heads) != r.shape:
            raise NotApplicable(f"the {dr.task} sweep has {dr.n_layers}x{dr.n_heads} heads, the FrameNet pass "
                                f"{r.shape[0]}x{r.shape[1]}")
        try:
            paired_by_correlation(dr)
        except NotApplicable as e:
            unjudged.append(str(e))
            continue
        sweeps.append(dr)
    if not sweeps:
        raise NotApplicable("; ".join(unjudged))
    m = len(sweeps) * len(heads)
    level = alpha / m  # the one-sided level each test runs at (tost's z)
    tests, parts = [], []
    for dr in sweeps:
        S = range(len(dr.seeds))
        for l, h, *_ in heads:
            deltas = [float(dr.head_delta[s, l, h]) for s in S]
            ses = [head_gain_se(dr, s, l, h, level) for s in S]
            # the mean over seeds (fine-tunes of the same task on the same dev examples): its SE is at most the
            # mean of the seeds' SEs (Cauchy-Schwarz, whatever their correlation), used as it stands
            t = tost(float(np.mean(deltas)), float(np.mean(ses)), margin, alpha, m)
            ratio = (t["delta"] + margin) / t["se"]
            tests.append((ratio, t, dr.task, (l, h), dr.n_dev))
            seeds = "" if len(deltas) == 1 else " = mean of " + ", ".join(
                f"seed {seed} {d:+.2f}" for seed, d in zip(dr.seeds, deltas))
            pairing = ", ".join(pairing_text(dr, "head", s, l * dr.n_heads + h) for s in S)
            parts.append(f"{dr.task} {head_name(l, h)} {t['delta']:+.2f} ± {t['se']:.2f}{seeds} ({pairing} of "
                         f"{dr.n_dev}; bound {t['delta'] - t['z'] * t['se']:+.2f}: {t['lower']})")
    ratio, t, task, (l, h), n_dev = min(tests, key=lambda x: x[0])
    z = t["z"]
    n_within = sum(1 for x in tests if x[1]["lower"] == "within")
    n_beyond = sum(1 for x in tests if x[1]["lower"] == "beyond")
    summary = ("every drop shown within the margin" if n_within == m else
               f"{n_beyond} drop(s) significantly beyond the margin" if n_beyond else
               f"{m - n_within} of {m} not shown within the margin (too few examples to tell)")
    return Measurement(t["delta"] + margin, n=int(min(x[4] for x in tests)), n_unit="dev examples",
                       unit=f"points above the -{margin:g} margin (least clear head)", head=head_name(l, h),
                       standard_error=t["se"] * z / Z_INTERVAL,
                       values={"margin": margin, "tests": m, "z": z, "within": n_within, "beyond": n_beyond,
                               "worst_delta": t["delta"], "worst_se": t["se"]},
                       detail=f"Δ when disabled (mean over seeds) vs -{margin:g} points, one-sided at {alpha:g}/{m} "
                              f"(Bonferroni over {m} heads x tasks, z {z:.2f}; paired SE from the discordant counts, "
                              f"floored at one pair's, or for Pearson from the overlapping-correlation bound; mean "
                              f"over seeds): {summary}; least clear {task} "
                              f"{head_name(l, h)}: "
                              + "; ".join(parts + unjudged))
