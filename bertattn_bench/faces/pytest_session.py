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

from ..base.errors import BenchError
from ..base.settings import SUMMARY_ENV, env
from ..claims.catalog import ClaimOutcome
from ..engine.passes import NothingToMeasure, PassResult
from ..report.claims_report import failure_message
from ..runner.session import EVERY_FAMILY, Runner, RunOptions, Target, make_pass, model_id
from .pytest_options import option


def options_from_config(config) -> RunOptions:
    """The run's options from pytest's (either spelling) over the environment's (read once); a BenchError names a
    bad one."""
    from ..base.settings import TIER_ENV, data_hosts, from_environment
    from ..claims import tiers

    envs = from_environment()
    if "tier" in envs and not option(config, "tier"):
        tiers.check(envs["tier"], f"{TIER_ENV}=")
    names = option(config, "model") or envs.get("models") or ["embedded"]
    cache = None if option(config, "no-cache") else Path(
        option(config, "cache-dir") or envs.get("cache_dir") or Path(config.rootpath) / ".bertattn_cache")
    record = option(config, "record-baseline")
    if record == "":  # the option without a folder: the package's baselines
        from ..claims.baselines import BASELINE_DIR

        record = str(BASELINE_DIR)
    report = option(config, "claims-report")
    return RunOptions(
        **{k: envs[k] for k in ("seed", "precision", "prune_exact", "assume_shape", "allow_download", "hub_offline")
           if k in envs},
        models=list(dict.fromkeys(names)), data_dir=option(config, "data-dir") or envs.get("data_dir"),
        data_dir_source="--data-dir" if option(config, "data-dir") else envs.get("data_dir_source", "--data-dir"),
        data_home=envs.get("data_home"),
        device=option(config, "device") or envs.get("device"), corpus_options=option(config, "corpus") or [],
        limit=option(config, "limit"), batch_size=option(config, "batch-size"),
        tier=option(config, "tier") or envs.get("tier"),
        cache_dir=cache, time_cores=bool(option(config, "time-cores")),
        record_baseline=Path(record) if record else None, compare_to=option(config, "compare-to"),
        compare_fail_on=option(config, "compare-fail-on") or "lost",
        claims_report=Path(report) if report else None,
        command="pytest " + " ".join(config.invocation_params.args), progress=envs["progress"],
        offline=bool(option(config, "offline")) or envs.get("offline", False), data_hosts=data_hosts(),
        data_mirror=envs.get("data_mirror"), self_contained=bool(option(config, "self-contained")),
        task_model=option(config, "task-model"), eval_data=list(option(config, "eval-data") or []))


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

def generate_tests(metafunc):
    """Parametrize a benchmark module's tests from the runner's plan: ``target`` over its rows (model, corpus) of
    the module's families, ``claim`` over each row's claims, jointly; ``control`` over the negative-control rows.
    Ids are the plan's (``paper-family-model-corpus[-claim]``), so that ``-k`` selects by paper, family, model,
    corpus or claim. A bad option is kept for the end of the collection (a usage error raised here would be a
    collection error, not exit status 4)."""
    config = metafunc.config
    names = [n for n in ("target", "claim", "control") if n in metafunc.fixturenames]
    if not names:
        return
    try:
        s = session(config)
    except pytest.UsageError as exc:
        config._bertattn_usage_error = str(exc)
        return
    family = getattr(metafunc.module, "FAMILY", None)
    rows = s.plan(families=None if family == EVERY_FAMILY else [family])
    if "control" in names:
        controls = [r for r in rows if r.negative_control]
        metafunc.parametrize("control", controls, ids=[r.test_id for r in controls])
        return
    rows = [r for r in rows if not r.negative_control]
    if "claim" not in names:
        metafunc.parametrize("target", [r.target for r in rows], ids=[r.test_id for r in rows])
        return
    params = [((r.target, c) if "target" in names else c) for r in rows for c in r.claims]
    ids = [r.claim_test_id(c) for r in rows for c in r.claims]
    metafunc.parametrize(names if len(names) > 1 else names[0], params, ids=ids)


def _target(item) -> Target | None:
    """The pass a collected benchmark test runs on (a claim's or the pass's target, a negative control's twin)."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    target = params.get("target") or getattr(params.get("control"), "target", None)
    return target if isinstance(target, Target) else None


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
        s.ensure_data(list(dict.fromkeys((t.family, t.corpus) for t in map(_target, items) if t)))
    except BenchError as exc:
        raise pytest.UsageError(str(exc)) from exc
    if hasattr(config, "workerinput"):
        return  # an xdist worker: the controller diagnosed the models (a usage error here would be an INTERNALERROR)
    needed = []
    for item in items:
        if "bench" not in getattr(item, "fixturenames", ()):
            continue
        target = _target(item)
        needed += [target.model] if target else s.options.models[:1]
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

def check_negative_control(bench: BenchSession, row) -> None:
    """What a negative-control test does (benchmarks/test_negative_control.py): the family's learned claims judged
    on the random-init twin; none may hold (an inconclusive side fails too: the outcome does not pass)."""
    pr = bench.result(row.target)
    if isinstance(pr.result, NothingToMeasure):
        pytest.skip(f"{row.target.family} on {row.target.model}: {pr.result.reason}")
    judged = [o for o in bench.judge(row) if not o.skipped]
    held = [f"{o.claim_id}: {o.measured:.4g} {o.unit} ({o.detail})" for o in judged if o.holds]
    assert judged, f"no learned {row.target.family} claim could be judged on {row.target.model}"
    assert not held, f"learned-structure claims hold on the random-init model {row.target.model}:\n" + "\n".join(held)


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
    """The runner's finish, printed: the claims table and what the run wrote (the controller only, under xdist)."""
    s = config._bertattn_session
    if not s.outcomes or is_xdist_worker(config):
        return
    terminalreporter.write_sep("=", "bertattn-bench: claims vs measured")
    # a terminal: its width (80..120); a log file (CI): 120
    width = max(80, min(terminalreporter._tw.fullwidth, 120)) if terminalreporter.isatty else 120
    for line in s.finish(missing_claims(config) or None, width=width, summary_file=env(SUMMARY_ENV) or None).lines:
        terminalreporter.write_line(line)
