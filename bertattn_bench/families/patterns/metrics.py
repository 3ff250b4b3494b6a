"""Kovaleva §4.1/§4.4/§4.5 (the patterns family): the claim metrics (named by
reference_numbers/kovaleva2019_patterns.toml)."""
from __future__ import annotations

import numpy as np

from ...claims.registry import Measurement, NotApplicable, metric, relative_depth
from ...claims.stats import difference_se, length_matched_difference, mean_se
from ...engine.attention import head_name
from ...training.glue_pass import result_of
from ..common.head_maps import top_heads_neighbour_ratio
from ..common.surface_stats import resampled_bounds, with_percentile_bounds
from .constants import CLS_CLASSES, LING, RISE, RISE_ALPHA, RISE_CONTROL, TYPES, UD_FEATURES
from .reduce import ModelStats, PatternsResult, PatternStats

# ---- claim metrics (named by reference_numbers/kovaleva2019_patterns.toml) -------------------------------------

def _stats(pr, model: str) -> tuple[PatternsResult, ModelStats]:
    r = result_of(pr)
    if model == "finetuned":
        if r.finetuned is None:
            raise NotApplicable(f"the claim is about a fine-tuned model: {r.ft_note}")
        return r, r.finetuned
    return r, r.pretrained


def _shares_text(st: PatternStats) -> str:
    return ", ".join(f"{t} {s:.1%}" for t, s in zip(TYPES, st.shares()))


def _with_bounds(m: Measurement, st, value_of) -> Measurement:
    """``m`` with the percentile bounds of ``value_of(stats)`` over resamples of the dev examples, where the pass kept
    each example's type counts (issue 61: a share of maps over a sample of examples)."""
    counts = getattr(st, "example_counts", None)
    return resampled_bounds(m, st, value_of, 0 if counts is None else len(counts), "examples")


@metric("pattern_min_share")
def pattern_min_share(pr, model: str = "pretrained") -> Measurement:
    """The smallest share of the five types (block only on sentence pairs) over the task's maps."""
    r, ms = _stats(pr, model)
    shares = ms.glue.shares()
    wanted = [i for i, t in enumerate(TYPES) if t != "block" or r.is_pair]
    low = min(wanted, key=lambda i: shares[i])
    m = Measurement(float(shares[low]), ms.glue.n_maps, "maps (dev examples x heads)", unit="share",
                    detail=f"{r.task}, {ms.label}: rarest {TYPES[low]}; {_shares_text(ms.glue)} "
                           f"({ms.glue.n_examples} examples x {r.n_layers * r.n_heads} heads)")
    return _with_bounds(m, ms.glue, lambda st: float(min(st.shares()[i] for i in wanted)))


@metric("pattern_share")
def pattern_share(pr, types: list, model: str = "pretrained") -> Measurement:
    """The share of the maps typed as any of ``types``."""
    r, ms = _stats(pr, model)
    m = _pattern_share(r, ms, types)
    return _with_bounds(m, ms.glue, lambda st: float(sum(st.shares()[TYPES.index(t)] for t in types)))


def _pattern_share(r, ms, types: list) -> Measurement:
    shares = ms.glue.shares()
    value = float(sum(shares[TYPES.index(t)] for t in types))
    heads = ms.glue.counts[..., [TYPES.index(t) for t in types]].sum(-1) / max(ms.glue.n_examples, 1)
    top = np.argsort(-heads.reshape(-1), kind="stable")[:3]
    return Measurement(value, ms.glue.n_maps, "maps (dev examples x heads)", unit="share",
                       detail=f"{r.task}, {ms.label}: {' + '.join(types)} {value:.1%}; {_shares_text(ms.glue)}; "
                              f"most often in heads " + ", ".join(
                                  f"{head_name(*divmod(int(i), r.n_heads))} ({heads.flat[i]:.0%})" for i in top))


def _feature_scores(ms: ModelStats) -> dict[str, np.ndarray]:
    """(L, H) §4.4 score per UD feature."""
    return {f: ms.ud.scores[..., i] for i, f in enumerate(UD_FEATURES)}


