"""pytest plugin: options, session-wide passes shared by every claim of a family, and the claim table.

Registered through the package's ``pytest11`` entry point. A benchmark module sets ``FAMILY = "surface"`` (one
family) or ``FAMILY = "*"`` (every registered family: ``benchmarks/test_claims.py``) and defines

* ``test_attention_core(benchmark, bench, target)`` — times the attention core once per (model, corpus) and
  keeps the pass result for the claims;
* ``test_claim(bench, claim, target)`` — one test per (claim, model, corpus); it reads the shared result.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from . import tiers
from .cache import CACHE_ENV, PassCache
from .baselines import describe_data
from .claims import REFERENCE_DIR, ClaimOutcome, baseline_path, evaluate, load_baseline, load_claims
from .errors import BenchError
from .model import EMBEDDED, RANDOM_PREFIX, load_model
from .report import _num
from .passes import NothingToMeasure, PassResult
from .registry import families
from .settings import (DATA_DIR_ENV, DEVICE_ENV, MODEL_ENV, output_dir, parse_corpus_options, parse_random_model,
                       positive_int, resolve_data_dir)


def pytest_addoption(parser):
    g = parser.getgroup("bertattn", "bertattn-bench claim benchmarks")
    g.addoption("--model", action="append", default=None,
                help=f"model to test: 'embedded' (default), a local folder, a Hugging Face name, or "
                     f"'random:<model>[@seed]' (random-init twin). Repeatable. Env: {MODEL_ENV} (comma-separated)")
    g.addoption("--data-dir", default=None, help=f"folder with the data sets (env: {DATA_DIR_ENV})")
    g.addoption("--device", default=None, help=f"auto (default: CUDA when present), cpu, cuda, cuda:N (env: {DEVICE_ENV})")
    g.addoption("--corpus", action="append", default=[],
                help="family=corpus[,corpus] e.g. dependency=ewt_dev,gum_dev (defaults: "
                     + ", ".join(f"{f.name}={f.default_corpus}" for f in families().values()) + ")")
    g.addoption("--limit", type=int, default=None, help="at most N examples per corpus (quick runs; n is reported)")
    g.addoption("--batch-size", type=int, default=32, help="examples per forward pass (default 32)")
    g.addoption("--claims-report", default=None, metavar="DIR", help="write claims.md, claims.csv, claims.json to DIR")
    g.addoption("--record-baseline", default=None, metavar="DIR", nargs="?", const="reference_numbers/baselines",
                help="record every measured claim value as the model's baseline (default DIR reference_numbers/baselines)")
    g.addoption("--compare-to", default=None, metavar="MODEL_OR_JSON",
                help="judge every model against another model's recorded baseline (a model name/slug or a baseline "
                     "JSON file): a claim that held there and does not hold here is a regression (test fails)")
    g.addoption("--cache-dir", default=None, help=f"pass-result cache (default .bertattn_cache; env {CACHE_ENV})")
    g.addoption("--no-cache", action="store_true", help="recompute every pass; read and write no cache")
    g.addoption("--time-cores", action="store_true",
                help="recompute and time every pass even when the cache holds it (default: a cached pass is loaded "
                     "and not timed, so a warm re-run takes seconds)")
    g.addoption("--tier", default=None, choices=tiers.NAMES,
                help="budget (env BERTATTN_TIER): quick (default) = a smoke run of every family in minutes, capped "
                     "samples and one short MRPC fine-tune; regression = the recorded tier (whole dev corpora, MRPC "
                     "3 epochs, one seed; ~23 min on 2 cores); full = MRPC, RTE, STS-B, SST-2 with 3 seeds on MRPC "
                     "and RTE, the fine-tuned twin (hours). A tier other than regression is part of the corpus label")


@dataclass(frozen=True)
class Target:
    model: str
    corpus: str
    family: str

    @property
    def id(self) -> str:
        return f"{model_id(self.model)}-{self.corpus}"


def model_id(name: str) -> str:
    if name in (EMBEDDED, "", None):
        return "minilm"
    if name.startswith(RANDOM_PREFIX):
        return "random-" + model_id(name[len(RANDOM_PREFIX):].split("@")[0] or EMBEDDED)
    return Path(name).name or name


def requested_models(config) -> list[str]:
    names = config.getoption("--model") or [m for m in os.environ.get(MODEL_ENV, "").split(",") if m] or [EMBEDDED]
    return list(dict.fromkeys(names))


TIER_ENV = "BERTATTN_TIER"


def requested_tier(config) -> str:
    tier = config.getoption("--tier") or os.environ.get(TIER_ENV) or tiers.DEFAULT
    try:
        return tiers.check(tier, f"{TIER_ENV}=")
    except BenchError as exc:
        raise pytest.UsageError(str(exc)) from None


def family_limit(config, family: str) -> tuple[int | None, str | None]:
    """(example limit, tier that set it) of a family's pass: --limit, else the quick tier's cap, else none."""
    return families()[family].tier_limit(requested_tier(config), config.getoption("--limit"))


def requested_corpora(config, family: str) -> list[str]:
    fams = families()
    try:
        chosen = parse_corpus_options(config.getoption("--corpus"), {f.name: tuple(f.corpora) for f in fams.values()})
    except BenchError as exc:
        raise pytest.UsageError(str(exc)) from None
    return chosen.get(family) or fams[family].default_corpora(requested_tier(config))


class BenchSession:
    """Everything computed in this pytest session, shared by the tests: models, passes, outcomes."""

    def __init__(self, config):
        self.config = config
        self.models: dict[str, object] = {}
        self.results: dict[Target, PassResult] = {}
        self.outcomes: list[ClaimOutcome] = []  # collected from test reports (also from xdist workers)
        self.passes: list[dict] = []  # pass summaries from test reports: timings, model provenance
        self.current_item = None
        self._data_dir = None
        self._compare = None
        cache_dir = None if config.getoption("--no-cache") else Path(
            config.getoption("--cache-dir") or os.environ.get(CACHE_ENV) or Path(config.rootpath) / ".bertattn_cache")
        self.cache = PassCache(cache_dir)

    @property
    def data_dir(self) -> Path:
        if self._data_dir is None:
            self._data_dir = resolve_data_dir(self.config.getoption("--data-dir"))
        return self._data_dir

    def model(self, name: str, at_startup: bool = False):
        """Load once per session; a load error is kept and reported (cleanly, once per test) without retrying;
        ``at_startup``: as a usage error that stops the run."""
        if name not in self.models:
            device = self.config.getoption("--device") or os.environ.get(DEVICE_ENV)
            try:
                self.models[name] = load_model(name, device=device)
            except BenchError as exc:
                self.models[name] = exc
        loaded = self.models[name]
        if isinstance(loaded, BenchError):
            message = str(loaded) if str(loaded).startswith("--model") else f"--model {name}: {loaded}"
            if at_startup:
                raise pytest.UsageError(message)
            pytest.fail(message, pytrace=False)
        return loaded

    def prepare(self, target: Target):
        loaded = self.model(target.model)
        fam = families()[target.family]
        prepare = fam.prepare
        kwargs = {}
        if fam.trains:  # families that train: tier, checkpoint cache
            kwargs["options"] = {"tier": requested_tier(self.config), "cache_dir": self.cache.directory,
                                 "progress": not os.environ.get("CI")}
        try:
            return prepare(loaded, self.data_dir, target.corpus, limit=family_limit(self.config, target.family)[0],
                           batch_size=self.config.getoption("--batch-size"), **kwargs)
        except BenchError as exc:
            pytest.fail(f"{target.family} / {target.corpus}: {exc}", pytrace=False)

    def _cached(self, target: Target, compute, prepared, force: bool = False) -> PassResult:
        info = prepared.loaded.info
        limit, tier = family_limit(self.config, target.family)
        key = self.cache.key(target.family, target.corpus, info, prepared, {"limit": limit, "data": prepared.data})
        path = self.cache.path(info.slug, target.family, target.corpus, key) if self.cache.directory else None
        result, hit = self.cache.get_or_compute(path, compute, force=force)
        result.tier = tier  # a capped quick-tier sample: in the corpus label, so it is never judged as the whole corpus
        self.results[target] = result
        data_files = describe_data(list(getattr(prepared, "data_paths", [])), self.data_dir, self.cache.digests)
        self._publish_pass(target, result, cached=hit, path=path, data_files=data_files)
        return result

    def result(self, target: Target) -> PassResult:
        """The pass for ``target``: from memory, else from the disk cache, else computed (and cached)."""
        if target not in self.results:
            prepared = self.prepare(target)
            self._cached(target, lambda: with_artifacts(self.config, prepared, prepared.run), prepared)
        return self.results[target]

    def _publish_pass(self, target: Target, r: PassResult, cached: bool, path: Path | None = None,
                      data_files: str = "") -> None:
        if self.current_item is not None:
            self.current_item.user_properties.append(("bertattn_pass", {
                "family": r.family, "corpus": r.corpus, "data": r.data, "model": r.model.name, "slug": r.model.slug,
                "source": r.model.source, "device": r.model.device, "attn_implementation": r.model.attn_implementation,
                "n_examples": r.n_examples, "seconds": r.seconds, "skipped": r.skipped.describe(), "cached": cached,
                "limit": self.config.getoption("--limit"), "cache_path": str(path) if path else None,
                "data_files": data_files}))

    def compare_baseline(self) -> dict:
        """The other model's baseline named by --compare-to (a JSON path, a model slug or name)."""
        if self._compare is None:
            self._compare = load_baseline_file(compare_to_path(self.config.getoption("--compare-to")))
        return self._compare

    def other_passes(self, claim, target: Target, negative_control: bool = False) -> list[PassResult]:
        """The further passes a claim names (``inputs``), resolved against this run; NotApplicable says why not."""
        from .registry import NotApplicable

        out = []
        for spec in claim.inputs:
            fam = spec.get("family", target.family)
            corpus = spec.get("corpus", target.corpus)
            if spec.get("model") == "other":
                models = [m for m in requested_models(self.config) if m != target.model and not negative_control]
                if not models:
                    raise NotApplicable("compares two models: run with a second --model")
            else:
                models = [spec.get("model", target.model)]
            if corpus not in requested_corpora(self.config, fam):
                raise NotApplicable(f"needs the {fam} pass on {corpus}, which this run does not include "
                                    f"(add --corpus {fam}=...,{corpus} or --tier full)")
            for m in models:
                out.append(self.result(Target(m, corpus, fam)))
        return out

    def outcome(self, claim, target: Target, negative_control: bool = False) -> ClaimOutcome:
        pr = self.result(target)
        others = lambda c: self.other_passes(c, target, negative_control)  # noqa: E731
        recording = self.config.getoption("--record-baseline")
        comparing = self.config.getoption("--compare-to") and not negative_control
        if comparing:
            out = evaluate(claim, pr, self.compare_baseline(), mode="compare", others=others)
        else:
            out = evaluate(claim, pr, None if (recording or negative_control) else load_baseline(pr.model.slug),
                           others=others)
        out.negative_control = negative_control
        if negative_control and out.skipped is None:
            # a learned-structure claim must fail on random weights, clearly (an inconclusive "does not hold" fails)
            out.passed = out.holds is False and not out.inconclusive
            out.comparison = f"NOT {out.comparison} (negative control)"
        elif recording and out.skipped is None and not comparing:
            out.passed = True  # recording: the value becomes the baseline; the verdict is still reported
        if self.current_item is not None:
            self.current_item.user_properties.append(("bertattn_outcome", out.record()))
        return out


