"""The pytest face over the runner: the session, the per-claim test body, timing a pass with pytest-benchmark, and
the claims table at the end. Imported by the light entry point (:mod:`bertattn_bench.faces.pytest_plugin`) only once a
benchmark module is collected, and by the benchmark modules themselves. Every step of the run is the runner's
(:mod:`bertattn_bench.runner.session`); here its errors become pytest's (a usage error at start-up, a failed test with the
numbers) and its outcomes travel through the test reports (so pytest-xdist workers reach the table).
"""
from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from ..claims.catalog import ClaimOutcome, load_claims
from ..base.errors import BenchError
from ..base.settings import env
from ..engine.passes import NothingToMeasure, PassResult
from .pytest_options import option
from ..report.claims_report import _num
from ..runner.session import EVERY_FAMILY, RunOptions, Runner, Target, family_order, make_pass, model_id, paper_key


def options_from_config(config) -> RunOptions:
    """The run's options from pytest's (either spelling) and the environment; a BenchError names a bad one."""
    from ..base.settings import CACHE_ENV, DATA_MIRROR_ENV, DEVICE_ENV, MODEL_ENV, data_hosts, env, offline

    names = option(config, "model") or [m for m in env(MODEL_ENV).split(",") if m] or ["embedded"]
    cache = None if option(config, "no-cache") else Path(
        option(config, "cache-dir") or env(CACHE_ENV) or Path(config.rootpath) / ".bertattn_cache")
    record = option(config, "record-baseline")
    if record == "":  # the option without a folder: the package's baselines
        from ..claims.baselines import BASELINE_DIR

        record = str(BASELINE_DIR)
    report = option(config, "claims-report")
    return RunOptions(
        models=list(dict.fromkeys(names)), data_dir=option(config, "data-dir"),
        device=option(config, "device") or env(DEVICE_ENV) or None, corpus_options=option(config, "corpus") or [],
        limit=option(config, "limit"), batch_size=option(config, "batch-size"), tier=option(config, "tier"),
        cache_dir=cache, time_cores=bool(option(config, "time-cores")),
        record_baseline=Path(record) if record else None, compare_to=option(config, "compare-to"),
        compare_fail_on=option(config, "compare-fail-on") or "lost",
        claims_report=Path(report) if report else None,
        command="pytest " + " ".join(config.invocation_params.args), progress=not env("CI"),
        offline=offline(option(config, "offline")), data_hosts=data_hosts(), data_mirror=env(DATA_MIRROR_ENV) or None)


class BenchSession(Runner):
    """The runner of one pytest session: errors as pytest's, outcomes and passes through the test reports."""

    def __init__(self, config):
        super().__init__(options_from_config(config))
        self.config = config
        self.current_item = None
        self.timing_claims: dict[Target, dict] = {}  # a pass -> its timing row's claims (extra_info)

    # Through the test reports as JSON text: pytest-xdist carries them to the controller, and a JUnit XML report
    # (--junitxml) shows them as readable properties (name bertattn_outcome / bertattn_pass, value a JSON object).
    def on_pass(self, summary: dict) -> None:
        if self.current_item is not None:
            self.current_item.user_properties.append(("bertattn_pass", _json(summary)))

    def on_outcome(self, outcome) -> None:
        if self.current_item is not None:
            self.current_item.user_properties.append(("bertattn_outcome", _json(outcome.record())))
            target = getattr(getattr(self.current_item, "callspec", None), "params", {}).get("target")
            if target is not None:
                self.timing_claims.setdefault(target, {})[outcome.claim_id] = {
                    "measured": outcome.measured, "n": outcome.n, "holds": outcome.holds, "head": outcome.head,
                    "skipped": outcome.skipped}

    def make(self, prepared, run=None):
        return with_artifacts(self.config, prepared, run or (lambda r: r()))

    def model(self, name: str, at_startup: bool = False):
        """Load once per session; a load error is kept and reported (cleanly, once per test) without retrying;
        ``at_startup``: as a usage error that stops the run."""
        try:
            return super().model(name)
        except BenchError as exc:
            if at_startup:
                raise pytest.UsageError(str(exc)) from None
            pytest.fail(str(exc), pytrace=False)

    def prepare(self, target: Target):
        from ..base.errors import DataError

        try:
            return super().prepare(target)
        except DataError as exc:
            # bad input (a malformed or undecodable data file): one message and the usage/input status, not one
            # failure per test; what finished is cached, the report is written marked incomplete
            pytest.exit(f"ERROR: {exc}", returncode=pytest.ExitCode.USAGE_ERROR)
        except BenchError as exc:
            pytest.fail(str(exc), pytrace=False)

    def compare_baseline(self) -> dict:
        try:
            return super().compare_baseline()
        except BenchError as exc:
            raise pytest.UsageError(str(exc)) from None


