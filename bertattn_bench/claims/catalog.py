"""Claims are data: entries in ``reference_numbers/<paper>_<family>.toml``, each naming one metric function.

Evaluating a claim gives a :class:`ClaimOutcome` with two separate judgements:

* ``holds`` — the paper's claim, by its comparison, on this model (a claim that does not hold is a finding);
* ``baseline_ok`` — the measured value equals the model's recorded baseline within the claim's tolerance
  (the regression check). pytest's pass/fail follows ``baseline_ok`` when a baseline exists, else ``holds``.

Where the metric gives the value's standard error (``Measurement.standard_error``), the outcome carries the
interval value ± ``interval_z`` x SE (95% by default) and is **inconclusive** when a threshold lies inside it: the
verdict then reads e.g. ``does not hold (inconclusive: margin -0.93 ± 7.7, 95% CI)``, its side is reported but not
checked against the baseline, and without a baseline it does not fail (the value check stays).

A claim that reads a trained model which did not learn (:mod:`bertattn_bench.claims.learned`: a fine-tune at its majority
class) is **not judged**: ``not_judged`` holds the reason with its numbers, ``verdict`` reads ``not judged: ...``,
and it does not count as holding. Without a baseline it is reported, not failed; against a recorded baseline where
the claim was judged it fails the check (a lost judgement); where the baseline was not judged either, the check
passes when n is the same. Entries with ``reads_degenerate = true`` (their subject is the degenerate run itself)
or ``reads_trained = false`` (they read only the pre-trained model or the data) are judged regardless.
"""
from __future__ import annotations

import math
import tomllib  # Python 3.11+: the version pyproject.toml declares
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..base import resources
from ..base.errors import BenchError
from ..base.settings import ASSUME_SHAPE_ENV
from . import learned
from .recorded import device_type, recorded_device
from .registry import DEPTH_BANDS, Measurement, NotApplicable, in_band, load_all_metrics
from .verdicts import HOLDS, INCONCLUSIVE, NOT_JUDGED, SKIPPED, lost, verdict_of

REFERENCE_DIR = resources.folder(resources.REFERENCE_NUMBERS)  # the catalog (*.toml) and baselines/
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

        seeded = seed_half is not None and math.isfinite(seed_half)
        if (standard_error is None and bounds is None and not seeded) or math.isnan(value):
            return None, None
        thresholds = self._edges()
        margin = min((value - b for b in thresholds), key=abs)
        extra = seed_half if seeded else 0.0
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


def _claims_from_file(path: Path) -> list[Claim]:
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise BenchError(f"{path}: invalid TOML: {exc}") from exc
    meta = doc.get("meta", {})
    defaults = doc.get("defaults", {})  # shared values of the file's claims (an entry overrides them)
    out = []
    for i, entry in enumerate(doc.get("claim", [])):
        merged = {"paper": meta.get("paper"), "family": meta.get("family"), "source": meta.get("source"),
                  **defaults, **entry}
        try:
            claim = Claim(**merged)
        except TypeError as exc:
            raise BenchError(f"{path}: claim #{i + 1} ({entry.get('id', '?')}): {exc}") from exc
        if not (claim.catalog is None or claim.catalog is False or isinstance(claim.catalog, str) and claim.catalog):
            raise BenchError(f"{path}: claim {claim.id}: catalog must be a claim id of the catalog or false, "
                             f"got {claim.catalog!r}")
        if claim.comparison not in COMPARISONS:
            raise BenchError(f"{path}: claim {claim.id}: unknown comparison {claim.comparison!r}")
        if claim.exact is not None and not (isinstance(claim.exact, str) and claim.exact.strip()):
            raise BenchError(f"{path}: claim {claim.id}: exact must say why the value has no randomness, got "
                             f"{claim.exact!r}")
        if claim.checked not in CHECKED:
            raise BenchError(f"{path}: claim {claim.id}: checked must be one of {', '.join(CHECKED)}, "
                             f"got {claim.checked!r}")
        if claim.checked == "verdict" and claim.tolerance:
            raise BenchError(f"{path}: claim {claim.id}: checked = \"verdict\" compares no value: its tolerance must "
                             f"be 0, got {claim.tolerance!r}")
        t = claim.threshold
        if claim.comparison == "in_band" and t not in DEPTH_BANDS:
            raise BenchError(f"{path}: claim {claim.id}: unknown depth band {t!r} (known: {', '.join(DEPTH_BANDS)})")
        if claim.comparison == "between" and not (isinstance(t, list) and len(t) == 2):
            raise BenchError(f"{path}: claim {claim.id}: 'between' needs threshold = [low, high], got {t!r}")
        if claim.comparison not in ("in_band", "between") and not isinstance(t, (int, float)):
            raise BenchError(f"{path}: claim {claim.id}: comparison {claim.comparison!r} needs a number, got {t!r}")
        out.append(claim)
    return out


