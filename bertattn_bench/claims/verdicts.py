"""The one verdict of a claim result: holds, does not hold, inconclusive, not judged or skipped.

Every table, matrix, job summary and baseline diff names a result's verdict through :func:`verdict_of`, from a
:class:`~bertattn_bench.claims.catalog.ClaimOutcome`, its ``record()`` (a row of ``claims.json``) or a recorded
baseline's entry: the same five words everywhere, in the same order of precedence (a skipped claim was not measured;
a not-judged one was measured on a model that did not learn, whatever side its value fell on; an inconclusive one
has a threshold inside its interval; else its side).
"""
from __future__ import annotations

from typing import Any

HOLDS, DOES_NOT_HOLD, INCONCLUSIVE, NOT_JUDGED, SKIPPED = (
    "holds", "does not hold", "inconclusive", "not judged", "skipped")
VERDICTS = (HOLDS, DOES_NOT_HOLD, INCONCLUSIVE, NOT_JUDGED, SKIPPED)


def _field(result: Any, name: str) -> Any:
    return result.get(name) if isinstance(result, dict) else getattr(result, name, None)


def verdict_of(result: Any) -> str:
    """One of :data:`VERDICTS` for an outcome, a ``claims.json`` record or a baseline entry."""
    if _field(result, "skipped"):
        return SKIPPED
    if _field(result, "not_judged"):
        return NOT_JUDGED
    if _field(result, "inconclusive"):
        return INCONCLUSIVE
    return HOLDS if _field(result, "holds") else DOES_NOT_HOLD


def clearly_holds(result: Any) -> bool:
    """Judged and holds on a clear side (not skipped, not judged, nor inconclusive)."""
    return verdict_of(result) == HOLDS


def clearly_fails(result: Any) -> bool:
    """Judged and clearly does not hold (a not-judged or inconclusive result is neither)."""
    return verdict_of(result) == DOES_NOT_HOLD


def agrees(reference: Any, here: Any) -> bool:
    """The reference's value lies inside this result's interval (which holds the data sample's and, for a trained
    value, the seed's randomness): the two values agree within this run's noise, the model did not measurably move.
    False where either value or the interval is missing."""
    value, interval = _field(reference, "measured"), _field(here, "interval")
    if value is None or not interval:
        return False
    lo, hi = interval
    return lo <= float(value) <= hi


def lost(reference: Any, here: Any) -> bool:
    """The one rule of a lost claim (the ``--compare-to`` check's default policy, the job summary's lost list and the
    matrix page's "lost" marks, whose script reads the same verdicts): it clearly held on the reference (model A's
    recorded entry, the model's own baseline, or the reference column) and here it was judged and does not clearly
    hold (does not hold, or inconclusive: not shown to hold any more). Where the reference is inconclusive nothing
    was shown to hold, so nothing can be lost; a claim skipped or not judged here has no side (a lost judgement is
    the check's business, not this rule's). An inconclusive result whose interval holds the reference's value
    (:func:`agrees`) is not lost: the value did not move beyond this run's noise (two runs that differ only by the
    training seed, issue 61); one that clearly does not hold is lost whatever its interval."""
    here_verdict = verdict_of(here)
    return clearly_holds(reference) and (here_verdict == DOES_NOT_HOLD or
                                         here_verdict == INCONCLUSIVE and not agrees(reference, here))
