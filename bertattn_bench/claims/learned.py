"""The learned-model guard (issue 36): before a claim reads a trained model, test that the model learned.

A fine-tune can end at the majority class (the quick tier's MRPC run on 800 pairs did: 67.19 on 64 dev pairs,
the majority class), and every claim on it then reads a constant classifier: pruning "costs nothing", no single
head matters, fine-tuning "gains" 35 points over an anti-majority head. So each trained pass records one
:class:`Check` per trained model it reads (``PassResult.learning``), made here and nowhere else:

* a classifier (GLUE classification, ARCT): its accuracy on the dev (ARCT: test) examples the claims read against
  the majority class of those examples, an exact one-sided binomial test (``stats.binomial_above_p``),
  learned when p < :data:`ALPHA`;
* a regressor (STS-B): Pearson's r > 0, one-sided, p < :data:`ALPHA` (``stats.correlation_above_zero_p``);
* a probe (Clark §5): against itself untrained, paired per arc (:func:`probe`);
* several runs of which the claims summarise the set (ARCT's seeds, Niven's degenerate runs being part of the
  finding): learned when the best run passes at ALPHA / number of runs (Bonferroni).

:func:`not_learned` is the one place a claim's outcome asks (``claims.evaluate``): the reasons of every failed check
of its pass and of the passes it reads beside it. A claim then gets the state **not judged** with the reason and
the numbers, unless its entry says ``reads_degenerate = true`` (its subject is the degenerate run itself: Niven &
Kao's degenerate-run share) or ``reads_trained = false`` (it reads only the pre-trained model or the data).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import stats

ALPHA = 0.01  # one-sided; a model at the majority class has p around 0.5


@dataclass(frozen=True)
class Check:
    subject: str  # the trained model: "all-MiniLM-L6-v2 fine-tuned on mrpc (seed 0)"
    learned: bool
    text: str  # the numbers: "dev acc 67.19 vs majority 68.75 (n=64), one-sided binomial p=0.61"
    p: float
    score: float  # accuracy (points) or Pearson r
    baseline: float  # the majority class's accuracy (points) or 0; a probe's: its untrained UAS
    n: int
    key: str = ""  # which trained model of the pass it tests (a probe's name), for claims that read only some

    @property
    def reason(self) -> str:
        return f"{self.subject} did not learn: {self.text}"

    def record(self) -> dict:
        """As the report lists it (``run.json``'s ``trained_models``, ``claims.md``, the terminal)."""
        return {"subject": self.subject, "learned": bool(self.learned), "test": self.text}

    @property
    def line(self) -> str:
        return f"{self.subject}: {'learned' if self.learned else 'DID NOT LEARN (its claims are not judged)'}: " \
               f"{self.text}"


def classifier(subject: str, predictions, labels, what: str = "dev") -> Check:
    """A classifier's accuracy on ``labels`` against their majority class (exact one-sided binomial)."""
    predictions, labels = np.asarray(predictions).reshape(-1), np.asarray(labels).reshape(-1)
    n = int(labels.size)
    correct = int((predictions == labels).sum())
    majority = max(np.bincount(labels.astype(int)).max() / n, 0.0) if n else 0.0
    p = stats.binomial_above_p(correct, n, majority)
    acc = 100.0 * correct / n if n else float("nan")
    return Check(subject, p < ALPHA, f"{what} acc {acc:.2f} vs majority {100 * majority:.2f} (n={n}), one-sided "
                                     f"binomial p={p:.2g}", p, acc, 100 * majority, n)


def regressor(subject: str, predictions, labels, what: str = "dev") -> Check:
    """A regressor's Pearson r on ``labels``, one-sided against r <= 0."""
    r, p = stats.correlation_above_zero_p(predictions, labels)
    n = int(np.asarray(labels).size)
    return Check(subject, p < ALPHA, f"{what} Pearson r {r:.3f} (n={n}), one-sided p={p:.2g} against r <= 0",
                 p, r, 0.0, n)


def glue(subject: str, task, logits, labels) -> Check:
    """A GLUE fine-tune on its dev examples (``task``: a ``data.glue.Task``; ``logits`` as ``finetune.predict``)."""
    logits = np.asarray(logits)
    if task.is_regression:
        return regressor(subject, logits.reshape(-1), labels)
    return classifier(subject, logits.argmax(-1), labels)


def probe(subject: str, key: str, score, what: str = "eval arcs", measure: str = "UAS") -> Check:
    """A probe (Clark §5) against itself untrained (same architecture and initialisation, no training step), paired
    per scored arc: exact one-sided McNemar on the arcs only one of them gets right, learned when p < ALPHA.
    ``score``: the probe's ``ProbeScore`` (``uas``, ``untrained_uas``, ``gained``, ``lost``, ``n_arcs``).

    Not against right-branching or the best single head: the probe claims compare the probe with those baselines
    themselves, and a guard on the same comparison would leave them unable to fail. What this catches is training
    that moved nothing (a learning rate of 0, a loss that never reached the parameters, a diverged run)."""
    gained, lost = int(score.gained), int(score.lost)
    p = stats.binomial_above_p(gained, gained + lost, 0.5)
    return Check(subject, p < ALPHA, f"{measure} {score.uas:.2f} vs {score.untrained_uas:.2f} untrained on the same "
                                     f"{score.n_arcs} {what} ({gained} gained, {lost} lost), one-sided exact McNemar "
                                     f"p={p:.2g}", p, float(score.uas), float(score.untrained_uas), int(score.n_arcs),
                 key)


def best_of(subject: str, checks: list[Check]) -> Check:
    """Several runs summarised as a set: learned when the best run passes at ALPHA / len(checks) (Bonferroni)."""
    if len(checks) == 1:
        c = checks[0]
        return Check(subject, c.learned, c.text, c.p, c.score, c.baseline, c.n)
    best = min(checks, key=lambda c: c.p)
    k = len(checks)
    return Check(subject, best.p * k < ALPHA, f"best of {k} runs ({best.subject}): {best.text}, Bonferroni x{k} "
                                              f"p={min(best.p * k, 1.0):.2g}", best.p, best.score, best.baseline,
                 best.n)


def not_learned(*pass_results, keys=None) -> str | None:
    """The reasons (``; ``-joined) of every failed check of these passes, or None when every trained model they
    read learned (or they read none). ``keys``: only the checks of those trained models (a claim that reads some of
    a pass's probes); None: all."""
    seen, out = set(), []
    for pr in pass_results:
        for c in getattr(pr, "learning", ()) or ():
            if keys is not None and c.key not in keys:
                continue
            if not c.learned and c.reason not in seen:
                seen.add(c.reason)
                out.append(c.reason)
    return "; ".join(out) or None