def load_claims(directory: Path = REFERENCE_DIR, family: str | None = None) -> list[Claim]:
    """All claim entries (optionally of one family); every metric they name must exist."""
    metrics = load_all_metrics()
    files = sorted(Path(directory).glob("*.toml"))
    if not files:
        raise BenchError(f"no claims catalog: {directory} holds no *.toml file (the package's reference_numbers/; "
                         f"reinstall bertattn-bench or run from a full checkout)")
    claims = [c for p in files for c in _claims_from_file(p)]
    ids = [c.id for c in claims]
    dupes = {i for i in ids if ids.count(i) > 1}
    if dupes:
        raise BenchError(f"duplicate claim ids in {directory}: {sorted(dupes)}")
    for c in claims:
        if c.metric not in metrics:
            raise BenchError(f"claim {c.id}: unknown metric {c.metric!r} (registered: {sorted(metrics)})")
        if c.pairs is not None and (c.pairs not in ids or c.pairs == c.id):
            raise BenchError(f"claim {c.id}: pairs = {c.pairs!r} names no other claim of {directory}")
    return [c for c in claims if family is None or c.family == family]


def claim_families(directory: Path = REFERENCE_DIR) -> dict[str, str]:
    """Claim id -> its family, read from the catalog's TOML files alone (no metric is imported: light)."""
    return {c.id: c.family for p in sorted(Path(directory).glob("*.toml")) for c in _claims_from_file(p)}


def claim_pairs(directory: Path = REFERENCE_DIR) -> dict[str, str]:
    """Claim id -> the claim it is another reading of (its ``pairs`` key), from the TOML files alone (light)."""
    return {c.id: c.pairs for p in sorted(Path(directory).glob("*.toml")) for c in _claims_from_file(p) if c.pairs}


def catalog_claims(claims: list[Claim] | None = None) -> dict[str, list[Claim]]:
    """The catalog's claims, each with the entries that test it (one, or a claim and its variants); the entries
    that are additions of the project (``catalog = false``) are left out."""
    out: dict[str, list[Claim]] = {}
    for c in load_claims() if claims is None else claims:
        if c.catalog_id is not None:
            out.setdefault(c.catalog_id, []).append(c)
    return out


# ---- recorded baselines -------------------------------------------------------------------------------------

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


def seed_interval(claim: Claim, key: str, m: Measurement, seed_spread: dict | None) -> tuple[float | None, str]:
    """(the half-width the training seed adds to a one-seed value's interval, its note for ``detail``) from the seed
    spread recorded for ``key`` (``claim@corpus``; :func:`baselines.seed_spreads`); (None, "") where the metric's own
    interval already holds its seeds (``Measurement.values["seeds"]`` >= 2: a tier that trained several) or no spread
    is recorded."""
    from .stats import seed_half_width

    if int(m.values.get("seeds", 1) or 1) >= 2:
        return None, ""
    spread = (seed_spread or {}).get(key)
    if not spread or spread.get("k", 0) < 2:
        return None, ""
    half = seed_half_width(spread["sd"], spread["k"], claim.interval_z)
    if not math.isfinite(half):
        return None, ""
    return half, (f" [seed: sd {spread['sd']:.3g} over {spread['k']} seeds {spread.get('seeds')} "
                  f"({spread.get('source', 'recorded')}), ± {half:.3g} in the interval]")