@metric("special_top_share")
def special_top_share(pr, min_score: float = 0.2, model: str = "pretrained") -> Measurement:
    """Among the heads with a vertical stripe (some feature's score >= ``min_score``: one token receives that
    share of the input's attention), the share whose strongest feature is [CLS] or [SEP] (UD EWT)."""
    r, ms = _stats(pr, model)
    m = _special_top_share(ms.ud, ms.label, min_score)
    return _over_sentences(m, ms.ud, lambda ud: _special_top_share(ud, ms.label, min_score))


def _over_sentences(m: Measurement, ud, again) -> Measurement:
    """``m`` with the 95% percentile bounds of ``again(ud.resample(idx)).value`` over a bootstrap of the UD sentences
    (issue 61: shares and ratios of heads move with the sample); as it is for a pass without per-sentence values."""
    per = ud.scores_per_sentence
    return resampled_bounds(m, ud, again, 0 if per is None else len(per), "UD sentences")


def _special_top_share(ud, label: str, min_score: float) -> Measurement:
    sc = ud.scores  # (L, H, F)
    top, best = sc.argmax(-1), sc.max(-1)
    striped = best >= min_score
    n = int(striped.sum())
    special = int((striped & (top < 2)).sum())
    ling = {f: float(sc[..., i].max()) for i, f in enumerate(UD_FEATURES)}
    others = [(head_name(l, h), UD_FEATURES[top[l, h]]) for l, h in zip(*np.nonzero(striped & (top >= 2)))]
    return Measurement(special / n if n else 0.0, ud.n_sentences, "UD sentences", unit="share of striped heads",
                       detail=f"{label}: {special} of {n} striped heads (score >= {min_score}) top on [CLS]/[SEP]"
                              f"{'; others: ' + ', '.join(f'{a} {b}' for a, b in others[:6]) if others else ''}; max "
                              f"score per feature: " + ", ".join(f"{k} {v:.3f}" for k, v in ling.items()))


def feature_rises(r: PatternsResult) -> tuple[list[tuple[str, int, int, float, float]], int]:
    """§4.4's first half: heads whose noun or object score rises with fine-tuning more than noise AND more than the
    control class's (:data:`RISE_CONTROL`, determiners) on the same sentences. Two one-sided paired t-tests over
    the UD sentences with the feature and a determiner (pre-trained vs fine-tuned): the rise itself > 0, and the
    rise minus the same head's determiner rise > 0 (a head that shifts weight onto every word, or a fine-tune that
    moves every score, raises nouns without singling them out); each Bonferroni over heads x features at
    :data:`RISE_ALPHA`. Returns [(feature, layer, head, mean rise over the control's, the larger adjusted p)] and
    the number of tests."""
    from scipy.stats import ttest_rel

    a, b = r.pretrained.ud.per_sentence, r.finetuned.ud.per_sentence
    if a is None or b is None or a.shape != b.shape:
        raise NotApplicable("the pass has no per-sentence feature scores for both models (re-run the pass)")
    ca, cb = r.pretrained.ud.per_sentence_control, r.finetuned.ud.per_sentence_control
    if ca is None or cb is None or ca.shape != cb.shape:
        raise NotApplicable(f"the pass has no per-sentence {RISE_CONTROL} scores for both models (re-run the pass)")
    m = a.shape[1] * a.shape[2] * a.shape[3]
    out = []
    for k, feat in enumerate(RISE):
        ok = ~np.isnan(a[:, 0, 0, k]) & ~np.isnan(ca[:, 0, 0])
        if ok.sum() < 3:
            continue
        rise = b[ok, :, :, k].astype(float) - a[ok, :, :, k]
        over = rise - (cb[ok].astype(float) - ca[ok])
        zero = np.zeros_like(rise)
        with np.errstate(invalid="ignore", divide="ignore"):
            p_rise = np.nan_to_num(ttest_rel(rise, zero, axis=0, alternative="greater").pvalue, nan=1.0) * m
            p_over = np.nan_to_num(ttest_rel(over, zero, axis=0, alternative="greater").pvalue, nan=1.0) * m
        p = np.maximum(p_rise, p_over)
        for l, h in zip(*np.nonzero(p < RISE_ALPHA)):
            out.append((feat, int(l), int(h), float(over[:, l, h].mean()), float(min(1.0, p[l, h]))))
    return sorted(out, key=lambda x: x[4]), m


