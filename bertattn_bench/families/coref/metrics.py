"""The coref family's claim metrics (named by reference_numbers/clark2019_coref.toml)."""
from __future__ import annotations

import numpy as np

from ...claims.registry import Measurement, NotApplicable, metric
from ...claims.stats import binomial_se_points, difference_se
from ...data.coref_documents import KINDS
from ...engine.attention import head_name, parse_head_name
from ..common.head_maps import top_heads_neighbour_ratio
from ..common.surface_stats import resampled_bounds
from .constants import BASELINE_NAMES, BASELINES, TYPES
from .run import CorefResult


def _res(pr) -> CorefResult:
    res = pr.result
    if res.count() == 0:
        raise NotApplicable("no anaphor with an antecedent in its window")
    return res


def _baselines_text(res: CorefResult, kinds=TYPES) -> str:
    return "; ".join(f"{BASELINE_NAMES[b]} " + "/".join(f"{res.baseline(b, k):.1f}" for k in kinds)
                     for b in BASELINES) + " (" + "/".join(kinds) + ", n " + "/".join(
        str(res.count(k)) for k in kinds) + ")"


def _data_text(res: CorefResult) -> str:
    s = res.stats
    text = f"{res.n_documents} docs, {res.n_windows} windows, {res.n_mentions} mentions"
    if s is not None:
        text += (f" ({res.n_mentions - res.count()} first in their window); in the corpus {s.n_singletons} singleton "
                 f"and {s.n_dropped_links} appositive/predicate mentions dropped, {s.n_cut_mentions} cut by a window "
                 f"boundary, {s.n_skipped_sentences} sentences longer than a window")
    return text


def _best_text(res: CorefResult) -> str:
    layer, head, acc = res.best_head()
    per = "/".join(f"{res.head_accuracy(layer, head, k):.1f}" for k in KINDS)
    return f"best head {head_name(layer, head)} {acc:.1f}% ({'/'.join(KINDS)} {per})"


@metric("coref_best_head_gap")
def coref_best_head_gap(pr, baselines: tuple = ("head_word",), margins: tuple = (0.0,), kind: str = "all") -> Measurement:
    """min over the baselines of (best head − baseline − margin), points: >= 0 means every bar is cleared
    (Clark §4.3: head 5-4 65 vs head-word 52 vs nearest 27)."""
    res = _res(pr)
    layer, head, acc = res.best_head(kind)
    gaps = [acc - res.baseline(b, kind) - m for b, m in zip(baselines, margins)]
    bars = ", ".join(f"{BASELINE_NAMES[b]} {res.baseline(b, kind):.1f}" + (f" + {m:g}" if m else "")
                     for b, m in zip(baselines, margins))
    n = res.count(kind)
    binding = baselines[int(np.argmin(gaps))]
    se = res.paired_se(layer, head, binding, kind)
    if se is None:  # no paired counts (a result built by hand): the two accuracies taken as independent
        se = difference_se((acc, n), (res.baseline(binding, kind), n))
    return Measurement(min(gaps), n=n, n_unit="anaphors", head=head_name(layer, head), unit="points",
                       standard_error=se,
                       detail=f"{kind}: {_best_text(res)} vs {bars}; {_baselines_text(res)}; {_data_text(res)}")


@metric("coref_type_order")
def coref_type_order(pr, order: tuple = ("proper", "pronoun", "nominal")) -> Measurement:
    """The best head (on all anaphors): min of the successive differences along ``order`` (Clark Table 2: proper
    73 >= pronoun 64 >= nominal 58). Gated: the head must beat the nearest-mention baseline, else there is no
    coreference head whose types could be ordered (NotApplicable)."""
    res = _res(pr)
    layer, head, acc = res.best_head()
    if acc <= res.baseline("nearest"):
        raise NotApplicable(f"no coreference head: best head {head_name(layer, head)} {acc:.1f}% <= nearest-mention "
                            f"baseline {res.baseline('nearest'):.1f}% (n={res.count()})")
    vals = [res.head_accuracy(layer, head, k) for k in order]
    diffs = [a - b for a, b in zip(vals, vals[1:])]
    i = int(np.argmin(diffs))
    se = difference_se((vals[i], res.count(order[i])), (vals[i + 1], res.count(order[i + 1])))
    return Measurement(min(diffs), n=res.count(), n_unit="anaphors", head=head_name(layer, head), unit="points",
                       standard_error=se,
                       detail=(" >= ".join(f"{k} {v:.1f} (n={res.count(k)})" for k, v in zip(order, vals))
                               + f"; {_best_text(res)}"))


@metric("coref_baseline_rank")
def coref_baseline_rank(pr, baseline: str, rank: int) -> Measurement:
    """Mention types (all + the three) on which ``baseline`` ranks ``rank`` among the three baselines
    (1 = lowest, 3 = highest; ties count for the claimed rank). Data only (Clark Table 2: nearest < head-word <
    rule-based on every type)."""
    res = _res(pr)
    ok = []
    for k in TYPES:
        mine = res.baseline(baseline, k)
        others = [res.baseline(b, k) for b in BASELINES if b != baseline]
        below = sum(o < mine for o in others)
        above = sum(o > mine for o in others)
        ok.append(below <= rank - 1 <= len(others) - above)
    return Measurement(float(sum(ok)), n=res.count(), n_unit="anaphors", unit=f"of {len(TYPES)} types",
                       detail=(f"{BASELINE_NAMES[baseline]} rank {rank} on " + ", ".join(k for k, o in zip(TYPES, ok) if o)
                               + f"; {_baselines_text(res)}"))


