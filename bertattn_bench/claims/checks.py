"""A claim's check in three named steps (issue 62), and the one place that decides whether it passed.

* :func:`measure` — the metric's value, n and detail on a pass (or why the claim does not apply: skipped);
* :func:`judge` — the verdict against the paper's comparison: its interval (the metric's standard error or bounds,
  widened by the training seed's spread where the value is one seed's: :func:`seed_interval`), inconclusive where a
  threshold lies inside it, and the learned-model guard (a claim on a trained model that did not learn is not
  judged);
* :func:`check` — a policy the runner chooses: :class:`OwnBaseline` (the model's recorded baseline: the value
  within its tolerance, the same verdict where it is pinned, the same n; the ``--limit`` and per-device exceptions),
  :class:`CompareTo` (``--compare-to``: model A's verdicts by the ``--compare-fail-on`` policy), :class:`Record`
  (``--record-baseline``: the value becomes the baseline), :class:`NegativeControl` (the random-init twin: a
  learned claim must not clearly hold) or :class:`NoBaseline` (the paper's verdict alone). ``passed`` is assigned
  here and nowhere else.

Evaluating a claim gives a :class:`ClaimOutcome` with two separate judgements:

* ``holds`` — the paper's claim, by its comparison, on this model (a claim that does not hold is a finding);
* ``baseline_ok`` — the measured value equals the model's recorded baseline within the claim's tolerance
  (the regression check). pytest's pass/fail follows ``baseline_ok`` when a baseline exists, else ``holds``.

Where the metric gives the value's standard error (``Measurement.standard_error``), the outcome carries the
interval value ± ``interval_z`` x SE (95% by default) and is **inconclusive** when a threshold lies inside it: the
verdict then reads e.g. ``does not hold (inconclusive: margin -0.93 ± 7.7, 95% CI)``, its side is reported but not
checked against the baseline, and without a baseline it does not fail (the value check stays).

A claim that reads a trained model which did not learn (:mod:`bertattn_bench.claims.learned`: a fine-tune at its
majority class) is **not judged**: ``not_judged`` holds the reason with its numbers, ``verdict`` reads
``not judged: ...``, and it does not count as holding. Without a baseline it is reported, not failed; against a
recorded baseline where the claim was judged it fails the check (a lost judgement); where the baseline was not judged
either, the check passes when n is the same. Entries with ``reads_degenerate = true`` (their subject is the
degenerate run itself) or ``reads_trained = false`` (they read only the pre-trained model or the data) are judged
regardless.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import learned
from .claim import Claim
from .outcome import ClaimOutcome, baseline_key, corpus_label
from .recorded import device_type, recorded_device
from .registry import Measurement, NotApplicable, NothingToMeasure, load_all_metrics
from .stats import seed_half_width
from .verdicts import HOLDS, lost, verdict_of

# ---- 1. measure ------------------------------------------------------------------------------------------------


@dataclass
class Measured:
    """What :func:`measure` gives :func:`judge`: the outcome so far, the metric's measurement (None: skipped) and the
    further passes the claim read."""

    outcome: ClaimOutcome
    m: Measurement | None
    resolved: list


def measure(claim: Claim, pass_result, others=None, assume_shape: str | None = None) -> Measured:
    """The metric's value on ``pass_result`` (and the further passes ``others(claim)`` resolves), or the reason the
    claim does not apply (``skipped``): a requirement the model does not meet, a pass the run lacks, nothing to
    measure."""
    info = pass_result.model
    base = dict(claim_id=claim.id, paper=claim.paper, section=claim.section, statement=claim.statement,
                model=info.name, model_slug=info.slug, data=pass_result.data, corpus=corpus_label(pass_result),
                reference=claim.reference, comparison=claim.describe_comparison(),
                attn_implementation=info.attn_implementation, tolerance=claim.tolerance)
    reason = claim.unmet_requirement(info, pass_result.corpus, assume_shape)
    m: Measurement | None = None
    resolved: list = []
    if reason is None:
        try:
            extra = {}
            if claim.inputs:  # a claim over several passes: the caller resolves them (or says why it cannot)
                if others is None:
                    raise NotApplicable(f"reads {len(claim.inputs)} more pass(es) {claim.inputs}: not given here")
                extra["passes"] = resolved = others(claim)
            for p in (pass_result, *resolved):  # a pass that measured nothing: its reason, and no metric sees it
                if isinstance(getattr(p, "result", None), NothingToMeasure):
                    raise NotApplicable(p.result.reason)
            m = load_all_metrics()[claim.metric](pass_result, **claim.params, **extra)
        except NotApplicable as exc:
            reason = str(exc)
    if m is None:
        return Measured(ClaimOutcome(**base, measured=None, unit="", n=pass_result.n_examples, n_unit="examples",
                                     holds=None, head=None, detail="", skipped=reason), None, [])
    skipped = pass_result.skipped.describe()
    base["corpus"] = corpus_label(pass_result, resolved)
    if claim.inputs:
        base["data"] = pass_result.data + "".join(f" + {p.model.name} / {p.family}:{p.corpus} ({p.data})"
                                                  for p in resolved)
    if not claim.inputs and "per_seed" not in m.values:
        per_seed = per_seed_values(claim, pass_result)
        if per_seed is not None:
            m.values["per_seed"] = per_seed
    out = ClaimOutcome(**base, measured=m.value, unit=m.unit, n=m.n, n_unit=m.n_unit, holds=None, head=m.head,
                       detail=m.detail + (f" [{skipped}]" if skipped else ""), values=dict(m.values),
                       exact=claim.exact)
    return Measured(out, m, resolved)


def one_seed(result, i: int):
    """The view of a several-seed ``result`` that holds its ``i``-th seed only: the fields its class names in
    ``PER_SEED`` restricted (a dict keyed by seed to that seed's entry; an array or list whose first axis runs over
    the seeds to row ``i``, None where that axis is shorter: a field only the first seeds fill), ``seeds`` the one."""
    import dataclasses

    seed = result.seeds[i]
    # ``seeds`` a field (a result that derives it from its per-seed field, as ARCT's runs, follows the restriction)
    changes: dict = {"seeds": (seed,)} if "seeds" in {f.name for f in dataclasses.fields(result)} else {}
    for name in type(result).PER_SEED:
        v = getattr(result, name)
        if isinstance(v, dict):
            changes[name] = {k: x for k, x in v.items() if k == seed}
        elif v is not None:
            changes[name] = v[i:i + 1] if i < len(v) else None
    return dataclasses.replace(result, **changes)


def per_seed_values(claim: Claim, pass_result) -> list[float] | None:
    """The claim's metric on each seed of a pass that trained several (its result's class names its per-seed fields
    in ``PER_SEED``), in the order of ``result.seeds``; None for a one-seed pass, a result without per-seed fields, or
    a seed whose view the metric says it cannot read (``NotApplicable``; :func:`seed_interval` then has no run spread
    to use). The pass result must be a dataclass (``dataclasses.replace`` makes the view)."""
    import dataclasses

    r = getattr(pass_result, "result", None)
    seeds = getattr(r, "seeds", ())
    if not getattr(type(r), "PER_SEED", None) or len(seeds) < 2:
        return None
    fn, out = load_all_metrics()[claim.metric], []
    for i in range(len(seeds)):
        try:
            v = float(fn(dataclasses.replace(pass_result, result=one_seed(r, i)), **claim.params).value)
        except NotApplicable:  # the metric cannot read one seed (any other error is a bug of the metric: it shows)
            return None
        if not math.isfinite(v):
            return None
        out.append(v)
    return out


# ---- 2. judge --------------------------------------------------------------------------------------------------


def seed_interval(claim: Claim, key: str, m: Measurement, seed_spread: dict | None) -> tuple[float | None, str]:
    """(the half-width the training seed adds to a one-seed value's interval, its note for ``detail``) from the seed
    spread recorded for ``key`` (``claim@corpus``; :func:`baselines.seed_spreads`); (None, "") where the metric's own
    interval already holds its seeds (``Measurement.values["seeds"]`` >= 2: a tier that trained several) or no spread
    is recorded. A spread of 0 (no seed moved the value) adds nothing, and with no other interval none is invented:
    a width-0 interval would claim the data's sample is exact too (the interval audit lists the value); the note
    says so."""
    if int(m.values.get("seeds", 1) or 1) >= 2:
        return None, ""
    per_seed = m.values.get("per_seed")
    if per_seed is not None and len(per_seed) >= 2:  # a tier that trained k seeds: the spread of this run's seeds
        k, sd = len(per_seed), float(np.std(per_seed, ddof=1))
        half = seed_half_width(sd, k, claim.interval_z) / math.sqrt(k)
        where = f"seeds: sd {sd:.3g} over this run's {k} seeds (the value their mean)"
        if half == 0 and m.standard_error is None and m.bounds is None:
            return None, f" [{where}: the seed does not move it]"
        return half, f" [{where}, ± {half:.3g} in the interval]"
    spread = (seed_spread or {}).get(key)
    if not spread or spread.get("k", 0) < 2:
        return None, ""
    half = seed_half_width(spread["sd"], spread["k"], claim.interval_z)
    if not math.isfinite(half):
        return None, ""
    where = f"seed: sd {spread['sd']:.3g} over {spread['k']} seeds {spread.get('seeds')} ({spread.get('source', 'recorded')})"
    if half == 0 and m.standard_error is None and m.bounds is None:
        return None, f" [{where}: the seed does not move it]"
    return half, f" [{where}, ± {half:.3g} in the interval]"


def judge(claim: Claim, pass_result, measured: Measured, seed_spread: dict | None = None) -> ClaimOutcome:
    """The verdict of a measured claim: its side of the paper's comparison, its interval (the data's and, for a
    one-seed trained value, the seed's), inconclusive where a threshold lies inside, not judged where a trained model
    it reads did not learn. ``seed_spread``: this model's recorded seed spreads (``claim@corpus`` ->
    :func:`baselines.seed_spreads`' entry)."""
    out, m = measured.outcome, measured.m
    if m is None:  # skipped: nothing to judge
        return out
    out.holds = claim.compare(m.value)
    seed_half, seed_note = seed_interval(claim, baseline_key(claim.id, out.corpus), m, seed_spread)
    out.interval, out.margin = claim.interval(m.value, m.standard_error, m.bounds, seed_half)
    out.detail += seed_note
    keys = claim.reads_trained if isinstance(claim.reads_trained, list) else None
    untrained = learned.not_learned(pass_result, *measured.resolved, keys=keys) \
        if claim.reads_trained and not claim.reads_degenerate else None
    if untrained:  # the learned-model guard: a claim on a model that learned nothing is not judged
        out.not_judged, out.holds, out.interval = untrained, None, None  # neither side: the claim is not judged
        out.detail += f" [not judged: {untrained}]"
    if out.interval is not None:
        lo, hi = out.interval
        out.inconclusive = claim.threshold_inside(out.interval)
        what = (f"bounds {lo:.4g} .. {hi:.4g}" if m.bounds is not None else
                f"{claim.interval_z:g} SE interval {lo:.4g} .. {hi:.4g} (SE {m.standard_error:.3g})"
                if m.standard_error is not None else f"seed interval {lo:.4g} .. {hi:.4g}")
        out.detail += f" [{what}" + (": the threshold lies inside, the verdict is inconclusive]" if out.inconclusive
                                     else "]")
    return out


# ---- 3. check: the policies ------------------------------------------------------------------------------------


class NoBaseline:
    """No recorded value to hold the run to: the paper's verdict decides (a claim that holds, an inconclusive one,
    one not judged pass; one that clearly does not hold fails)."""

    def __call__(self, claim: Claim, out: ClaimOutcome, device: str | None = None) -> bool:
        return bool(out.holds or out.inconclusive or out.not_judged)


class Record:
    """``--record-baseline``: the value becomes the baseline; the verdict is reported, never failed."""

    def __call__(self, claim: Claim, out: ClaimOutcome, device: str | None = None) -> bool:
        return True


class NegativeControl:
    """The random-init twin: a claim about learned structure must not clearly hold there (an inconclusive or
    not-judged row passes, as it prints)."""

    def __call__(self, claim: Claim, out: ClaimOutcome, device: str | None = None) -> bool:
        out.comparison = f"NOT {out.comparison} (negative control)"
        return verdict_of(out) != HOLDS


@dataclass
class _Recorded:
    """A policy reading a recorded baseline document (``{"provenance": ..., "results": {claim@corpus: entry}}``)."""

    baseline: dict | None = None
    limit: int | None = None  # the run's --limit: a sample of another n is reported, not checked

    def recorded(self, claim: Claim, out: ClaimOutcome) -> dict | None:
        """The entry of ``claim`` on this corpus, with its numbers copied onto ``out``; None where none is."""
        entry = (self.baseline or {}).get("results", {}).get(baseline_key(claim.id, out.corpus))
        if entry is None:
            return None
        out.baseline, out.baseline_holds = entry["measured"], entry["holds"]
        out.baseline_verdict = verdict_of(entry)
        out.baseline_model = (self.baseline or {}).get("provenance", {}).get("model")
        if entry["measured"] is not None:
            out.delta = out.measured - entry["measured"]
        return entry

    def another_sample(self, entry: dict, out: ClaimOutcome) -> bool:
        """A --limit sample whose n is not the recorded n: not the recorded measurement (said in ``detail``)."""
        if self.limit is not None and entry.get("n") != out.n:
            out.detail += f" [not checked: recorded n={entry.get('n')}, this run n={out.n} (--limit {self.limit})]"
            return True
        return False


@dataclass
class CompareTo(_Recorded):
    """``--compare-to``: model A's recorded verdicts; fails by ``fail_on``: ``lost`` (clearly held on A, here does
    not hold or is inconclusive without holding A's value, or is no longer judged; :func:`verdicts.lost`), ``flips``
    (the point side changed) or ``never``."""

    fail_on: str = "lost"

    def __call__(self, claim: Claim, out: ClaimOutcome, device: str | None = None) -> bool:
        entry = self.recorded(claim, out)
        if entry is None or self.another_sample(entry, out):
            return True
        out.baseline_ok = {"lost": not (lost(entry, out) or verdict_of(entry) == HOLDS and out.not_judged),
                           "flips": bool(entry["holds"]) == bool(out.holds),
                           "never": True}[self.fail_on]
        return out.baseline_ok


@dataclass
class OwnBaseline(_Recorded):
    """The model's own recorded baseline: the value within the tolerance (the entry's measured spread, never
    narrower than the claim's), the same verdict where the threshold lies outside that band and neither verdict is
    inconclusive, the same n; a lost judgement fails. Without an entry, :class:`NoBaseline`. A wall-clock value
    (``per_device``) recorded on another kind of device is reported, not checked."""

    def __call__(self, claim: Claim, out: ClaimOutcome, device: str | None = None) -> bool:
        entry = self.recorded(claim, out)
        if entry is None:
            return NoBaseline()(claim, out)
        if self.another_sample(entry, out) or self._other_device(claim, entry, out, device):
            return True
        recorded = entry["measured"]
        tol = max(claim.tolerance, float(entry.get("tolerance") or 0.0)) if claim.checked == "value" else 0.0
        out.tolerance = tol if claim.checked == "value" else None
        within = claim.checked == "verdict" or out.delta is not None and abs(out.delta) <= tol + 1e-9
        if claim.checked == "verdict" and recorded is not None:
            out.detail += (f" [the value is this machine's, not compared (recorded {recorded:.4g}); the verdict is "
                           f"checked]")
        # a verdict is pinned to the recorded one unless the threshold lies inside the recorded value's tolerance
        # band (then the measured noise decides the side, and the verdict is reported, not checked)
        pinned = recorded is None or claim.verdict_pinned(recorded, tol)
        # an inconclusive verdict (now or when recorded) is noise: reported, not checked
        pinned = pinned and not out.inconclusive and not entry.get("inconclusive")
        # (a not-judged baseline recorded no side, or "does not hold" before issue 44: either reads as not holding)
        same_side = bool(entry["holds"]) == bool(out.holds)
        out.baseline_ok = within and (same_side or not pinned) and entry.get("n") == out.n
        if out.not_judged:  # a lost judgement fails; not judged now and then: the same n passes
            within, pinned = True, False
            out.baseline_ok = bool(entry.get("not_judged")) and entry.get("n") == out.n
        if within and not pinned and not out.not_judged:
            out.detail += f" [verdict within noise: the threshold lies inside the recorded {recorded:.4g} ± {tol:g}]"
        if not out.baseline_ok:
            out.check_failure = ", ".join(part for part, bad in (
                ("no recorded value" if out.delta is None else
                 f"value off by {out.delta:+.4g} (tolerance {tol:g})", not within),
                (f"verdict {out.verdict!r} where the baseline {'holds' if entry['holds'] else 'does not hold'}",
                 not same_side and pinned),
                (f"n {out.n} where the baseline has {entry.get('n')}", entry.get("n") != out.n),
                ("not judged where the baseline was judged (a lost judgement)",
                 bool(out.not_judged) and not entry.get("not_judged"))) if bad)
        return out.baseline_ok

    def _other_device(self, claim: Claim, entry: dict, out: ClaimOutcome, device: str | None) -> bool:
        if not claim.per_device:
            return False
        here = device_type(device)
        there = device_type(recorded_device(self.baseline, entry))
        if there is not None and here != there:  # a timing of another kind of device: no regression to check
            out.detail += (f" [not checked: a wall-clock value, recorded on {there}, measured here on {here}; the "
                           f"verdict is this device's]")
            return True
        return False


def check(policy, claim: Claim, out: ClaimOutcome, device: str | None = None) -> ClaimOutcome:
    """Step 3, and the one place a claim's ``passed`` is decided: None for a skipped claim (nothing was measured),
    else the policy's answer (``device``: where the pass ran, for a per-device value)."""
    out.passed = None if out.skipped is not None else bool(policy(claim, out, device))
    return out


def policy_for(mode: str, baseline: dict | None, limit: int | None = None, compare_fail_on: str = "lost"):
    """The check a run asks for: ``own`` (this model's baseline; none: the paper's verdict), ``compare`` (model A's
    baseline), ``record`` or ``negative``."""
    if mode == "compare":
        return CompareTo(baseline, limit, compare_fail_on)
    if mode == "record":
        return Record()
    if mode == "negative":
        return NegativeControl()
    return OwnBaseline(baseline, limit) if baseline else NoBaseline()


def evaluate(claim: Claim, pass_result, baseline: dict | None = None, mode: str = "own", others=None,
             limit: int | None = None, compare_fail_on: str = "lost", assume_shape: str | None = None,
             seed_spread: dict | None = None, policy=None) -> ClaimOutcome:
    """Measure, judge and check ``claim`` on a pass result. ``policy``: the check (:func:`policy_for` builds it from
    ``mode``, ``baseline``, ``limit`` and ``compare_fail_on`` where not given)."""
    measured = measure(claim, pass_result, others, assume_shape)
    if measured.m is not None:
        judge(claim, pass_result, measured, seed_spread)
    return check(policy or policy_for(mode, baseline, limit, compare_fail_on), claim, measured.outcome,
                 getattr(pass_result.model, "device", None))