def compare_to_path(name: str) -> Path:
    """The baseline file --compare-to names (a JSON path, a model slug or name); a usage error when there is none."""
    candidates = [Path(name), baseline_path(name), baseline_path(Path(name).name)]
    if name in ("embedded", ""):
        from .model import EMBEDDED_NAME

        candidates.insert(0, baseline_path(EMBEDDED_NAME))
    path = next((c for c in candidates if c.is_file()), None)
    if path is None:
        known = ", ".join(sorted(p.stem for p in baseline_path("x").parent.glob("*.json"))) or "none"
        raise pytest.UsageError(f"--compare-to {name}: no recorded baseline by that name or path (recorded: {known}; "
                                f"record one with --record-baseline)")
    return path


def load_baseline_file(path: Path) -> dict:
    import json

    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise pytest.UsageError(f"{path}: invalid baseline JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), dict):
        raise pytest.UsageError(f"{path}: not a baseline file (no \"results\" object)")
    return doc


def _bench(config) -> BenchSession:
    if not hasattr(config, "_bertattn_session"):
        config._bertattn_session = BenchSession(config)
    return config._bertattn_session


@pytest.fixture(scope="session")
def bench(request) -> BenchSession:
    return _bench(request.config)


EVERY_FAMILY = "*"  # a benchmark module's FAMILY that stands for every registered family (benchmarks/test_claims.py)


def paper_key(paper: str | None) -> str:
    """A claim's paper as a word for test ids and ``-k``: "Kovaleva et al. 2019" -> "kovaleva"."""
    return (paper or "other").split()[0].lower()


def module_families(module) -> list[str]:
    """The families a benchmark module's tests run: its ``FAMILY``, or every registered family for
    :data:`EVERY_FAMILY`, ordered by paper (the first claim's) and name."""
    family = getattr(module, "FAMILY", None)
    if family is None:
        return []
    if family != EVERY_FAMILY:
        return [family]
    from .registry import families

    def order(name: str):
        claims = load_claims(family=name)
        return (paper_key(claims[0].paper) if claims else "~", name)

    return sorted(families(), key=order)


def pytest_generate_tests(metafunc):
    """Parametrize a benchmark module's tests from the registry: ``target`` over (model, corpus) of each family,
    ``claim`` over the family's claims, jointly. Ids read ``paper-family-model-corpus[-claim]`` so that ``-k``
    selects by paper, family, model, corpus or claim."""
    fams = module_families(metafunc.module)
    if not fams:
        return
    names = [n for n in ("target", "claim") if n in metafunc.fixturenames]
    if not names:
        return
    params, ids = [], []
    catalog = load_claims()  # read once, split by family
    for family in fams:
        claims = [c for c in catalog if c.family == family]
        fam_paper = paper_key(claims[0].paper) if claims else "other"
        targets = [Target(m, c, family) for m in requested_models(metafunc.config)
                   for c in requested_corpora(metafunc.config, family)]
        for t in targets:
            if "claim" not in names:
                params.append(t)
                ids.append(f"{fam_paper}-{family}-{t.id}")
                continue
            for c in claims:
                params.append((t, c) if "target" in names else c)
                ids.append(f"{paper_key(c.paper)}-{family}-{t.id}-{c.id}")
    metafunc.parametrize(names if len(names) > 1 else names[0], params, ids=ids)


def failure_message(o: ClaimOutcome) -> str:
    if o.baseline_ok is not None and o.baseline_model and o.baseline_model != o.model:
        return (f"{o.claim_id} regressed on {o.model} / {o.corpus}: it holds on {o.baseline_model} "
                f"(measured {_num(o.baseline)}) but not here: {o.measured:.4g} {o.unit} (n={o.n} {o.n_unit}), "
                f"needs {o.comparison}: {o.detail}")
    if o.baseline_ok is not None:
        return (f"{o.claim_id} on {o.model} / {o.corpus}: measured {o.measured:.4g} (n={o.n} {o.n_unit}, "
                f"{o.verdict}) but the recorded baseline is {_num(o.baseline)} "
                f"({'holds' if o.baseline_holds else 'does not hold'}), tolerance {o.tolerance}"
                f"{' — failed: ' + o.check_failure if o.check_failure else ''}: {o.detail}")
    return (f"{o.claim_id} on {o.model} / {o.corpus}: {o.statement} — measured {o.measured:.4g} {o.unit} "
            f"(n={o.n} {o.n_unit}), needs {o.comparison}: {o.detail}")


def check_claim(bench: BenchSession, claim, target: Target) -> ClaimOutcome:
    """What a claim test does: evaluate, skip with the reason, or fail with the numbers."""
    out = bench.outcome(claim, target)
    if out.skipped:
        pytest.skip(f"{claim.id}: {out.skipped}")
    if not out.passed:
        # a measurement outcome, not a crash: the message carries the numbers, a traceback would only hide them
        pytest.fail(failure_message(out), pytrace=False)
    return out


def with_artifacts(config, prepared, call=lambda run: run()):
    """A pass computed: its artifacts made (fine-tunes; not timed), then ``call(run)`` runs the measurement (the
    benchmark times that call alone), so a pass's time does not depend on the checkpoint cache's state. Progress
    bars go to the terminal's stderr, visible without ``-s`` (pytest's capture is suspended around them); none when
    $CI is set or stderr is not a terminal (tqdm's disable=None), so logs stay clean."""
    capman = config.pluginmanager.getplugin("capturemanager")
    progress = not os.environ.get("CI") and capman is not None
    with capman.global_and_fixture_disabled() if progress else contextlib.nullcontext():
        prepared.artifacts(progress=progress)
        return call(lambda: prepared.run(progress=progress))


def benchmark_group(target: Target) -> str:
    """pytest-benchmark group of a pass: one table per family and corpus, so the §4 core on EWT dev sits beside
    its floor and the naive loop (test_core_speed), and the surface and clustering passes are told apart."""
    return f"{target.family}: {target.corpus}"


def time_core(benchmark, bench: BenchSession, target: Target) -> PassResult:
    """Time one attention pass with pytest-benchmark and keep its result for the claims.

    A pass is timed when it is computed: a cache miss runs under pytest-benchmark, a cache hit is loaded and not
    timed (no timing row; the summary says "loaded from cache"), so a re-run on a warm cache prints the claim table
    in seconds. ``--time-cores`` recomputes and times every pass even when it is cached (the old behaviour)."""
    benchmark.group = benchmark_group(target)
    if getattr(benchmark, "disabled", False):
        # --benchmark-disable (or xdist): nothing is timed, so a finished pass is read from the cache (resume)
        result = bench.result(target)
        if isinstance(result.result, NothingToMeasure):
            pytest.skip(f"nothing to time: {result.result.reason}")
        benchmark.pedantic(lambda: None, rounds=1, iterations=1)
    else:
        prepared = bench.prepare(target)
        if prepared.nothing_to_measure():  # no timing entry: a 0 s "run" would poison --benchmark-compare
            bench._cached(target, prepared.run, prepared)
            pytest.skip(f"nothing to time: {prepared.nothing_to_measure()}")
        # timed where computed: a cache miss (or every pass with --time-cores, replacing the cached one)
        timed_run = lambda run: benchmark.pedantic(run, rounds=1, iterations=1, warmup_rounds=0)  # noqa: E731
        result = bench._cached(target, lambda: with_artifacts(bench.config, prepared, timed_run), prepared,
                               force=bool(bench.config.getoption("--time-cores")))
    claims = {}
    for claim in load_claims(family=target.family):
        o = evaluate(claim, result)
        claims[claim.id] = {"measured": o.measured, "n": o.n, "holds": o.holds, "head": o.head, "skipped": o.skipped}
    benchmark.extra_info.update({
        "claims": claims,
        "model": result.model.name, "corpus": target.corpus, "data": result.data, "n_examples": result.n_examples,
        "examples_per_second": round(result.examples_per_second, 2), "device": result.model.device,
        "attn_implementation": result.model.attn_implementation, "skipped": result.skipped.describe(),
    })
    return result


def pass_results(session: BenchSession) -> list[PassResult]:
    """The pass results of this run: in memory, or (from xdist workers) loaded from the cache files they wrote (as
    data: :func:`cache.load_result`; an entry that is not, e.g. replaced meanwhile, is left out with a warning)."""
    import warnings

    from .cache import CacheEntryError, CacheWarning, load_result

    out = {(r.model.slug, r.family, r.corpus): r for r in session.results.values()}
    for p in session.passes:
        key = (p["slug"], p["family"], p["corpus"])
        if key not in out and p.get("cache_path") and Path(p["cache_path"]).is_file():
            try:
                out[key] = load_result(Path(p["cache_path"]))
            except CacheEntryError as exc:
                warnings.warn(f"{exc}: its figures are left out", CacheWarning)
    return list(out.values())


def pytest_runtest_setup(item):
    _bench(item.config).current_item = item


def pytest_runtest_teardown(item):
    _bench(item.config).current_item = None


class _ReportCollector:
    """Collects outcomes from test reports' user_properties, so the table is the same with pytest-xdist workers."""

    def __init__(self, config):
        self.config = config

    def pytest_runtest_logreport(self, report):
        if report.when != "teardown":  # every phase's report carries the item's properties: read them once
            return
        bench = _bench(self.config)
        for key, value in getattr(report, "user_properties", []):
            if key == "bertattn_outcome":
                bench.outcomes.append(ClaimOutcome(**value))
            elif key == "bertattn_pass":
                bench.passes.append(value)


def pytest_configure(config):
    config.pluginmanager.register(_ReportCollector(config), "bertattn-report-collector")
    # a pass loaded from the cache is not timed (time_core): no timing row, and no warning about the unused fixture
    config.addinivalue_line("filterwarnings", "ignore:Benchmark fixture was not used at all")
    check_options(config)
    workers = getattr(config, "workerinput", {}).get("workercount")
    if workers:  # pytest-xdist worker: share the cores, or -n 2 on two cores runs 4 torch threads (twice as slow)
        import torch

        torch.set_num_threads(worker_threads(os.cpu_count() or 1, int(workers)))
    elif getattr(config.option, "numprocesses", None) and benchmarks_requested(config):
        # the xdist controller collects nothing itself: diagnose the models here, once, before starting workers
        diagnose_models(config, requested_models(config))


def worker_threads(cores: int, workers: int) -> int:
    """torch threads per pytest-xdist worker: the cores shared out, at least one."""
    return max(1, cores // max(1, workers))


def check_options(config) -> None:
    """Every option that can be judged without a model or data, checked at start-up: a one-line usage error
    (pytest exit status 4) instead of a traceback in every test or a silent wrong run."""
    from .model import choose_device

    try:
        positive_int("--batch-size", config.getoption("--batch-size"))
        positive_int("--limit", config.getoption("--limit"))
        choose_device(config.getoption("--device") or os.environ.get(DEVICE_ENV))
        for name in requested_models(config):
            parse_random_model(name, RANDOM_PREFIX)
        parse_corpus_options(config.getoption("--corpus"), {f.name: tuple(f.corpora) for f in families().values()})
        output_dir("--claims-report", config.getoption("--claims-report"))
        output_dir("--record-baseline", config.getoption("--record-baseline"))
    except BenchError as exc:
        raise pytest.UsageError(str(exc)) from None
    requested_tier(config)  # BERTATTN_TIER (--tier's choices are pytest's): a usage error naming it
    if config.getoption("--compare-to") is not None:
        load_baseline_file(compare_to_path(config.getoption("--compare-to")))


def benchmarks_requested(config) -> bool:
    """Whether the command line reaches the benchmarks folder (for the xdist controller, which collects nothing)."""
    bench_dir = Path(config.rootpath) / "benchmarks"
    for arg in config.args:
        path = Path(str(arg).split("::")[0]).resolve()
        if path == bench_dir or bench_dir in path.parents or path in bench_dir.parents:
            return True
    return False


def diagnose_models(config, names) -> None:
    """Load each model once at start-up (the session keeps it): a bad model is one usage error, not a failure in
    every test."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # "Loading weights" bars would be the first lines of every run
    session = _bench(config)
    for name in names:
        session.model(name, at_startup=True)


def is_xdist_worker(config) -> bool:
    """A pytest-xdist worker: its outcomes reach the controller through the test reports, and only the controller
    writes the report, the figures and the baseline (once, not once per worker)."""
    return hasattr(config, "workerinput")


@pytest.hookimpl(trylast=True)  # after pytest-benchmark's tables: the claims table is the last thing before pytest's summary
def pytest_terminal_summary(terminalreporter, exitstatus, config):
    session = getattr(config, "_bertattn_session", None)
    if session is None or not session.outcomes or is_xdist_worker(config):
        return
    from .report import run_provenance, terminal_table, version_notes, write_report

    terminalreporter.write_sep("=", "bertattn-bench: claims vs measured")
    # a terminal: its width (80..120); a log file (CI): 120
    width = max(80, min(terminalreporter._tw.fullwidth, 120)) if terminalreporter.isatty else 120
    terminalreporter.write_line(terminal_table(session.outcomes, width=width))
    for note in version_notes(session.outcomes):
        terminalreporter.write_line(note)
    if session.passes:
        terminalreporter.write_line("")
        seen = set()
        for p in session.passes:
            key = (p["slug"], p["family"], p["corpus"], p["cached"])
            if key in seen or not p["n_examples"]:
                continue
            seen.add(key)
            rate = p["n_examples"] / p["seconds"] if p["seconds"] else float("nan")
            what = "loaded from cache (computed earlier: " if p["cached"] else "attention core: "
            terminalreporter.write_line(
                f"{what}{p['model']} / {p['family']}:{p['corpus']}: {p['n_examples']} examples in {p['seconds']:.2f}s"
                f" = {rate:.1f}/s on {p['device']}{')' if p['cached'] else ''}"
                + (f"; {p['skipped']}" if p["skipped"] else ""))
    report_dir = config.getoption("--claims-report")
    if report_dir:
        from .registry import FIGURES

        by_family: dict[str, list[PassResult]] = {}
        for r in pass_results(session):
            by_family.setdefault(r.family, []).append(r)
        figures = []
        for fam, results in sorted(by_family.items()):
            if fam in FIGURES:
                figures += FIGURES[fam](results, Path(report_dir) / "figures")
        paths = write_report(session.outcomes, Path(report_dir), figures, run_provenance(session)) + figures
        terminalreporter.write_line("claims report: " + ", ".join(str(p) for p in paths))
    record_dir = config.getoption("--record-baseline")
    if record_dir:
        from .baselines import record_baselines

        for path in record_baselines(session, Path(record_dir)):
            terminalreporter.write_line(f"recorded baseline: {path}")


@pytest.hookimpl(trylast=True)  # after -k / -m deselection: only the models the selected tests need
def pytest_collection_modifyitems(config, items):
    # Fail fast on a bad data directory (a clear message naming the option) before any model is loaded.
    if any(getattr(item.module, "FAMILY", None) for item in items if hasattr(item, "module")):
        try:
            _bench(config).data_dir
            from .data.manifest import require_data  # a missing corpus: one line naming it and the fetch command
            require_data(_bench(config).data_dir, [(t.family, t.corpus) for t in (getattr(getattr(i, "callspec", None),
                         "params", {}).get("target") for i in items) if isinstance(t, Target)])
        except BenchError as exc:
            raise pytest.UsageError(str(exc)) from exc
    if hasattr(config, "workerinput"):
        return  # an xdist worker: the controller diagnosed the models (a usage error here would be an INTERNALERROR)
    needed = []
    for item in items:
        if "bench" not in getattr(item, "fixturenames", ()):
            continue
        target = getattr(item, "callspec", None) and item.callspec.params.get("target")
        needed += [target.model] if isinstance(target, Target) else requested_models(config)[:1]
    diagnose_models(config, dict.fromkeys(needed))
