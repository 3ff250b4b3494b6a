"""The one verdict of a claim result: holds, does not hold, inconclusive, not judged or skipped.

Every table, matrix, job summary and baseline diff names a result's verdict through :func:`verdict_of`, from a
:class:`~bertattn_bench.claims.catalog.ClaimOutcome`, its ``record()`` (a row of ``claims.json``) or a recorded
baseline's entry: the same five words everywhere, in the same order of precedence (a skipped claim was not measured;
a not-judged one was measured on a model that did not learn, whatever side its value fell on; an inconclusive one
has a threshold inside its interval; else its side).
"""
from __future__ import annotations

import math
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
    """The two values agree within their combined noise: the model did not measurably move. Each result's interval
    holds its data sample's and, for a trained value, its seed's randomness, and the reference's value is as noisy as
    this one: |reference - here| <= sqrt(h_here^2 + h_ref^2), each h the half-width of that result's interval on the
    side facing the other value (a reference without an interval: h_ref = 0; a result without its own value: the
    reference's value inside this interval). Two seeds of one model differ by sd x sqrt(2), not sd: with this
    interval's half-width alone, two seeds far apart in a spread of eight read as lost (stop 70). False where either
    value or this interval is missing."""
    value, interval = _field(reference, "measured"), _field(here, "interval")
    if value is None or not interval:
        return False
    lo, hi = interval
    value, mine = float(value), _field(here, "measured")
    if mine is None:
        return lo <= value <= hi
    mine = float(mine)
    up = value >= mine  # the reference above this value: this interval's upper half, the reference's lower
    h_here = max(hi - mine, 0.0) if up else max(mine - lo, 0.0)
    ref_interval = _field(reference, "interval")
    h_ref = 0.0
    if ref_interval:
        h_ref = max(value - float(ref_interval[0]), 0.0) if up else max(float(ref_interval[1]) - value, 0.0)
    return abs(value - mine) <= math.sqrt(h_here * h_here + h_ref * h_ref) + 1e-12


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
