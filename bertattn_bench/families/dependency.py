"""Clark et al. §4.1–4.2: single attention heads as dependency parsers, against fixed-offset baselines.

UD (EWT, GUM) trees are mapped to the Stanford Dependencies relations of Clark's Table 1 (the table, the arcs, the
offset baselines and the reducer are shared with other families: :mod:`.common.dependency_stats`).

A head's prediction for a word is the other word it attends to most in the word-level map (sum over pieces
attended to, mean over pieces attending; [CLS]/[SEP] are not candidates, Clark fn. 2). Both directions are
scored: dependent→head and head→dependent.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ..claims.registry import Measurement, NotApplicable, family, metric
from ..claims.stats import binomial_se_points, difference_se, proportion_difference_bounds, wilson_bounds, wilson_counts
from ..engine.attention import head_name
from ..engine.batching import drop_too_long, encode_words
from ..engine.model import LoadedModel
from ..engine.passes import PreparedPass
from .common.dependency_stats import DIRECTIONS as DIRECTIONS  # the aliased names: re-exported from their old home
from .common.dependency_stats import (
    NOMINAL_UPOS,
    TABLE1,
    DependencyReducer,
    DependencyResult,
    HeadScore,
    OffsetBaseline,
    offset_baselines,
    sd_arcs,
)
from .common.dependency_stats import RELATIONS as RELATIONS
from .common.dependency_stats import UD_TO_SD as UD_TO_SD
from .common.dependency_stats import Arc as Arc

# ---- claim metrics (named by reference_numbers/clark2019_dependency.toml) -------------------------------------

def _best_vs_baseline(res: DependencyResult, relation: str) -> tuple[HeadScore, OffsetBaseline]:

    if relation not in res.baselines:  # e.g. a --limit run: no arc of this relation was read
        raise NotApplicable(f"no {relation!r} arc in the data read")
    return res.best_head(relation), res.baselines[relation]


@metric("best_head_gap")
def best_head_gap(pr, relation: str) -> Measurement:
    """Best single head (either direction) minus the best fixed-offset baseline, in points (Clark Table 1)."""
    best, base = _best_vs_baseline(pr.result, relation)
    other = pr.result.best_head(relation, 1 - best.direction)
    # the interval: binomial standard errors of the two accuracies over the relation's arcs, taken as independent
    # (the head and the offset are scored on the same arcs, positively correlated: this errs wide)
    return Measurement(
        best.accuracy - base.accuracy, n=best.n, n_unit="arcs", head=best.name, unit="points",
        standard_error=difference_se((best.accuracy, best.n), (base.accuracy, base.n)),
        detail=(f"best {best.describe()} vs offset ({base.offset:+d}) {base.accuracy:.1f}%; "
                f"other direction: {other.describe()}"),
    )


def _require_arcs(res: DependencyResult, relations) -> None:
    """A claim over several relations is judged only when the data read holds arcs of each (else it skips)."""

    missing = [r for r in relations if r not in res.baselines]
    if missing:
        raise NotApplicable(f"no arc of {', '.join(repr(r) for r in missing)} in the data read")


def _right(res: DependencyResult, relation: str, score: HeadScore) -> int:
    """How many of ``relation``'s arcs ``score``'s head got right: its count, beside the percentage it carries."""
    return int(res.correct[score.layer, score.direction, res.relations.index(relation), score.head])


@metric("direction_agreement")
def direction_agreement(pr, head_to_dependent: tuple = ("pobj",), relations: tuple = TABLE1[1:]) -> Measurement:
    """Relations whose best direction is the expected one: dependent→head except pobj (Clark §4.2).

    The value counts a relation when its best head in the expected direction is at least as accurate as the best in
    the other (strictly more for head→dependent). Its bounds count the relations where the expected direction is
    *shown* better (lower) and those where it is not shown worse (upper): per relation, the two best heads'
    accuracies over its arcs, Agresti & Caffo's 95% interval of their difference. A tie, or a difference a few arcs
    could reverse, is then neither: on a --limit sample or an untrained model the count is not a verdict."""
    res = pr.result
    _require_arcs(res, relations)
    agree = shown = against = 0
    lines = []
    for r in relations:
        d2h, h2d = res.best_head(r, 0), res.best_head(r, 1)
        expected_h2d = r in head_to_dependent
        ok = (h2d.accuracy > d2h.accuracy) if expected_h2d else (d2h.accuracy >= h2d.accuracy)
        want, other = (h2d, d2h) if expected_h2d else (d2h, h2d)
        lo, hi = proportion_difference_bounds(_right(res, r, want), want.n, _right(res, r, other), other.n)
        agree += ok
        shown += lo > 0
        against += hi < 0
        lines.append(f"{r}:{'h→d' if h2d.accuracy > d2h.accuracy else 'd→h'}{'' if ok else '(!)'}"
                     f"{'' if lo > 0 or hi < 0 else '(?)'}")
    n = int(sum(res.n_arcs[res.relations.index(r)] for r in relations))
    return Measurement(float(agree), n=n, n_unit="arcs", unit=f"of {len(relations)} relations",
                       bounds=(float(shown), float(len(relations) - against)),
                       detail=" ".join(lines) + f"; expected direction shown better for {shown}, shown worse for "
                              f"{against} (? = neither, by the 95% Agresti-Caffo interval of the two best heads' accuracy "
                              f"difference)")


@metric("count_relations_over")
def count_relations_over(pr, relations: tuple, threshold: float) -> Measurement:
    """How many of ``relations`` have a head above ``threshold`` % (Clark abstract: four relations > 75%).

    Bounds: the relations whose best head is shown above ``threshold`` (the lower end of Wilson's 95% interval of
    its accuracy over the relation's arcs above it) and those not shown at or below it (the upper end above it)."""
    res = pr.result
    _require_arcs(res, relations)
    scores = {r: res.best_head(r) for r in relations}
    count = sum(s.accuracy > threshold for s in scores.values())
    wilson = {r: wilson_bounds(_right(res, r, s), s.n) for r, s in scores.items()}
    above = sum(lo > threshold for lo, _ in wilson.values())
    not_below = sum(hi > threshold for _, hi in wilson.values())
    n = sum(s.n for s in scores.values())
    return Measurement(float(count), n=n, n_unit="arcs", unit=f"of {len(relations)}",
                       bounds=(float(above), float(not_below)),
                       detail=" ".join(f"{r}={s.name}:{s.accuracy:.1f} [{wilson[r][0]:.1f}..{wilson[r][1]:.1f}]"
                                       for r, s in scores.items())
                              + f"; shown above {threshold:g}% for {above}, not shown at or below for {not_below} "
                                f"(95% Wilson intervals)")


@metric("max_relations_per_head")
def max_relations_per_head(pr, margin: float, relations: tuple = TABLE1[1:]) -> Measurement:
    """The most relations any one head beats the offset baseline on by ``margin`` points (Clark §1, §4.2).

    Bounds: the most relations one head is *shown* to beat it on by the margin, and the most it is not shown to fall
    short on (per head, relation and its better direction, Agresti & Caffo's 95% interval of head minus offset
    accuracy over the relation's arcs, against the margin): "no head does well on many relations" is an absence,
    and holds only where no head can reach the threshold."""
    res = pr.result
    _require_arcs(res, relations)
    acc = res.accuracy().amax(dim=1)  # best direction, (L, R, H)
    idx = [res.relations.index(r) for r in relations]
    base = torch.tensor([res.baselines[r].accuracy for r in relations]).view(1, -1, 1)
    wins = (acc[:, idx, :] >= base + margin).sum(1)  # (L, H)
    flat = int(torch.argmax(wins))
    layer, head = divmod(flat, wins.shape[1])
    rels = [r for j, r in enumerate(relations) if acc[layer, idx[j], head] >= res.baselines[r].accuracy + margin]
    right = res.correct.amax(dim=1)[:, idx, :].double().numpy()  # (L, R, H): the better direction's count
    n = res.n_arcs[idx].double().numpy().reshape(1, -1, 1)
    base_right = np.array([round(res.baselines[r].accuracy * res.baselines[r].n / 100.0) for r in relations],
                          float).reshape(1, -1, 1)
    base_n = np.array([res.baselines[r].n for r in relations], float).reshape(1, -1, 1)
    lo, hi = proportion_difference_bounds(right, n, base_right, base_n)
    shown, possible = int((lo >= margin).sum(1).max()), int((hi >= margin).sum(1).max())
    return Measurement(float(wins.max()), n=int(res.n_arcs[idx].sum()), n_unit="arcs", head=head_name(layer, head),
                       unit=f"of {len(relations)} relations", bounds=(float(shown), float(possible)),
                       detail=f"{head_name(layer, head)}: {', '.join(rels)}; one head shown {margin:g} points above "
                              f"the offset baseline on at most {shown}, not shown below on at most {possible} "
                              f"relations (95% Agresti-Caffo intervals)")


@metric("wordpiece_split_rate")
def wordpiece_split_rate(pr) -> Measurement:
    """Percent of words split into more than one word piece (Clark §4.1: ~8%)."""
    res = pr.result
    return Measurement(100.0 * res.n_split_words / max(res.n_words, 1), n=res.n_words, n_unit="words", unit="%",
                       detail=f"{res.n_split_words} of {res.n_words} words")


@metric("right_branching_accuracy")
def right_branching_accuracy(pr, relation: str = "All") -> Measurement:
    """The right-branching baseline: every word's head is the next word (Clark §4.2: 26.3 UAS; §5 Table 3: 26)."""
    base = pr.result.baselines[relation]
    return Measurement(base.right_branching, n=base.n, n_unit="arcs", unit="%",
                       standard_error=binomial_se_points(base.right_branching, base.n),
                       detail=f"best fixed offset {base.offset:+d}: {base.accuracy:.1f}%")


@metric("ignore_special_tokens")
def ignore_special_tokens(pr, max_change: float) -> Measurement:
    """Share of heads whose All accuracy changes by <= ``max_change`` points when [CLS]/[SEP] may be predicted
    (Clark §4.1 fn. 2: ignoring them "does not significantly change the accuracies for most heads")."""
    res = pr.result
    r = res.relations.index("All")
    n = int(res.n_arcs[r])
    without = 100.0 * res.correct[:, 0, r, :] / max(n, 1)
    with_special = 100.0 * res.all_correct_with_special / max(n, 1)
    change = (with_special - without).abs()
    small = int((change <= max_change).sum())
    worst = int(torch.argmax(change))
    layer, head = divmod(worst, change.shape[1])
    detail = (f"{small} of {change.numel()} heads within {max_change} points; largest change {head_name(layer, head)}: "
              f"{without[layer, head]:.1f}% → {with_special[layer, head]:.1f}%")
    # bounds (issue 61): allowing [CLS]/[SEP] only adds candidates, so an arc's prediction can only turn from a word
    # to a special token (never gold): the changed arcs k = correct without - correct with, and the change is k/n.
    # A head is surely within max_change where Wilson's 95% upper bound on k of n is, surely not where the lower
    # bound exceeds it; the share's bounds count the undecided heads out, then in.
    lost = (res.correct[:, 0, r, :] - res.all_correct_with_special).flatten().tolist()
    bounds = None
    if n and min(lost) >= 0:
        sure, possibly = wilson_counts(lost, n, max_change, at_least=False)
        maybe = possibly - sure
        bounds = (sure / len(lost), (sure + maybe) / len(lost))
        detail += (f"; {sure} surely within, {maybe} undecided by Wilson's 95% bounds on the changed arcs: share "
                   f"bounds [{bounds[0]:.3f}, {bounds[1]:.3f}]")
    return Measurement(small / change.numel(), n=n, n_unit="arcs", detail=detail, bounds=bounds)


@metric("noop_sink_by_nominality")
def noop_sink_by_nominality(pr, relation: str = "dobj") -> Measurement:
    """In the best head for ``relation`` (Clark: 8-10 for dobj), non-nominal words' attention to [CLS]+[SEP]
    minus nominal words' (Clark §3.2, Fig. 5: words outside the head's function attend to the no-op)."""
    res = pr.result
    best = res.best_head(relation)
    other, nominal = res.sink_share[best.layer, best.head].tolist()
    se = None
    if res.sink_sq_mean is not None:  # the two means' SEs combined, words taken as independent (they share
        sq = res.sink_sq_mean[best.layer, best.head].tolist()  # sentences, so this errs narrow)
        se = sum(max(q - m * m, 0.0) / max(n, 1) for q, m, n in zip(sq, (other, nominal), res.n_nominal)) ** 0.5
    return Measurement(other - nominal, n=sum(res.n_nominal), n_unit="words", head=best.name, unit="share",
                       standard_error=se, detail=(
        f"best {relation} head {best.describe()}: non-nominal → [CLS]+[SEP] {other:.3f} "
        f"(n={res.n_nominal[0]}), nominal → {nominal:.3f} (n={res.n_nominal[1]})"))


@metric("word_map_row_sum_error")
def word_map_row_sum_error(pr) -> Measurement:
    """Largest |row sum - 1| of the word-level maps with [CLS]/[SEP] kept (Clark §4.1: sums stay 1)."""
    return Measurement(pr.result.max_row_sum_error, n=pr.result.n_words, n_unit="words",
                       detail="sum over word columns + [CLS] + [SEP], per word, every head and layer")


# ---- the pass ---------------------------------------------------------------------------------------------------

@family("dependency", corpora=("ewt_dev", "ewt_test", "gum_dev", "gum_test"), default_corpus="ewt_dev")
def prepare_dependency(loaded: LoadedModel, data_dir: Path, corpus: str = "ewt_dev", limit: int | None = None,
                       batch_size: int = 32, max_tokens: int | None = None) -> PreparedPass:
    """Clark §4.2: one sentence per example; sentences longer than the model's positions are skipped, counted."""
    from ..data.ud import CORPORA, load_corpus

    sentences = load_corpus(data_dir, corpus, limit)
    encoded_all = [encode_words(loaded.tokenizer, i, s.words) for i, s in enumerate(sentences)]
    encoded, skipped = drop_too_long(encoded_all, min(max_tokens or loaded.info.max_positions, loaded.info.max_positions))
    arcs = [sd_arcs(s) for s in sentences]
    kept_arcs = [arcs[e.index] for e in encoded]
    nominal = [np.array([u in NOMINAL_UPOS for u in s.upos], dtype=bool) for s in sentences]
    info = loaded.info

    def finish(result):
        result.baselines = offset_baselines(kept_arcs)
        return result

    return PreparedPass("dependency", corpus, f"{CORPORA[corpus]} (UD trees mapped to SD, Clark Table 1 relations)",
                        loaded, encoded, skipped,
                        lambda: DependencyReducer(arcs, info.n_layers, info.n_heads, info.device, nominal_per_example=nominal),
                        finish=finish, with_words=True, batch_size=batch_size, data_paths=[data_dir / CORPORA[corpus]])
