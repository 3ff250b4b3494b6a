"""The finetune family's claim metrics (named by reference_numbers/kovaleva2019_*.toml)."""
from __future__ import annotations

import numpy as np

from ...claims.registry import Measurement, NotApplicable, metric
from ...data import glue
from ...training.glue_pass import TaskScores, result_of
from .run import FinetuneResult


def _fmt(scores: dict[int, TaskScores]) -> str:
    return ", ".join(f"seed {s}: {v.primary:.1f}" for s, v in scores.items())


@metric("ft_margin_over_majority")
def ft_margin_over_majority(pr, tasks: list | None = None) -> Measurement:
    """Fine-tuned dev score (mean over seeds) minus the majority-class score (points), with a standard error
    (:func:`_difference_se`: the fine-tuned predictions paired with the majority class's over the dev examples)."""
    r = result_of(pr, tasks)
    cls, maj = r.majority
    t = glue.task(r.task)
    note = ""
    if np.isnan(maj) and t.is_regression:  # a constant has no correlation: chance = 0
        maj, note = 0.0, " (a constant predictor's correlation is undefined: chance 0)"
    ft = r.mean(r.finetuned)
    spread = r.spread(r.finetuned)
    other = {k: round(float(np.mean([s.metrics[k] for s in r.finetuned.values()])), 2)
             for k in next(iter(r.finetuned.values())).metrics}
    majority = None
    if not t.is_regression and r.labels is not None:
        majority = (np.asarray(r.labels).astype(int) == _class_index(t, cls)).astype(float)
    se, how = _difference_se(r, r.finetuned, None, majority, "the majority class")
    return Measurement(ft - maj, r.n_dev, "dev examples", unit="points over majority", standard_error=se,
                       detail=f"{r.task} fine-tuned {r.metric} {ft:.2f} ({_fmt(r.finetuned)}; sd {spread:.2f}; all "
                              f"metrics {other}) vs majority class {cls!r} {maj:.2f}{note}; seeds {list(r.seeds)}; "
                              f"{how}")


def _difference_se(r: FinetuneResult, scores: dict, other: dict | None, other_correct,
                   other_name: str) -> tuple[float | None, str]:
    """(standard error, how) of mean(``scores``) minus another score on the same dev examples (``other``: seed ->
    TaskScores, e.g. the un-tuned model's; None: a constant, the majority class, whose per-example correctness is
    ``other_correct``): a classifier's accuracy paired per example (stats.paired_se, each example's correctness
    averaged over seeds); a regressor's Pearson r from each side's mean r (stats.pearson_se), independent. The seeds'
    spread is not here: the judge adds it once (claims.checks.seed_interval: this run's seeds where it trained
    several, else the spread recorded beside the baseline). (None, why) where the predictions are not kept."""
    from ...claims.stats import paired_se, pearson_se

    t = glue.task(r.task)
    if t.is_regression:
        sides = [scores] + ([other] if other else [])
        se = float(np.sqrt(sum((100 * pearson_se(r.mean(x) / 100, r.n_dev)) ** 2 for x in sides)))
        what = f"Pearson's r over {r.n_dev} dev pairs, (1 - r²)/√(n - 3), each side"
    else:
        correct = _correct(r, scores)
        if other is not None:
            other_correct = _correct(r, other)
        if correct is None or other_correct is None or t.metric != "acc":
            return None, "no per-example predictions kept: no standard error"
        se = paired_se(correct, other_correct)
        what = f"paired with {other_name} over the {len(correct)} dev examples"
    return se, f"SE {se:.2f} (examples: {what})"


def _correct(r: FinetuneResult, scores: dict[int, TaskScores]) -> np.ndarray | None:
    """Per dev example: the share of ``scores``' seeds that predict it right (None without predictions)."""
    if r.labels is None or any(s.predictions is None for s in scores.values()):
        return None
    labels = np.asarray(r.labels).astype(int)
    return np.mean([np.asarray(s.predictions).astype(int) == labels for s in scores.values()], axis=0)


def _class_index(t: glue.Task, name: str) -> int:
    return list(t.labels).index(name)