def _json(value: dict) -> str:
    import json

    return json.dumps(value, ensure_ascii=False, default=lambda v: v.item() if hasattr(v, "item") else str(v))


def session(config) -> BenchSession:
    """The session's runner, made once; a bad option is a usage error (pytest exit status 4)."""
    if not hasattr(config, "_bertattn_session"):
        try:
            s = BenchSession(config)
            s.options.check()
        except BenchError as exc:
            raise pytest.UsageError(str(exc)) from None
        workers = getattr(config, "workerinput", {}).get("workercount")
        if workers:  # pytest-xdist worker: share the cores, or -n 2 on two cores runs 4 torch threads (twice as slow)
            import torch

            torch.set_num_threads(worker_threads(os.cpu_count() or 1, int(workers)))
        config._bertattn_session = s
    return config._bertattn_session


def worker_threads(cores: int, workers: int) -> int:
    """torch threads per pytest-xdist worker: the cores shared out, at least one."""
    return max(1, cores // max(1, workers))


# ---- collection --------------------------------------------------------------------------------------------------

def module_families(module) -> list[str]:
    """The families a benchmark module's tests run: its ``FAMILY``, or every registered family for
    :data:`EVERY_FAMILY`, ordered by paper (the first claim's) and name."""
    family = getattr(module, "FAMILY", None)
    if family is None:
        return []
    return family_order() if family == EVERY_FAMILY else [family]


def requested_models(config) -> list[str]:
    return session(config).options.models


def requested_corpora(config, family: str) -> list[str]:
    return session(config).options.corpora(family)


def generate_tests(metafunc):
    """Parametrize a benchmark module's tests from the registry: ``target`` over (model, corpus) of each family,
    ``claim`` over the family's claims, jointly. Ids read ``paper-family-model-corpus[-claim]`` so that ``-k``
    selects by paper, family, model, corpus or claim. A bad option is kept for the end of the collection (a usage
    error raised here would be a collection error, not exit status 4)."""
    config = metafunc.config
    names = [n for n in ("target", "claim") if n in metafunc.fixturenames]
    if not names:
        return
    try:
        s = session(config)
    except pytest.UsageError as exc:
        config._bertattn_usage_error = str(exc)
        return
    fams = module_families(metafunc.module)
    params, ids = [], []
    catalog = load_claims()  # read once, split by family
    for family in fams:
        claims = [c for c in catalog if c.family == family]
        fam_paper = paper_key(claims[0].paper) if claims else "other"
        targets = [Target(m, c, family) for m in s.options.models for c in s.options.corpora(family)]
        for t in targets:
            if "claim" not in names:
                params.append(t)
                ids.append(f"{fam_paper}-{family}-{t.id}")
                continue
            for c in claims:
                params.append((t, c) if "target" in names else c)
                ids.append(f"{paper_key(c.paper)}-{family}-{t.id}-{c.id}")
    metafunc.parametrize(names if len(names) > 1 else names[0], params, ids=ids)


def check_collected(config, items) -> None:
    """After -k / -m: a bad option, then a bad data directory (a clear message naming the option), then each model
    the selected tests need loaded once: each a usage error before any test runs. ``--collect-only`` needs neither
    data nor models."""
    if hasattr(config, "_bertattn_usage_error"):
        raise pytest.UsageError(config._bertattn_usage_error)
    config._bertattn_selected = {i.nodeid: _claim_label(i) for i in items}  # every kind: claims, controls, timings
    if config.option.collectonly:
        return
    s = session(config)
    try:
        # a missing corpus: fetched into the default data folder, else one line naming it and the fetch command
        s.ensure_data(list(dict.fromkeys(
            (t.family, t.corpus) for t in (getattr(getattr(i, "callspec", None), "params", {}).get("target")
                                           for i in items) if isinstance(t, Target))))
    except BenchError as exc:
        raise pytest.UsageError(str(exc)) from exc
    if hasattr(config, "workerinput"):
        return  # an xdist worker: the controller diagnosed the models (a usage error here would be an INTERNALERROR)
    needed = []
    for item in items:
        if "bench" not in getattr(item, "fixturenames", ()):
            continue
        target = getattr(item, "callspec", None) and item.callspec.params.get("target")
        needed += [target.model] if isinstance(target, Target) else s.options.models[:1]
    diagnose_models(config, dict.fromkeys(needed))


def diagnose_models(config, names) -> None:
    """Load each model once at start-up (the session keeps it): a bad model is one usage error, not a failure in
    every test. Hugging Face's "Loading weights" bars are off while loading, and as before afterwards."""
    from transformers.utils import logging as hf_logging

    s = session(config)
    was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        for name in names:
            s.model(name, at_startup=True)
    finally:
        if was_on:
            hf_logging.enable_progress_bar()


# ---- the tests' bodies ---------------------------------------------------------------------------------------------

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
    progress = not env("CI") and capman is not None
    with capman.global_and_fixture_disabled() if progress else contextlib.nullcontext():
        return make_pass(prepared, progress, call)


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
            bench.cached(target, prepared.run, prepared)
            pytest.skip(f"nothing to time: {prepared.nothing_to_measure()}")
        # timed where computed: a cache miss (or every pass with --time-cores, replacing the cached one)
        timed_run = lambda run: benchmark.pedantic(run, rounds=1, iterations=1, warmup_rounds=0)  # noqa: E731
        result = bench.cached(target, lambda: with_artifacts(bench.config, prepared, timed_run), prepared,
                              force=bench.options.time_cores)
    benchmark.extra_info.update({
        # the claims of this pass as its claim tests judge them (filled by BenchSession.on_outcome as they run: each
        # claim is evaluated once per session, by the runner)
        "claims": bench.timing_claims.setdefault(target, {}),
        "model": result.model.name, "corpus": target.corpus, "data": result.data, "n_examples": result.n_examples,
        "examples_per_second": round(result.examples_per_second, 2), "device": result.model.device,
        "attn_implementation": result.model.attn_implementation, "skipped": result.skipped.describe(),
    })
    return result


# ---- the end of the session ------------------------------------------------------------------------------------

def _claim_label(item) -> str:
    """A selected test as the incomplete report names it: a claim ``claim_id on model / corpus``, a timing row
    ``timing: family on model / corpus``, a negative control ``negative control: family``, else the test's name."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    claim, target = params.get("claim"), params.get("target")
    if target is not None and claim is None and isinstance(target, Target):
        return f"timing: {target.family} on {model_id(target.model)} / {target.corpus}"
    if target is None and "family" in params:
        return f"negative control: {params['family']} on the random-init twin"
    return f"{getattr(claim, 'id', item.name)} on {model_id(target.model)} / {target.corpus}" if target else item.name


def finished(config, nodeid: str) -> None:
    config.__dict__.setdefault("_bertattn_finished", set()).add(nodeid)


def missing_claims(config) -> list[str]:
    """The selected claim tests that did not run (an interrupted session): named in an incomplete report."""
    done = getattr(config, "_bertattn_finished", set())
    return [label for nodeid, label in getattr(config, "_bertattn_selected", {}).items() if nodeid not in done]


def collect_properties(config, props) -> None:
    import json

    s = session(config)
    for key, value in props:
        value = json.loads(value) if isinstance(value, str) else value
        if key == "bertattn_outcome":
            s.outcomes.append(ClaimOutcome(**value))
        elif key == "bertattn_pass":
            s.passes.append(value)


def is_xdist_worker(config) -> bool:
    """A pytest-xdist worker: its outcomes reach the controller through the test reports, and only the controller
    writes the report, the figures and the baseline (once, not once per worker)."""
    return hasattr(config, "workerinput")


def terminal_summary(terminalreporter, config) -> None:
    from ..report.claims_report import terminal_table, version_notes
    from ..runner.session import pass_lines

    s = config._bertattn_session
    if not s.outcomes or is_xdist_worker(config):
        return
    terminalreporter.write_sep("=", "bertattn-bench: claims vs measured")
    # a terminal: its width (80..120); a log file (CI): 120
    width = max(80, min(terminalreporter._tw.fullwidth, 120)) if terminalreporter.isatty else 120
    terminalreporter.write_line(terminal_table(s.outcomes, width=width))
    for note in version_notes(s.outcomes):
        terminalreporter.write_line(note)
    lines = pass_lines(s.passes)
    if lines:
        terminalreporter.write_line("")
        for line in lines:
            terminalreporter.write_line(line)
    missing = missing_claims(config)
    if missing:
        terminalreporter.write_line(f"INCOMPLETE: {len(missing)} selected test(s) did not run (claims, negative "
                                    f"controls, timing rows; interrupted): the report says so and names them")
    if s.options.claims_report:
        paths = s.write_report(s.options.claims_report, missing=missing or None,
                               self_contained=bool(option(config, "self-contained")))
        terminalreporter.write_line("claims report: " + ", ".join(str(p) for p in paths))
    from ..report.summary import job_summary, write_job_summary

    summary = write_job_summary(job_summary(s.outcomes, missing=missing or None))  # only where $GITHUB_STEP_SUMMARY
    if summary:
        terminalreporter.write_line(f"job summary: appended to {summary}")
    if s.options.record_baseline:
        for path in s.record_baselines(s.options.record_baseline):
            terminalreporter.write_line(f"recorded baseline: {path}")