def rise_counts(r: PatternsResult) -> tuple[int, int]:
    """(head-features whose rise alone passes the paired test, Bonferroni; those that also beat the control's
    rise): how much the control removes, for the detail."""
    from scipy.stats import ttest_rel

    a, b = r.pretrained.ud.per_sentence, r.finetuned.ud.per_sentence
    m = a.shape[1] * a.shape[2] * a.shape[3]
    alone = 0
    for k in range(len(RISE)):
        ok = ~np.isnan(a[:, 0, 0, k])
        if ok.sum() < 3:
            continue
        with np.errstate(invalid="ignore", divide="ignore"):
            p = np.nan_to_num(ttest_rel(b[ok, :, :, k], a[ok, :, :, k], axis=0, alternative="greater").pvalue,
                              nan=1.0) * m
        alone += int((p < RISE_ALPHA).sum())
    return alone, len(feature_rises(r)[0])


@metric("ling_vs_special")
def ling_vs_special(pr, model: str = "finetuned") -> Measurement:
    """Both halves of §4.4's sentence. (1) "fine-tuning raises attention to nouns and direct objects in some
    heads": :func:`feature_rises` must find at least one head (paired tests, Bonferroni: a rise, and a rise above
    the same head's determiner rise); without one the value is
    ``inf`` (the claim does not hold, the detail says why). (2) "these weights stay negligible": the value is max
    over heads of the strongest linguistic feature's score / max over heads of the [CLS]/[SEP] score (UD). A word
    feature's score is the max over the word's pieces (the notebook's token ids), never a sum over them."""
    r, ms = _stats(pr, model)
    sc = _feature_scores(ms)
    ling = {f: float(sc[f].max()) for f in LING if f != "punct"}
    spec = max(float(sc["[CLS]"].max()), float(sc["[SEP]"].max()))
    ratio = max(ling.values()) / spec if spec > 0 else float("inf")
    value, rises = ratio, ""
    if model == "finetuned":
        risen, m = feature_rises(r)
        alone, _ = rise_counts(r)
        listed = ", ".join(f"{f} {head_name(l, h)} {d:+.4f} over {RISE_CONTROL} (adj. p {p:.1e})"
                           for f, l, h, d, p in risen[:5])
        rises = (f"; risen with fine-tuning (paired t over UD sentences, Bonferroni x{m}): {alone} head-features "
                 f"rise, {len(risen)} of them more than the same head's {RISE_CONTROL} score"
                 f"{': ' + listed if listed else ''}")
        if not risen:
            value = float("inf")
            rises += f" -> no rise: the claim's first half fails (negligible ratio {ratio:.3f})"
    strongest = max(ling, key=ling.get)
    return Measurement(value, ms.ud.n_sentences, "UD sentences", unit="ratio",
                       detail=f"{ms.label}: strongest linguistic feature {strongest} {ling[strongest]:.3f} vs "
                              f"[CLS]/[SEP] {spec:.3f}{rises}")


def _weighted_depth(per_layer: np.ndarray) -> float:
    depths = np.array([relative_depth(i, len(per_layer)) for i in range(len(per_layer))])
    return float((per_layer * depths).sum() / per_layer.sum()) if per_layer.sum() > 0 else float("nan")


