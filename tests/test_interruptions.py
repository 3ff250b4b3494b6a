"""Nothing passed off as whole (issue 45): an interrupted run's report counts every selected test of every kind as
missing (claim tests, negative controls, timing rows), so it is never written as complete."""
import json

import pytest
from architecture_matrix import toy_data_dir

BENCH = """
from bertattn_bench.faces.pytest_session import check_claim

FAMILY = "dependency"


def test_claim(bench, claim, target):
    check_claim(bench, claim, target)
"""

CONTROL = """
import pytest


@pytest.mark.parametrize("family", ["dependency"])
def test_learned_claims_fail_on_random_init(bench, family):
    raise KeyboardInterrupt  # Ctrl-C once the negative control has started, every claim test done
"""


def test_an_interrupted_negative_control_leaves_the_report_incomplete(pytester, tmp_path):
    data = toy_data_dir(tmp_path / "data")
    pytester.makeconftest('pytest_plugins = ["bertattn_bench.faces.pytest_plugin", "bertattn_bench.faces.short_options"]')
    pytester.makepyfile(test_a_bench=BENCH, test_b_control=CONTROL)
    report = tmp_path / "report"
    result = pytester.runpytest_subprocess(f"--data-dir={data}", "--no-cache", f"--claims-report={report}",
                                           "-p", "no:cacheprovider", "-p", "no:randomly")
    assert result.ret == 2
    doc = json.loads((report / "claims.json").read_text())
    assert doc["records"], "the claim tests ran before the interrupt"
    assert doc["complete"] is False
    assert doc["missing"] == ["negative control: dependency on the random-init twin"]
    run = json.loads((report / "run.json").read_text())
    assert run["complete"] is False
    assert "INCOMPLETE" in (report / "claims.md").read_text()
    result.stdout.fnmatch_lines(["INCOMPLETE: 1 selected test(s) did not run*"])


STOP_IN = """
import os, signal

import pytest

pytest_plugins = ["bertattn_bench.faces.pytest_plugin", "bertattn_bench.faces.short_options"]


@pytest.hookimpl(trylast=True)
def {hook}({args}):
    os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while pytest shuts down
    {after}
"""


@pytest.mark.parametrize("hook, args, after", [
    ("pytest_terminal_summary", "terminalreporter", "terminalreporter.write_line('SUMMARY GOES ON')"),
    ("pytest_sessionfinish", "session", "pass"),
    ("pytest_unconfigure", "config", "pass"),
])
def test_ctrl_c_during_pytest_shutdown_exits_2_with_one_line(pytester, tmp_path, hook, args, after):
    data = toy_data_dir(tmp_path / "data")
    pytester.makeconftest(STOP_IN.format(hook=hook, args=args, after=after))
    pytester.makepyfile(test_a_bench=BENCH)
    report = tmp_path / "report"
    result = pytester.runpytest_subprocess(f"--data-dir={data}", "--no-cache", f"--claims-report={report}",
                                           "-k", "dep_dobj", "-p", "no:cacheprovider", "-p", "no:randomly")
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == 2, text[-3000:]
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text[-3000:]
    assert len([ln for ln in text.splitlines() if "interrupted (Ctrl-C)" in ln]) == 1, text[-3000:]
    if hook == "pytest_terminal_summary":  # what was being written is finished
        assert "SUMMARY GOES ON" in text and (report / "claims.json").is_file()


def test_ctrl_c_in_a_command_is_one_line_and_status_2(monkeypatch, capsys):
    from bertattn_bench.faces import cli

    def interrupted(argv=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "main", interrupted)
    assert cli.console() == 2
    assert capsys.readouterr().err.strip() == "bertattn-bench: interrupted (Ctrl-C)"


def test_another_projects_fixture_named_bench_is_not_the_session(pytester):
    """The plugin counts the tests that take its own ``bench`` fixture; a project's own ``bench`` is left alone."""
    pytester.makeconftest('pytest_plugins = ["bertattn_bench.faces.pytest_plugin"]\n'
                          "import pytest\n\n@pytest.fixture\ndef bench():\n    return 3\n")
    pytester.makepyfile(test_other="def test_x(bench):\n    assert bench == 3\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly")
    assert result.ret == 0, result.stdout.str()[-2000:]


def test_ctrl_c_during_start_up_is_one_line_and_status_2():
    """Issue 45: from the suite's plugin import (``-p bertattn_bench.faces.short_options``, loaded before pytest's
    entry-point plugins) to the end of collection, Ctrl-C prints one line and exits 2 (was: a traceback and 130, or
    pytest's banner); after it, SIGINT is Python's again (pytest's and the report's handling of a run)."""
    import signal
    import subprocess
    import sys

    code = ("import os, signal, time\n"
            "from bertattn_bench.base.interrupts import guard_startup, release_startup\n"
            "assert guard_startup()\n"
            "os.kill(os.getpid(), signal.SIGINT)\n"
            "time.sleep(10)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "bertattn-bench: interrupted (Ctrl-C) while starting (nothing was run): exit status 2"]
    released = ("import signal\n"
                "from bertattn_bench.base.interrupts import guard_startup, release_startup\n"
                "guard_startup(); release_startup()\n"
                "assert signal.getsignal(signal.SIGINT) is signal.default_int_handler\n"
                "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                "assert not guard_startup() and signal.getsignal(signal.SIGINT) is signal.SIG_IGN\n")
    assert subprocess.run([sys.executable, "-c", released], timeout=60,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)).returncode == 0
