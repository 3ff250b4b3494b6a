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
