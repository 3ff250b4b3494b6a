"""A claim's result on one pass (:class:`ClaimOutcome`, a row of ``claims.json``) and the names it is filed under:
the corpus label (:func:`corpus_label`, with the tier where it changed the pass) and the baseline key
(:func:`baseline_key`, ``claim@corpus``)."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from .verdicts import INCONCLUSIVE, NOT_JUDGED, SKIPPED, verdict_of


@dataclass
class ClaimOutcome:
    claim_id: str
    paper: str
    section: str
    statement: str
    model: str
    model_slug: str
    data: str
    corpus: str
    measured: float | None
    unit: str
    n: int
    n_unit: str
    reference: str
    comparison: str
    holds: bool | None
    head: str | None
    detail: str
    attn_implementation: str
    baseline: float | None = None
    baseline_holds: bool | None = None
    baseline_verdict: str | None = None  # the recorded entry's verdict (claims.verdicts.verdict_of): what "lost" reads
    baseline_ok: bool | None = None
    baseline_model: str | None = None  # whose recorded baseline ``baseline`` is
    delta: float | None = None  # measured - baseline
    tolerance: float | None = 0.0  # None: the claim's check compares the verdict only (Claim.checked)
    skipped: str | None = None
    passed: bool | None = None
    negative_control: bool = False  # judged as the random-init twin: passes when the claim does NOT hold
    check_failure: str | None = None  # which part of the baseline check failed: value, verdict or n
    interval: list[float] | None = None  # [lo, hi]: measured ± z SE, where the metric gives a standard error
    inconclusive: bool = False  # a threshold lies inside ``interval``: the side is noise
    margin: float | None = None  # measured - the nearest threshold, where ``interval`` is given
    values: dict = field(default_factory=dict)  # the metric's named values (Measurement.values), for scripts
    not_judged: str | None = None  # a trained model it reads did not learn (the reason, with its numbers)
    exact: str | None = None  # why the value carries no interval (Claim.exact): exact by nature

    @property
    def verdict(self) -> str:
        word = verdict_of(self)
        if word == SKIPPED:
            return word
        if word == NOT_JUDGED:
            return f"not judged: {self.not_judged}"
        side = "holds" if self.holds else "does not hold"
        if word == INCONCLUSIVE:
            if not self.symmetric:  # explicit bounds (Measurement.bounds), not value ± z SE
                return f"{side} (inconclusive: the threshold lies within the bounds {self.interval_text})"
            return f"{side} (inconclusive: margin {self.margin:+.3g} ± {self.half_width:.2g}, 95% CI)"
        return side

    @property
    def half_width(self) -> float | None:
        return None if self.interval is None else (self.interval[1] - self.interval[0]) / 2

    @property
    def symmetric(self) -> bool:
        """The interval is the measured value ± a half-width (a standard error's), not explicit bounds."""
        if self.interval is None or self.measured is None:
            return True
        lo, hi = self.interval
        return math.isclose((lo + hi) / 2, self.measured, rel_tol=1e-9, abs_tol=1e-12)

    @property
    def interval_text(self) -> str:
        """How tables show the interval: ``±h`` around the value, or ``[lo..hi]`` for explicit bounds."""
        if self.interval is None:
            return ""
        return f"±{self.half_width:.2g}" if self.symmetric else f"[{self.interval[0]:.3g}..{self.interval[1]:.3g}]"

    def record(self) -> dict:
        return asdict(self)


def corpus_label(pass_result, inputs=()) -> str:
    """The corpus as tables and baselines name it: a tier other than the recorded (regression) one is part of it
    where it changed the pass (``mrpc+full``: three seeds' mean is another measurement than one seed's;
    ``wikitext2+quick``: a capped sample), also when the tier is that of a pass the claim reads beside its own
    (FrameNet heads judged on the full tier's disabling sweeps). See :mod:`bertattn_bench.claims.tiers`."""
    from .tiers import suffix

    return pass_result.corpus + suffix(getattr(p, "tier", None) or getattr(p.result, "tier", None)
                                       for p in (pass_result, *inputs))


def baseline_key(claim_id: str, corpus: str) -> str:
    return f"{claim_id}@{corpus}"
