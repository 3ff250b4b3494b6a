"""The metric registry: claims name a metric function; the function reads a pass result and returns a Measurement.

Adding a claim takes one declarative entry in ``reference_numbers/*.toml`` and at most one small function here
(decorated with :func:`metric` in the module of its concern).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable

from ..base.plotting import pyplot
from . import tiers

METRICS: dict[str, Callable] = {}
FAMILIES: dict[str, "Family"] = {}
FIGURES: dict[str, Callable] = {}  # family -> fn(pass_results: list[PassResult], directory: Path) -> list[Path]
FAMILIES_PACKAGE = f"{__name__.split('.')[0]}.families"  # where the claim families live (each registers on import)

# Relative-depth bands (Clark's layers rescaled: layer k of L sits at k/L). Thirds as in the claims catalogue:
# early = L1-4 of 12 and L1-2 of 6; middle = L5-8 / L3-4; late = L9-12 / L5-6.
DEPTH_BANDS = {
    "early": (0.0, 1 / 3),
    "middle": (1 / 3, 2 / 3),
    "late": (2 / 3, 1.0),
    "first_half": (0.0, 0.5),
    "last": (1.0, 1.0),
}


class NotApplicable(Exception):
    """The metric cannot be measured on this model or data; the message says why (the claim is skipped)."""


@dataclass
class NothingToMeasure:
    """A pass result that holds no statistics, only why (e.g. no MLM head): the layer that calls the metrics skips
    its claims with ``reason`` (:func:`bertattn_bench.claims.checks.measure`; no metric sees it) and nothing is
    timed."""

    reason: str


@dataclass
class Measurement:
    value: float
    n: int  # how much data the value rests on (segments, arcs, sentences...)
    n_unit: str
    detail: str = ""
    head: str | None = None  # "layer-head", 1-based, for per-head results
    unit: str = ""
    # the value's standard error (its units), where the metric can say how far sampling moves it (a binomial SE for
    # an accuracy over n anaphors/arcs); a claim on it is "inconclusive" when its threshold lies in the interval
    standard_error: float | None = None
    # explicit bounds [lo, hi] of the value where two tests bracket it rather than a standard error (e.g. the share of
    # heads shown unchanged by an equivalence test, and the share not shown changed): the claim is inconclusive when
    # its threshold lies between them; used instead of value ± z SE
    bounds: tuple[float, float] | None = None
    # named values a script reads (e.g. the structural probe's chosen layer), so nothing parses ``detail``'s wording;
    # they reach the report's claims.json as the outcome's ``values``
    values: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Family:
    """A claim family: how to prepare its pass over one corpus, which corpora it knows, and the default."""

    name: str
    prepare: Callable  # (loaded, data_dir, corpus, limit=None, batch_size=32) -> passes.Pass
    corpora: tuple[str, ...]
    default_corpus: str
    tier_corpora: dict | None = None  # families that train: {tier: default corpora}
    # the quick tier's example cap of a forward family (its corpus otherwise read whole); None: the quick tier reads
    # it whole (a pass of seconds). Families that train cap inside their prepare (their TIERS)
    quick_limit: int | None = None
    # trains inside its pass or reads a fine-tuned checkpoint: its prepare takes the training ``options`` (tier,
    # checkpoint cache, progress), and torch's thread count is part of its cache key (cache.threads_matter)
    trains: bool = False

    def default_corpora(self, tier: str = tiers.RECORDED) -> list[str]:
        if self.tier_corpora:
            return list(self.tier_corpora[tier])
        return [self.default_corpus]

    def tier_limit(self, tier: str, limit: int | None) -> tuple[int | None, str | None]:
        """(example limit, the tier that set it) for a run at ``tier`` with ``--limit`` = ``limit``: an explicit
        limit wins (no tier in the label: the user chose n); the quick tier caps where the family has a cap."""
        from .tiers import QUICK

        if limit is None and tier == QUICK and self.quick_limit is not None:
            return self.quick_limit, QUICK
        return limit, None


def _redefined(old, new) -> bool:
    """Two different functions under one name. The same function defined again (its module imported a second time,
    e.g. after pytest's in-process runs restore ``sys.modules``) replaces the first."""
    return old is not new and (old.__module__, old.__qualname__) != (new.__module__, new.__qualname__)


def family(name: str, corpora: tuple[str, ...], default_corpus: str, tier_corpora: dict | None = None,
           quick_limit: int | None = None, trains: bool = False):
    """Register a family's prepare function (it returns a ``bertattn_bench.engine.passes.Pass``)."""
    def register(fn):
        if name in FAMILIES and _redefined(FAMILIES[name].prepare, fn):
            raise ValueError(f"family {name!r} registered twice")
        FAMILIES[name] = Family(name, fn, tuple(corpora), default_corpus, tier_corpora, quick_limit, trains)
        return fn

    return register


def figure(family_name: str, result: type | tuple[type, ...] | None = None, each: bool = False):
    """Register a figure writer for a family: ``fn(pass_results, directory) -> list[Path]`` (matplotlib, Agg).
    ``result``: the result type(s) it draws; the writer is then given only the passes whose result is one (a pass
    that measured nothing never reaches it), called directly or by the report. ``each``: the writer draws one pass,
    ``fn(pr, plt, directory) -> list[Path]`` with ``plt`` the Agg pyplot; the loop over the passes is this one's.
    Either way the registered writer takes the list of pass results."""
    def register(fn):
        def chosen(pass_results):
            return [p for p in pass_results if result is None or isinstance(getattr(p, "result", None), result)]

        @functools.wraps(fn)
        def writer(pass_results, directory):
            if not each:
                return fn(chosen(pass_results), directory)
            plt = pyplot()  # matplotlib imported here, at the first figure, not when the registry is
            return [path for pr in chosen(pass_results) for path in fn(pr, plt, directory)]
        if family_name in FIGURES and _redefined(FIGURES[family_name], writer):
            raise ValueError(f"figure writer for family {family_name!r} registered twice")
        FIGURES[family_name] = writer
        return writer

    return register


def metric(name: str):
    def register(fn):
        if name in METRICS and _redefined(METRICS[name], fn):
            raise ValueError(f"metric {name!r} registered twice")
        METRICS[name] = fn
        return fn

    return register


def relative_depth(layer0: int, n_layers: int) -> float:
    """0-based layer → k/L with k 1-based."""
    return (layer0 + 1) / n_layers


def in_band(depth: float, band: str) -> bool:
    lo, hi = DEPTH_BANDS[band]
    eps = 1e-9
    return (lo + eps < depth <= hi + eps) if lo < hi else abs(depth - hi) < eps


def load_all_metrics() -> dict[str, Callable]:
    """Import every module of :data:`FAMILIES_PACKAGE` so metrics, families and figure writers register. The
    registry sits on the claims floor and the families above it: they are found by name, as plugins are (no import
    statement names a higher floor)."""
    import importlib
    import pkgutil

    package = importlib.import_module(FAMILIES_PACKAGE)
    for mod in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{FAMILIES_PACKAGE}.{mod.name}")
    return METRICS


def families() -> dict[str, Family]:
    load_all_metrics()
    return FAMILIES