@metric("cls_minus_sep_depth")
def cls_minus_sep_depth(pr, model: str = "pretrained") -> Measurement:
    """Attention-weighted mean relative depth of the [CLS] score minus that of the [SEP] score (GLUE task)."""
    r, ms = _stats(pr, model)
    cls, sep = ms.glue.special[..., 0].mean(1), ms.glue.special[..., 1].mean(1)
    dc, ds = _weighted_depth(cls), _weighted_depth(sep)
    fmt = lambda a: " ".join(f"L{i + 1} {x:.3f}" for i, x in enumerate(a))  # noqa: E731
    m = Measurement(dc - ds, ms.glue.n_examples, "dev examples", unit="rel. depth",
                    detail=f"{r.task}, {ms.label}: [CLS] at depth {dc:.2f} ({fmt(cls)}); [SEP] at {ds:.2f} "
                           f"({fmt(sep)})")
    per = ms.glue.special_examples  # (N, L, 3), nan where an example has no such token
    if per is None or len(per) < 2:
        return m

    def again(idx):  # the per-layer scores over the resampled examples, each a mean over those with the token
        x = per[idx]
        ok = ~np.isnan(x[:, 0, :2]).any(0)
        if not ok.all():
            raise NotApplicable("a resample without [CLS] or [SEP]")
        return _weighted_depth(np.nanmean(x[..., 0], 0)) - _weighted_depth(np.nanmean(x[..., 1], 0))

    return with_percentile_bounds(m, again, len(per), "dev examples")


@metric("sep_score_task_margin")
def sep_score_task_margin(pr, passes: list, model: str = "pretrained") -> Measurement:
    """Kovaleva §4.4 on length-matched inputs: this task's [SEP] score minus each other task's, compared only
    between inputs of the same length (:func:`stats.length_matched_difference`: exact length in pieces, CMH
    weights, SE from the within-length variances); the value is the smallest of those differences (this task must
    beat every other one) with its SE. The score is the paper's and the notebook's (cell 45: attention the [SEP]
    receives from every token / input length, max over a pair's two [SEP]s, mean over heads and layers). Why
    matched: that score is 1/n under uniform attention (a short task wins) and ~the sink mass under a [SEP] sink
    (length-free), while the score x n is 1 under uniform attention but n x the sink mass under a sink (a long
    task wins); at equal length the two orderings agree and length drops out of both. Unmatched means (paper's
    score and x length) are in the detail."""

    r, ms = _stats(pr, model)

    def per_example(st: PatternStats) -> tuple[np.ndarray, np.ndarray]:
        if st.sep_free_examples is None or st.example_lengths is None or not len(st.example_lengths):
            raise NotApplicable("the pass has no per-example [SEP] scores and lengths (re-run the pass)")
        n = np.asarray(st.example_lengths, float)
        return np.asarray(st.sep_free_examples, float) / n, n  # the paper's /length score, per example

    mine, n_mine = per_example(ms.glue)
    diffs = {}
    for o in passes:
        ro, mo = _stats(o, model)
        x, n = per_example(mo.glue)
        diffs[ro.task] = (length_matched_difference(mine, n_mine, x, n), float(x.mean()), float((x * n).mean()),
                          float(np.median(n)))
    if not diffs:
        raise NotApplicable("needs the other tasks' passes")
    judged = {k: v for k, v in diffs.items() if v[0][4] > 0}
    if not judged:
        raise NotApplicable(f"{r.task}: no input length shared with another task")
    worst = min(judged, key=lambda k: judged[k][0][0])
    (value, se, n1, _, _), *_ = judged[worst]
    text = "; ".join(f"vs {k} {d:+.4f} (SE {e:.4f}; {a} {r.task} / {b} {k} inputs at {c} shared lengths)"
                     for k, ((d, e, a, b, c), *_) in diffs.items())
    unmatched = ", ".join(f"{k} {v[1]:.4f} / {v[2]:.3f} (median {v[3]:.0f} pieces)" for k, v in diffs.items())
    return Measurement(value, n1, f"{r.task} examples at a shared length", unit="score difference",
                       standard_error=se,
                       detail=f"{ms.label}: length-matched [SEP] score (received / length, max over [SEP]s, mean over "
                              f"heads and layers) {r.task} minus: {text}. Unmatched means, paper's score / x length: "
                              f"{r.task} {mine.mean():.4f} / {(mine * n_mine).mean():.3f} (median "
                              f"{np.median(n_mine):.0f} pieces), {unmatched}")