@metric("untuned_constant_share")
def untuned_constant_share(pr, tasks: list | None = None, paper: dict | None = None) -> Measurement:
    """Kovaleva Table 1's "pre-trained" column, read from the model: the share (points) of dev examples on which the
    pre-trained encoder with an untrained head (the pass's ``untuned`` predictions) predicts its most frequent
    class, the mean over seeds (each seed's own head: the judge adds their spread, issue 61; the smallest over
    seeds, as before, moved with every seed added); standard error binomial over the dev examples.
    The detail gives, per seed, that class, the un-tuned score and the constant predictor's, and the paper's entry
    beside our constant predictor's score (``paper = {task = [class, value, n dev examples]}``: the dev TSV
    reproduces Table 1's constant entries). A classification task only."""
    from ...claims.stats import binomial_se_points, paired_se

    r = result_of(pr, tasks)
    t = glue.task(r.task)
    if t.is_regression:
        raise NotApplicable(f"{r.task} is a regression task: an untrained head has no class to be constant in")
    _untuned(r)
    if r.labels is None or any(s.predictions is None for s in r.untuned.values()):
        raise NotApplicable("the pass kept no per-example predictions of the un-tuned model")
    labels = np.asarray(r.labels).astype(int)
    shares, parts = {}, []
    for seed, sc in r.untuned.items():
        preds = np.asarray(sc.predictions).astype(int)
        counts = np.bincount(preds, minlength=len(t.labels))
        mode = int(np.argmax(counts))
        shares[seed] = 100.0 * counts[mode] / len(preds)
        const = r.constant[t.labels[mode]][r.metric]
        gap_se = paired_se(preds == labels, np.full(len(preds), mode) == labels)
        parts.append(f"seed {seed}: {shares[seed]:.1f}% {t.labels[mode]!r} ({counts.tolist()} per class), un-tuned "
                     f"{r.metric} {sc.primary:.2f} vs always {t.labels[mode]!r} {const:.2f} (paired SE {gap_se:.2f})")
    seed = min(shares, key=shares.get)
    value = float(np.mean(list(shares.values())))
    paper_note = ""
    if paper and r.task in paper:
        cls, entry, n_paper = paper[r.task]
        ours = r.constant[cls][r.metric]
        where = (f"over all {n_paper}" if r.n_dev == n_paper else
                 f"ours over {r.n_dev} dev examples, Table 1's over {n_paper}: not comparable")
        paper_note = f"; Table 1 {entry} = always {cls!r}: ours {ours:.2f} ({where})"
    return Measurement(value, r.n_dev, "dev examples", unit="% of dev examples in the modal class",
                       standard_error=binomial_se_points(value, r.n_dev), values={"seed": seed},
                       detail=f"{r.task} un-tuned (pre-trained encoder, untrained head): " + "; ".join(parts)
                              + paper_note)


def _untuned(r: FinetuneResult) -> dict[int, TaskScores]:
    """Table 1's "pre-trained" column (the encoder with an untrained head); NotApplicable for a classifier judged as
    given, whose pre-trained encoder is not known."""
    if not r.untuned:
        raise NotApplicable("the model is a classifier judged as given: its pre-trained encoder (Table 1's "
                            "pre-trained column) is not known here")
    return r.untuned


def _random_ft(r: FinetuneResult) -> dict[int, TaskScores]:
    if r.random_ft is None:
        raise NotApplicable(f"{r.random_note}: no random-init twin to compare")
    return r.random_ft


@metric("random_ft_over_majority")
def random_ft_over_majority(pr, tasks: list | None = None) -> Measurement:
    """The random-init twin fine-tuned: its dev score minus the majority class (points); standard error paired over
    the dev examples (the twin's correctness, mean over its seeds, against the majority class's: 0 when the twin
    predicts the majority class everywhere, as Table 1's MRPC and RTE entries do)."""
    from ...claims.stats import paired_se

    r = result_of(pr, tasks)
    rf = _random_ft(r)
    cls, maj = r.majority
    t = glue.task(r.task)
    se, note = None, ""
    correct = None if t.is_regression else _correct(r, rf)
    if correct is not None:
        se = paired_se(correct, np.asarray(r.labels).astype(int) == _class_index(t, cls))
        note = f"; paired SE {se:.2f} over {r.n_dev} dev examples"
    return Measurement(r.mean(rf) - maj, r.n_dev, "dev examples", unit="points over majority", standard_error=se,
                       detail=f"{r.task}: random-init fine-tuned {r.mean(rf):.2f} ({_fmt(rf)}) vs majority {cls!r} "
                              f"{maj:.2f}{note}; pre-trained fine-tuned {r.mean(r.finetuned):.2f} ({r.random_note})")


@metric("pretrained_minus_random_ft")
def pretrained_minus_random_ft(pr, tasks: list | None = None) -> Measurement:
    r = result_of(pr, tasks)
    rf = _random_ft(r)
    return Measurement(r.mean(r.finetuned) - r.mean(rf), r.n_dev, "dev examples", unit="points",
                       detail=f"{r.task}: pre-trained + fine-tuned {r.mean(r.finetuned):.2f} ({_fmt(r.finetuned)}) "
                              f"vs random init + fine-tuned {r.mean(rf):.2f} ({_fmt(rf)})")


UNTUNED_HEAD_BOOTSTRAP = 200  # resamples of the dev examples for a correlation difference


