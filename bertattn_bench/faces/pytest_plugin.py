"""The pytest face's entry point: options, parametrization, the claims table at the end. Light by design.

Registered through the package's ``pytest11`` entry point, so pytest loads it in every project of an environment
that installs the package. It therefore imports nothing heavy at start-up (no torch, transformers or pandas: the
run itself lives in :mod:`bertattn_bench.runner.session`, the pytest glue in :mod:`bertattn_bench.faces.pytest_session`, both
imported only once a benchmark module is collected), registers only ``--bertattn-*`` options (the short spellings
``--model``, ``--data-dir``, ... come from :mod:`bertattn_bench.faces.short_options`, which the repository's conftest and
the ``bertattn-bench`` command load) and changes no process-wide state.

A benchmark module sets ``FAMILY = "surface"`` (one family) or ``FAMILY = "*"`` (every registered family:
``benchmarks/test_claims.py``) and defines

* ``test_attention_core(benchmark, bench, target)`` — times the attention core once per (model, corpus) and
  keeps the pass result for the claims;
* ``test_claim(bench, claim, target)`` — one test per (claim, model, corpus); it reads the shared result.
"""
from __future__ import annotations

import pytest

from .pytest_options import add_options

SHORT_OPTIONS = "bertattn_bench.faces.short_options"  # the plugin the command and the checkout's conftest load


def pytest_addoption(parser):
    add_options(parser)


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: loads a model or reads the data (bertattn-bench)")
    config.addinivalue_line("markers", "arct_ft: the arct_ft family's benchmark module (selected by -k arct_ft)")
    config.addinivalue_line("markers", "bertattn: a bertattn-bench claim benchmark")
    config.pluginmanager.register(_ReportCollector(config), "bertattn-report-collector")
    # a pass loaded from the cache is not timed (time_core): no timing row, and no warning about the unused fixture
    config.addinivalue_line("filterwarnings", "ignore:Benchmark fixture was not used at all")
    xdist = bool(getattr(config.option, "numprocesses", None))
    ours = xdist or config.pluginmanager.has_plugin(SHORT_OPTIONS)  # the suite's own run: the command, the checkout
    if ours and not hasattr(config, "workerinput") and not config.option.collectonly and not config.option.help \
            and benchmarks_requested(config):
        # the run's options checked before pytest's banner and collection: a bad one is one line and exit status 4,
        # at once (the data and the models are checked once the selection is known, or here under xdist). Another
        # project's run (the entry point alone) reads nothing of ours until a benchmark module is collected.
        from .pytest_session import session

        s = session(config)
        if xdist:  # the xdist controller collects nothing itself: diagnose the models here, once
            from .pytest_collect import diagnose_models

            diagnose_models(config, s.options.models)


def benchmarks_requested(config) -> bool:
    """Whether the command line reaches a benchmarks folder: named, inside one, or a folder above the root's
    ``benchmarks`` where there is one."""
    from pathlib import Path

    bench_dir = Path(config.rootpath) / "benchmarks"
    for arg in config.args:
        path = Path(str(arg).split("::")[0]).resolve()
        if path == bench_dir or bench_dir in path.parents or path.name == "benchmarks" or (
                path in bench_dir.parents and bench_dir.is_dir()):
            return True
    return False


def is_bench_module(module) -> bool:
    return getattr(module, "FAMILY", None) is not None


@pytest.fixture(scope="session")
def bench(request):
    """The run shared by every claim test (a :class:`bertattn_bench.faces.pytest_session.BenchSession`)."""
    from .pytest_session import session

    return session(request.config)


def pytest_generate_tests(metafunc):
    if not is_bench_module(metafunc.module):
        return
    from .pytest_collect import generate_tests

    generate_tests(metafunc)


@pytest.hookimpl(trylast=True)  # after -k / -m deselection: only the models the selected tests need
def pytest_collection_modifyitems(config, items):
    # a benchmark module's tests and every test that runs on the session (the negative control, the speed rows)
    bench_items = [i for i in items if is_bench_module(getattr(i, "module", None)) or uses_session(i)]
    if not bench_items and not hasattr(config, "_bertattn_usage_error"):
        return
    from .pytest_collect import check_collected

    check_collected(config, bench_items)


def pytest_deselected(items):
    """Claim tests a -k / -m expression left out, counted: a selection of none says so at the end (exit 5)."""
    bench = [i for i in items if is_bench_module(getattr(i, "module", None))]
    if bench:
        config = bench[0].config
        config._bertattn_deselected = getattr(config, "_bertattn_deselected", 0) + len(bench)


def uses_session(item) -> bool:
    """Whether a test takes this plugin's ``bench`` fixture (another project's fixture of that name is not ours)."""
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {}).get("bench") or ()
    return any(getattr(getattr(d, "func", None), "__module__", None) == __name__ for d in defs)


def pytest_runtest_setup(item):
    s = getattr(item.config, "_bertattn_session", None)
    if s is not None:
        s.current_item = item


def pytest_runtest_teardown(item):
    s = getattr(item.config, "_bertattn_session", None)
    if s is not None:
        s.current_item = None


class _ReportCollector:
    """Collects outcomes from test reports' user_properties, so the table is the same with pytest-xdist workers."""

    def __init__(self, config):
        self.config = config

    def pytest_runtest_logreport(self, report):
        if report.when != "teardown":  # every phase's report carries the item's properties: read them once
            return
        if hasattr(self.config, "_bertattn_selected"):
            from .pytest_finish import finished

            finished(self.config, report.nodeid)
        props = [(k, v) for k, v in getattr(report, "user_properties", []) if k in ("bertattn_outcome", "bertattn_pass")]
        if not props:
            return
        from .pytest_finish import collect_properties

        collect_properties(self.config, props)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)  # around every plugin's end of session, the summary included
def pytest_sessionfinish(session, exitstatus):
    """Ctrl-C while a benchmark run finishes (report, baseline, pytest's shutdown): one line, exit status 2."""
    guard = None
    if getattr(session.config, "_bertattn_session", None) is not None:
        from ..base.interrupts import ShutdownGuard

        guard = ShutdownGuard("the run was finishing")
        if guard.install():
            session.config._bertattn_guard = guard
    yield
    if guard is not None and guard.interrupted:
        session.exitstatus = pytest.ExitCode.INTERRUPTED
    if guard is not None:
        # the exit status is decided: a Ctrl-C from now on (pytest's unconfigure, its clean-ups, the interpreter's
        # exit) stops at once with status 2; the handler stays to the end of the process, which ends here
        guard.closing = True


@pytest.hookimpl(trylast=True)  # after pytest-benchmark's tables: the claims table is the last thing before pytest's summary
def pytest_terminal_summary(terminalreporter, exitstatus, config):
    left_out = getattr(config, "_bertattn_deselected", 0)
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and left_out:
        expr = config.getoption("keyword") or config.getoption("markexpr")
        terminalreporter.write_line(f"bertattn-bench: {expr!r} selects none of the {left_out} claim tests "
                                    f"(exit 5): `bertattn-bench list -k EXPR` shows what an expression selects, "
                                    f"`bertattn-bench list --families` the families and their corpora")
    if getattr(config, "_bertattn_session", None) is None:
        return
    from .pytest_finish import terminal_summary

    terminal_summary(terminalreporter, config)