@metric("tok2tok_top_heads_diagonal")
def tok2tok_top_heads_diagonal(pr, k: int = 3, model: str = "pretrained") -> Measurement:
    """The mean ±1-neighbour mass of the ``k`` heads with the most verb → subject attention, divided by the median
    head's (UD EWT): how much more diagonal the candidate "subject heads" are than a typical head."""
    r, ms = _stats(pr, model)
    if ms.ud.n_arcs == 0:
        raise NotApplicable("no verb -> nominal subject arcs in the UD sentences")
    return _over_sentences(_tok2tok(ms.ud, ms.label, k), ms.ud, lambda ud: _tok2tok(ud, ms.label, k))


def _tok2tok(ud, label: str, k: int) -> Measurement:
    value, text = top_heads_neighbour_ratio(ud.nsubj, ud.diag, k, "att")
    return Measurement(value, ud.n_arcs, "verb -> subject arcs", unit="x median head",
                       detail=f"{label}: top verb->subject heads {text}; {ud.n_sentences} sentences")


@metric("pattern_share_task_margin")
def pattern_share_task_margin(pr, passes: list, types: list, model: str = "finetuned") -> Measurement:
    """This task's share of ``types`` minus the lowest share among the other tasks (tasks without the model, e.g.
    a fine-tuned QNLI, are named in the detail and left out)."""
    r, ms = _stats(pr, model)
    idx = [TYPES.index(t) for t in types]
    mine = float(ms.glue.shares()[idx].sum())
    others, left, n_maps = {}, [], {}
    for o in passes:
        try:
            ro, mo = _stats(o, model)
        except NotApplicable as exc:
            left.append(f"{o.corpus} ({exc})")
            continue
        others[ro.task] = float(mo.glue.shares()[idx].sum())
        n_maps[ro.task] = mo.glue.n_maps
    if not others:
        raise NotApplicable("no other task's pass has the model: " + "; ".join(left))
    low = min(others, key=others.get)
    # SE: the two shares as binomial over their maps (maps of one example are correlated: this errs narrow)
    se = difference_se((100 * mine, ms.glue.n_maps), (100 * others[low], n_maps[low])) / 100
    return Measurement(mine - others[low], ms.glue.n_maps, "maps (dev examples x heads)", unit="share",
                       standard_error=se, detail=f"{' + '.join(types)}: {r.task} {mine:.1%}; " + ", ".join(
                           f"{k} {v:.1%}" for k, v in others.items()) + (f"; left out: {'; '.join(left)}" if left else ""))


WORD_MATCH_MIN = 2.0  # x uniform: the least a head must put on matching words to "attend to" them