def evaluate(claim: Claim, pass_result, baseline: dict | None = None, mode: str = "own",
             others=None, limit: int | None = None, compare_fail_on: str = "lost",
             assume_shape: str | None = None, seed_spread: dict | None = None) -> ClaimOutcome:
    """Measure ``claim`` on a pass result and judge it against the paper and against a recorded baseline.

    ``mode="own"``: the baseline is this model's; the check is value within tolerance, same verdict, same n.
    ``mode="compare"``: the baseline is another model's (model A); the check fails only on a regression, a
    claim that held on A and does not hold here.
    ``limit``: the run's ``--limit``; where it makes n differ from the recorded n, the value and verdict are another
    sample's: reported with the baseline, not checked (``detail`` says so), the check passes.
    ``seed_spread``: this model's recorded seed spreads (``claim@corpus`` -> :func:`baselines.seed_spreads`' entry):
    a one-seed value read from a trained part carries the seed's half-width in its interval.
    """
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
            m = load_all_metrics()[claim.metric](pass_result, **claim.params, **extra)
        except NotApplicable as exc:
            reason = str(exc)
    if m is None:
        return ClaimOutcome(**base, measured=None, unit="", n=pass_result.n_examples, n_unit="examples",
                            holds=None, head=None, detail="", skipped=reason, passed=None)
    extra = pass_result.skipped.describe()
    base["corpus"] = label = corpus_label(pass_result, resolved)
    if claim.inputs:
        base["data"] = pass_result.data + "".join(f" + {p.model.name} / {p.family}:{p.corpus} ({p.data})"
                                                  for p in resolved)
    out = ClaimOutcome(**base, measured=m.value, unit=m.unit, n=m.n, n_unit=m.n_unit, holds=claim.compare(m.value),
                       head=m.head, detail=m.detail + (f" [{extra}]" if extra else ""), values=dict(m.values),
                       exact=claim.exact)
    seed_half, seed_note = seed_interval(claim, baseline_key(claim.id, label), m, seed_spread)
    if seed_half == 0 and m.standard_error is None and m.bounds is None:
        # the seeds never moved it: the seed adds nothing, and a width-0 interval would claim the data's sample is
        # exact too; the value stays without an interval (the interval audit lists it) and the detail says why
        seed_half, seed_note = None, seed_note.replace(", ± 0 in the interval]", ": the seed does not move it]")
    out.interval, out.margin = claim.interval(m.value, m.standard_error, m.bounds, seed_half)
    if out.interval is not None:
        out.detail += seed_note
    keys = claim.reads_trained if isinstance(claim.reads_trained, list) else None
    untrained = learned.not_learned(pass_result, *resolved, keys=keys) \
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
    recorded = (baseline or {}).get("results", {}).get(baseline_key(claim.id, label))
    if recorded is None:
        out.passed = True if mode == "compare" else (out.holds or out.inconclusive or bool(out.not_judged))
        return out
    out.baseline, out.baseline_holds = recorded["measured"], recorded["holds"]
    out.baseline_verdict = verdict_of(recorded)
    out.baseline_model = (baseline or {}).get("provenance", {}).get("model")
    if recorded["measured"] is not None:
        out.delta = m.value - recorded["measured"]
    if limit is not None and recorded.get("n") != m.n:  # a --limit sample: not the recorded measurement
        out.detail += f" [not checked: recorded n={recorded.get('n')}, this run n={m.n} (--limit {limit})]"
        out.passed = True
        return out
    if claim.per_device and mode != "compare":
        here, there = device_type(info.device), device_type(recorded_device(baseline, recorded))
        if there is not None and here != there:  # a timing of another kind of device: no regression to check
            out.detail += (f" [not checked: a wall-clock value, recorded on {there}, measured here on {here}; the "
                           f"verdict is this device's]")
            out.passed = True
            return out
    if mode == "compare":  # model A's verdict against this one's, by the --compare-fail-on policy
        # lost: clearly held on A, does not hold or is inconclusive here (verdicts.lost); a judgement lost too
        out.baseline_ok = {"lost": not (lost(recorded, out) or verdict_of(recorded) == HOLDS and out.not_judged),
                           "flips": bool(recorded["holds"]) == bool(out.holds),
                           "never": True}[compare_fail_on]
    else:
        # the entry's own tolerance where its spread was measured (a tier whose values move more than the claim's
        # tolerance allows: the quick tier's 64 dev pairs; scripts/spread.py), never narrower than the claim's
        tol = max(claim.tolerance, float(recorded.get("tolerance") or 0.0)) if claim.checked == "value" else 0.0
        out.tolerance = tol if claim.checked == "value" else None
        within = claim.checked == "verdict" or out.delta is not None and abs(out.delta) <= tol + 1e-9
        if claim.checked == "verdict" and recorded["measured"] is not None:
            out.detail += (f" [the value is this machine's, not compared (recorded {recorded['measured']:.4g}); the "
                           f"verdict is checked]")
        # a verdict is pinned to the recorded one unless the threshold lies inside the recorded value's tolerance
        # band (then the measured noise decides the side, and the verdict is reported, not checked)
        pinned = recorded["measured"] is None or claim.verdict_pinned(recorded["measured"], tol)
        # an inconclusive verdict (now or when recorded) is noise: reported, not checked
        pinned = pinned and not out.inconclusive and not recorded.get("inconclusive")
        # (a not-judged baseline recorded no side, or "does not hold" before issue 44: either reads as not holding)
        same_side = bool(recorded["holds"]) == bool(out.holds)
        out.baseline_ok = within and (same_side or not pinned) and recorded.get("n") == m.n
        if out.not_judged:  # a lost judgement fails; not judged now and then: the same n passes
            within, pinned = True, False
            out.baseline_ok = bool(recorded.get("not_judged")) and recorded.get("n") == m.n
        if within and not pinned and not out.not_judged:
            out.detail += (f" [verdict within noise: the threshold lies inside the recorded {recorded['measured']:.4g}"
                           f" ± {tol:g}]")
        if not out.baseline_ok:
            out.check_failure = ", ".join(part for part, bad in (
                ("no recorded value" if out.delta is None else
                 f"value off by {out.delta:+.4g} (tolerance {tol:g})", not within),
                (f"verdict {out.verdict!r} where the baseline {'holds' if recorded['holds'] else 'does not hold'}",
                 not same_side and pinned),
                (f"n {m.n} where the baseline has {recorded.get('n')}", recorded.get("n") != m.n),
                ("not judged where the baseline was judged (a lost judgement)",
                 bool(out.not_judged) and not recorded.get("not_judged"))) if bad)
    out.passed = out.baseline_ok
    return out
