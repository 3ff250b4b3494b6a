"""A claim of the catalog (one ``[[claim]]`` entry of ``reference_numbers/*.toml``): what the paper says, the comparison
that judges a measured value, its interval, and what a model needs for the claim to apply. Loaded by
:mod:`bertattn_bench.claims.catalog`; judged by :mod:`bertattn_bench.claims.checks`."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..base.settings import ASSUME_SHAPE_ENV
from .registry import DEPTH_BANDS, in_band

# Claims that name a paper model's heads apply to models of that shape (layers, heads, hidden), never by name: a
# fine-tuned bert-base in any folder qualifies, camembert-base with another shape or a 6-layer model does not.
SHAPES = {"bert-base": (12, 12, 768), "bert-large": (24, 16, 1024)}
COMPARISONS = (">", ">=", "<", "<=", "between", "in_band")
CHECKED = ("value", "verdict")


@dataclass(frozen=True)
class Claim:
    id: str
    paper: str
    section: str
    statement: str
    family: str
    metric: str
    comparison: str
    threshold: object  # number, [lo, hi] for "between", band name for "in_band"
    reference: str  # the paper's number, as the paper gives it
    source: str  # the paper's model and data
    rationale: str  # why this comparison/threshold (ours where the paper is qualitative)
    tolerance: float  # allowed |measured - recorded baseline|
    tolerance_rationale: str
    params: dict = field(default_factory=dict)
    requires: dict = field(default_factory=dict)  # {"min_layers": 12, "mlm_head": true}
    learned: bool = True  # a claim about learned structure: must not hold on a random-init model
    reference_value: float | None = None
    # further passes the metric reads beside the target's: [{family, corpus, model}] with any key left out meaning
    # "the target's"; model = "other" means each other model of the run. The metric gets them as ``passes``.
    inputs: list = field(default_factory=list)
    judged_on: str | None = None  # a claim over several corpora is judged once, on this corpus's pass
    interval_z: float = 1.96  # the interval of a value with a standard error: ± z SE (1.96: 95%)
    # reads the trained models its passes record (the learned-model guard applies); a list: only those of them (a
    # pass's checks by key, e.g. the probes it compares)
    reads_trained: bool | list = True
    reads_degenerate: bool = False  # its subject is a degenerate (not learned) run itself: judged regardless
    # the row of the claims catalog (docs/claims.md; the project's shared/claims-catalog.md) this entry tests: its own
    # id where left out; another id for a variant (the fine-tuned form, a per-task or a controlled reading of a
    # catalog claim); false for an addition of the project's that has no row there
    catalog: str | bool | None = None
    # the claim this entry is another reading of (the norms family's ||alpha f|| row of a Clark weight claim): the
    # claims matrix shows the two rows together
    pairs: str | None = None
    # the value is a property of the machine's kind (a wall-clock speed-up): a recorded value is checked only on the
    # device type it was recorded on (cpu, cuda, mps); on another it is reported beside the baseline, not checked
    per_device: bool = False
    # what the regression check holds to the recorded baseline: "value" (the value within the tolerance, the same
    # verdict, the same n) or "verdict" (the same verdict and n, the value reported beside the recorded one, not
    # compared): a wall-clock value differs between two machines of one kind (the speed-up: +6 on CI's 2 cores, +15 to
    # +50 on this project's; docs/tolerances.md#michelprune_speedup), its verdict must not
    checked: str = "value"
    # why the value carries no interval: it is exact by nature (a model-free statistic of a fixed table, an identity,
    # a count over a whole fixed corpus with no sampling and no trained part); every other judged value carries an
    # interval or bounds covering its randomness: the data sample's and, for a trained part, the seed's (issue 61)
    exact: str | None = None

    @property
    def catalog_id(self) -> str | None:
        """The catalog claim this entry tests (None: an addition with no catalog row)."""
        return self.id if self.catalog is None else (self.catalog or None)

    def describe_comparison(self) -> str:
        if self.comparison == "between":
            lo, hi = self.threshold
            return f"in [{lo}, {hi}]"
        if self.comparison == "in_band":
            lo, hi = DEPTH_BANDS[self.threshold]
            return f"{self.threshold} ({lo:.2f}, {hi:.2f}] of depth"
        return f"{self.comparison} {self.threshold}"

    def compare(self, value: float) -> bool:
        t = self.threshold
        if math.isnan(value):
            return False
        if self.comparison == ">":
            return value > t
        if self.comparison == ">=":
            return value >= t
        if self.comparison == "<":
            return value < t
        if self.comparison == "<=":
            return value <= t
        if self.comparison == "between":
            return t[0] <= value <= t[1]
        return in_band(value, t)

    def verdict_pinned(self, recorded: float, tolerance: float | None = None) -> bool:
        """False when the comparison's threshold lies within ``recorded ± tolerance`` (default the claim's): on
        another machine or thread count the value may land on either side, so the verdict is not a regression
        check."""
        tolerance = self.tolerance if tolerance is None else tolerance
        if not tolerance or self.comparison == "in_band":
            return True
        lo, hi = recorded - tolerance, recorded + tolerance
        bounds = self.threshold if self.comparison == "between" else [self.threshold]
        return not any(lo <= b <= hi for b in bounds)

    def interval(self, value: float, standard_error: float | None,
                 bounds: tuple[float, float] | None = None,
                 seed_half: float | None = None) -> tuple[list[float] | None, float | None]:
        """([lo, hi], margin to the nearest threshold) when the value has a standard error (value ± z SE), explicit
        ``bounds`` (:attr:`Measurement.bounds`) or a seed half-width (``seed_half``: what the training seed moves a
        one-seed value by, :func:`stats.seed_half_width`) and the comparison a numeric threshold; the claim is
        inconclusive when a threshold lies in [lo, hi]. The seed's half-width is added to the data's: in quadrature
        to a standard error's, on each side of explicit bounds."""
        from .stats import combined_half_width

        extra = float(seed_half) if seed_half is not None and math.isfinite(seed_half) else None
        if (standard_error is None and bounds is None and extra is None) or math.isnan(value):
            return None, None
        thresholds = self._edges()
        margin = min((value - b for b in thresholds), key=abs)
        extra = extra or 0.0
        if bounds is not None:
            return [float(bounds[0]) - extra, float(bounds[1]) + extra], margin
        half = combined_half_width(None if standard_error is None else self.interval_z * standard_error, extra)
        return [value - half, value + half], margin

    def _edges(self) -> list[float]:
        """The numbers where the verdict changes side: the threshold, both ends of "between", a depth band's edges."""
        if self.comparison == "in_band":
            return list(DEPTH_BANDS[self.threshold])
        return list(self.threshold) if self.comparison == "between" else [self.threshold]

    def threshold_inside(self, interval: list[float]) -> bool:
        """Whether ``interval`` ([lo, hi], :meth:`interval`) holds values on both sides of the comparison: the verdict
        is then inconclusive. Exact at the threshold itself (``>= 13`` with bounds [13, 14] holds: every value in
        them does; ``> 13`` with the same bounds is inconclusive), which matters for counts. An interval of width 0
        (no resample moved the value) is exact, never inconclusive."""
        lo, hi = interval
        if not hi > lo:
            return False
        if self.comparison == "in_band":  # a depth (k/L) band (a, b]: inside and outside both within [lo, hi]
            a, b = DEPTH_BANDS[self.threshold]
            eps = 1e-9
            if not a < b:  # "last": exactly depth 1
                return lo < b - eps and hi >= b - eps
            has_in = lo <= b + eps and hi > a + eps
            has_out = lo <= a + eps or hi > b + eps
            return has_in and has_out
        if self.comparison == "between":
            a, b = self.threshold
            return lo < a <= hi or lo <= b < hi
        t = self.threshold
        if self.comparison in (">=", "<"):  # the sides meet at t, which belongs to the upper one
            return lo < t <= hi
        return lo <= t < hi  # ">", "<=": t belongs to the lower side

    def side(self, value: float, standard_error: float | None = None, bounds: tuple[float, float] | None = None,
             seed_half: float | None = None) -> str:
        """The verdict :func:`evaluate` gives a measured value, before any baseline or learned-model guard: "holds",
        "does not hold" or "inconclusive"."""
        interval, _ = self.interval(value, standard_error, bounds, seed_half)
        if interval is not None and self.threshold_inside(interval):
            return "inconclusive"
        return "holds" if self.compare(value) else "does not hold"

    def unmet_requirement(self, info, corpus: str | None = None, assume_shape: str | None = None) -> str | None:
        if self.judged_on and corpus is not None and corpus != self.judged_on:
            return f"judged once per model, on the {self.judged_on} pass (it reads {self.inputs})"
        if self.requires.get("unavailable"):
            return self.requires["unavailable"]
        need_layers = self.requires.get("min_layers")
        if need_layers and info.n_layers < need_layers:
            return (f"needs {need_layers} layers (the claim names bert-base layer/head ids); "
                    f"{info.name} has {info.n_layers}")
        if self.requires.get("mlm_head") and not info.has_mlm_head:
            return f"needs a masked-LM head; {info.name} has none"
        shape = self.requires.get("model_type")
        if shape:
            want = SHAPES.get(shape)
            have = (info.n_layers, info.n_heads, int(info.extra.get("hidden_size", 0)))
            assumed = assume_shape == shape  # the run's assume_shape option ($BERTATTN_ASSUME_SHAPE as read)
            if want is None:
                return f"unknown model shape {shape!r} (known: {', '.join(SHAPES)})"
            if have != want and not assumed:
                return (f"the claim names {shape}'s heads and needs its shape (layers, heads, hidden) = {want}; "
                        f"{info.name} has {have} (set {ASSUME_SHAPE_ENV}={shape} to judge it anyway)")
        return None