@metric("shared_heads_word_match")
def shared_heads_word_match(pr, passes: list, top: int = 5, model: str = "pretrained") -> Measurement:
    """Kovaleva §5: the heads that both STS-B and RTE rely on (the ``top`` most harmful to disable in each
    ``disable`` sweep of ``passes``, as kov.sts_rte_shared_heads) put high weight on tokens that occur in both
    sentences. Per head, the word-match score (this pass's sentence pairs): attention from a token to the identical
    tokens of the other sentence over what uniform attention gives them. Value: min over the shared heads of
    score / max(75th percentile over all heads, :data:`WORD_MATCH_MIN`): >= 1 when every shared head is in the top
    quartile AND puts at least twice the uniform weight on matching tokens (near-uniform heads, e.g. random weights,
    score ~1). No shared head: 0."""

    r, ms = _stats(pr, model)
    wm = ms.glue.word_match
    if wm is None:
        raise NotApplicable(f"{r.task}: no token occurs in both sentences of any pair (or single sentences)")
    sweeps = [result_of(p) for p in passes]
    if len(sweeps) < 2:
        raise NotApplicable("needs the STS-B and RTE disable sweeps")

    def harmful(res) -> set[tuple[int, int]]:
        d = res.head_delta.mean(0).reshape(-1)
        return {divmod(int(i), res.n_heads) for i in np.argsort(d, kind="stable")[:top]}

    shared = sorted(set.intersection(*(harmful(x) for x in sweeps)))
    q75 = float(np.quantile(wm, 0.75))
    bar = max(q75, WORD_MATCH_MIN)
    rank = lambda l, h: float((wm < wm[l, h]).mean())  # noqa: E731
    parts = [f"{head_name(l, h)} {wm[l, h]:.2f}x (above {rank(l, h):.0%} of heads)" for l, h in shared]
    best = np.argsort(-wm, axis=None)[:3]
    value = min((float(wm[l, h]) / bar for l, h in shared), default=0.0)
    return Measurement(value, ms.glue.n_match_queries, "tokens with a match in the other sentence",
                       unit="x bar", head=head_name(*shared[0]) if shared else None,
                       detail=f"{r.task}, {ms.label}: heads among the {top} most harmful on "
                              f"{' and '.join(x.task for x in sweeps)}: {'; '.join(parts) or 'none'}; bar = max(75th "
                              f"percentile {q75:.2f}x, {WORD_MATCH_MIN:g}x uniform); strongest word-match heads: "
                              + ", ".join(f"{head_name(*divmod(int(i), r.n_heads))} {wm.flat[i]:.2f}x" for i in best))


@metric("cls_final_target_margin")
def cls_final_target_margin(pr, expected: dict, model: str = "finetuned") -> Measurement:
    """Kovaleva §4.5/Fig. 7 as the notebook's ``cls_last_layer`` (visualize_attention.ipynb cell 53): final layer,
    [CLS] query row; per head and example a class's score is the row's **largest** weight on a token of the class
    ([CLS] its own position, [SEP] the larger of the two [SEP]s, punctuation and "other" the max over their
    tokens), averaged over the examples with the class, then over heads. Value: the expected class's score
    ("[SEP]" or "punct", tokens as such, never the model's sink) minus the largest other class's; SE over examples
    of the paired per-example difference (mean over heads). Per-token means and class totals in the detail."""
    r, ms = _stats(pr, model)
    if r.task not in expected:
        raise NotApplicable(f"the paper names no final-layer [CLS] target for {r.task}")
    if ms.glue.cls_row_max is None:
        raise NotApplicable("the pass has no per-class max of the [CLS] row (re-run the pass)")
    row = ms.glue.cls_row_max[-1].mean(0)  # (4,)
    want = expected[r.task]
    if want not in CLS_CLASSES:
        raise ValueError(f"cls_final_target_margin: expected class {want!r} is not one of {CLS_CLASSES}")
    i = CLS_CLASSES.index(want)
    present = [j for j in range(len(CLS_CLASSES)) if ms.glue.n_cls_class[j] > 0]
    if i not in present:
        raise NotApplicable(f"no {want} token in the {r.task} inputs")
    rival = max((j for j in present if j != i), key=lambda j: float(row[j]))
    value = float(row[i]) - float(row[rival])
    se = float("nan")
    ex = ms.glue.cls_max_examples
    if ex is not None:
        d = ex[:, -1, i] - ex[:, -1, rival]
        se = mean_se(d[np.isfinite(d)])
    fmt = lambda a: ", ".join(f"{c} {x:.3f}" for c, x in zip(CLS_CLASSES, a))  # noqa: E731
    extra = ""
    if ms.glue.cls_row_token is not None:
        extra = f"; per-token means {fmt(ms.glue.cls_row_token[-1].mean(0))}; class totals {fmt(ms.glue.cls_row[-1].mean(0))}"
    return Measurement(value, ms.glue.n_examples, "dev examples", unit="max weight", standard_error=se,
                       detail=f"{r.task}, {ms.label}: final layer [CLS] row, max over each class's tokens (cell 53) "
                              f"{fmt(row)}; expected {want}, strongest rival {CLS_CLASSES[rival]}{extra} (the "
                              f"pre-trained model's sink: {r.sink})")
