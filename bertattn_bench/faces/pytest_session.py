"""The pytest face over the runner: the session, the per-claim test body, timing a pass with pytest-benchmark, the
claims table at the end. Imported by the light entry point (faces/pytest_plugin.py) once a benchmark module is
collected, and by the benchmark modules. Every step is the runner's; here its errors become pytest's and its outcomes
travel through the test reports (so pytest-xdist workers reach the table)."""
from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from ..base.errors import BenchError
from ..base.settings import env
from ..claims.outcome import ClaimOutcome
from ..engine.passes import NothingToMeasure, PassResult
from ..report.claims_report import failure_message
from ..runner.options import RunOptions
from ..runner.plan import Target
from ..runner.session import Runner, make_pass
from .pytest_options import option


def options_from_config(config) -> RunOptions:
    """The run's options from pytest's (either spelling) over the environment's (read once); a BenchError names a
    bad one."""
    from ..base.settings import TIER_ENV, data_hosts, from_environment, whole_number
    from ..claims import tiers
    from .cli_parsing import validate_from_environment

    envs = from_environment()
    validate_from_environment()
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
        **{k: envs[k] for k in ("seed", "n_seeds", "precision", "prune_exact", "assume_shape", "allow_download", "hub_offline")
           if k in envs},
        models=list(dict.fromkeys(names)), data_dir=option(config, "data-dir") or envs.get("data_dir"),
        data_dir_source="--data-dir" if option(config, "data-dir") else envs.get("data_dir_source", "--data-dir"),
        data_home=envs.get("data_home"),
        device=option(config, "device") or envs.get("device"), corpus_options=option(config, "corpus") or [],
        limit=whole_number("--limit", option(config, "limit")),
        batch_size=whole_number("--batch-size", option(config, "batch-size")),
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


# ---- the tests' bodies ---------------------------------------------------------------------------------------------

def check_negative_control(bench: BenchSession, row) -> None:
    """A negative-control test (benchmarks/test_negative_control.py): the family's learned claims on the random-init
    twin; it fails on the runner's ``passed``, as the row prints (an inconclusive or not-judged row passes)."""
    pr = bench.result(row.target)
    if isinstance(pr.result, NothingToMeasure):
        pytest.skip(f"{row.target.family} on {row.target.model}: {pr.result.reason}")
    judged = [o for o in bench.judge(row) if not o.skipped]
    held = [f"{o.claim_id}: {o.measured:.4g} {o.unit} ({o.detail})" for o in judged if not o.passed]
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