@metric("untuned_minus_random_ft")
def untuned_minus_random_ft(pr, tasks: list | None = None) -> Measurement:
    """Un-tuned (pre-trained encoder, untrained head) minus random-init + fine-tuned, points, with a standard error
    that says when the comparison cannot tell. Two parts: (1) the dev examples, paired: a bootstrap over the
    examples of the difference of the two Pearson scores (regression), or the paired SE of the correctness
    difference (two classes); (2) the untrained head: its output layer is drawn N(0, 0.02) with zero bias
    (finetune.TaskModel), so the head with the opposite sign is as likely, and it scores −r (regression) or
    100 − acc (two classes): over head draws the un-tuned score is symmetric about 0 (50), and one draw's distance
    from that centre, |r| (|acc − 50|), root-mean-square over seeds, is the head's own spread. With both near chance
    (the paper's STS-B 33.1 vs 2.9 as well) the threshold 0 lies inside the interval: inconclusive, not a verdict
    from the sign of a random head; a twin far below chance (or far above the un-tuned score) decides it."""
    from ...claims.stats import bootstrap_sd, paired_se, rank_correlation

    r = result_of(pr, tasks)
    rf = _random_ft(r)
    t = glue.task(r.task)
    value = r.mean(_untuned(r)) - r.mean(rf)
    have = r.labels is not None and all(s.predictions is not None for s in (*r.untuned.values(), *rf.values()))
    se, parts = None, []
    if have and (t.is_regression or len(t.labels) == 2):
        labels = np.asarray(r.labels, float)
        if t.is_regression:
            u = [np.asarray(s.predictions, float) for s in r.untuned.values()]
            f = [np.asarray(s.predictions, float) for s in rf.values()]

            def corr(p, idx):
                y, q = labels[idx], p[idx]
                return 0.0 if np.std(q) == 0 or np.std(y) == 0 else 100 * rank_correlation(q, y, "pearson")[0]

            def stat(idx):
                return np.mean([corr(p, idx) for p in u]) - np.mean([corr(p, idx) for p in f])

            se_ex, kept = bootstrap_sd(stat, len(labels), samples=UNTUNED_HEAD_BOOTSTRAP, seed=0)
            centre, what = 0.0, f"bootstrap over the {len(labels)} dev examples ({kept} resamples)"
        else:
            se_ex = paired_se(_correct(r, r.untuned), _correct(r, rf))
            centre, what = 50.0, f"paired over the {len(labels)} dev examples"
        head = float(np.sqrt(np.mean([(s.primary - centre) ** 2 for s in r.untuned.values()])))
        se = float(np.sqrt(se_ex ** 2 + head ** 2))
        parts.append(f"SE {se:.2f} = sqrt(examples {se_ex:.2f} ({what})² + untrained head {head:.2f}²: a head "
                     f"of the opposite sign, as likely, scores {'-r' if t.is_regression else '100 - acc'})")
    else:
        parts.append("no per-example predictions or more than two classes: no standard error")
    return Measurement(value, r.n_dev, "dev examples", unit="points", standard_error=se,
                       detail=f"{r.task}: un-tuned (random head) {r.mean(r.untuned):.2f} ({_fmt(r.untuned)}) vs random "
                              f"init + fine-tuned {r.mean(rf):.2f} ({_fmt(rf)}); " + "; ".join(parts))


@metric("finetune_gain")
def finetune_gain(pr, tasks: list | None = None) -> Measurement:
    """Fine-tuned minus un-tuned (the pre-trained encoder with an untrained head), points, mean over seeds, with a
    standard error (:func:`_difference_se`: paired per dev example; the un-tuned head's seed spread counts)."""
    r = result_of(pr, tasks)
    untuned = _untuned(r)
    se, how = _difference_se(r, r.finetuned, untuned, None, "the un-tuned model")
    return Measurement(r.mean(r.finetuned) - r.mean(untuned), r.n_dev, "dev examples", unit="points",
                       standard_error=se,
                       detail=f"{r.task}: fine-tuned {r.mean(r.finetuned):.2f} vs un-tuned {r.mean(untuned):.2f} "
                              f"({_fmt(untuned)}); {how}")


@metric("ft_change_last_layers")
def ft_change_last_layers(pr, last: int = 2, min_change: float = 0.0) -> Measurement:
    """How many of the ``last`` layers are among the ``last`` lowest-cosine (most changed) layers and changed at
    all: mean cosine at most 1 - ``min_change`` (an ordering of changes that are all tiny is no finding)."""
    r = result_of(pr)
    if r.cosine_layer is None:
        raise NotApplicable("no fine-tuned model in this pass" if r.untuned else "the model is a classifier judged as "
                            "given: its pre-trained encoder's maps, the other side of the comparison, are not known")
    n_layers = len(r.cosine_layer)
    most = np.argsort(r.cosine_layer, kind="stable")[:last]
    hit = sum(1 for layer in most if layer >= n_layers - last and r.cosine_layer[layer] <= 1 - min_change)
    per_layer = " ".join(f"L{i + 1} {c:.3f}" for i, c in enumerate(r.cosine_layer))
    return Measurement(hit, r.n_cosine, "dev examples", unit=f"of the last {last} layers",
                       detail=f"{r.task}: mean cosine pre-trained vs fine-tuned (seed {r.seeds[0]}) per layer: "
                              f"{per_layer}; most changed: {', '.join(f'L{i + 1}' for i in most)}"
                              + (f"; a layer counts when its cosine is <= {1 - min_change:.2f}" if min_change else ""))