@metric("coref_nominal_gap")
def coref_nominal_gap(pr, kind: str = "nominal", versus: str = "rules", string_match: str = "head_word") -> Measurement:
    """Clark §4.3 "particularly good with nominal mentions": for the best head (on all anaphors), min of
    (a) its gap to the rule-based baseline on ``kind`` minus the largest such gap on the other types and
    (b) its ``kind`` accuracy minus the head-word baseline on ``kind`` (fuzzy matching beyond string match)."""
    res = _res(pr)
    layer, head, _ = res.best_head()
    gaps = {k: res.head_accuracy(layer, head, k) - res.baseline(versus, k) for k in KINDS}
    other = max((k for k in gaps if k != kind), key=lambda k: gaps[k])
    relative = gaps[kind] - gaps[other]
    over_string = res.head_accuracy(layer, head, kind) - res.baseline(string_match, kind)
    cells = lambda k, *bases: [(res.head_accuracy(layer, head, k), res.count(k))] + [  # noqa: E731
        (res.baseline(b, k), res.count(k)) for b in bases]
    se = (difference_se(*cells(kind, versus), *cells(other, versus)) if relative <= over_string
          else difference_se(*cells(kind, string_match)))
    return Measurement(min(relative, over_string), n=res.count(kind), n_unit=f"{kind} anaphors",
                       head=head_name(layer, head), unit="points", standard_error=se, detail=(
                           f"gap to {BASELINE_NAMES[versus]}: " + ", ".join(f"{k} {v:+.1f}" for k, v in gaps.items())
                           + f"; {kind} vs {BASELINE_NAMES[string_match]} {over_string:+.1f}; {_best_text(res)}"))


def _named_head(res: CorefResult, head: str, kind: str):
    """(accuracy per head on ``kind``, layer, head) for a paper-named head; not applicable if the model lacks it."""
    layer, h = parse_head_name(head)
    acc = res.accuracy(kind)
    if layer >= acc.shape[0] or h >= acc.shape[1]:
        raise NotApplicable(f"head {head} does not exist in a {acc.shape[0]}x{acc.shape[1]} model")
    return acc, layer, h


@metric("coref_named_head")
def coref_named_head(pr, head: str, kind: str = "all") -> Measurement:
    """Rank (1 = best) of a paper-named head, e.g. Clark's 5-4, among all heads on ``kind``."""
    res = _res(pr)
    acc, layer, h = _named_head(res, head, kind)
    rank = int((acc > acc[layer, h]).sum()) + 1
    return Measurement(float(rank), n=res.count(kind), n_unit="anaphors", head=head,
                       detail=f"{head}: {acc[layer, h]:.1f}%; {_best_text(res)}")


@metric("coref_named_head_accuracy")
def coref_named_head_accuracy(pr, head: str, kind: str = "all") -> Measurement:
    """Accuracy of a paper-named head (Clark Table 2: 5-4, 65 on all anaphors), percent."""
    res = _res(pr)
    acc, layer, h = _named_head(res, head, kind)
    return Measurement(float(acc[layer, h]), n=res.count(kind), n_unit="anaphors", head=head, unit="%",
                       standard_error=binomial_se_points(float(acc[layer, h]), res.count(kind)),
                       detail=f"{_best_text(res)}; {_baselines_text(res)}")


@metric("coref_pronoun_heads_diagonal")
def coref_pronoun_heads_diagonal(pr, k: int = 3, kind: str = "pronoun") -> Measurement:
    """Kovaleva §4.5's noun-pronoun half, on Clark's coreference pass: the mean ±1-neighbour mass of the ``k`` heads
    that resolve the most ``kind`` anaphors (argmax on an antecedent's head word), over the median head's."""
    res = _res(pr)
    if res.neighbour is None:
        raise NotApplicable("this coreference pass has no per-head ±1-neighbour mass (an older cached result)")
    n = res.count(kind)
    if n == 0:
        raise NotApplicable(f"no {kind} anaphors in the windows")
    m = _pronoun_diagonal(res, k, kind)
    return resampled_bounds(m, res, lambda again: _pronoun_diagonal(again, k, kind),
                            0 if res.correct_per_window is None else res.n_windows, "windows")


def _pronoun_diagonal(res, k: int, kind: str) -> Measurement:
    if res.count(kind) == 0:
        raise NotApplicable(f"no {kind} anaphors in the windows")
    value, text = top_heads_neighbour_ratio(res.accuracy(kind).numpy(), res.neighbour.numpy(), k, "acc%")
    return Measurement(value, res.count(kind), f"{kind} anaphors", unit="x median head",
                       detail=f"top {kind} -> antecedent heads {text}; {res.n_windows} windows")
