"""Progress bars on long passes reach the terminal without -s (capture suspended), and not in CI; a pass's
artifacts (fine-tunes) are made before, and outside, the timed call; pytest-xdist workers share the cores instead of
each taking all of them."""
import sys

import pytest

from bertattn_bench.faces.pytest_session import with_artifacts, worker_threads


class FakePass:
    def __init__(self):
        self.calls = []

    def artifacts(self, progress=False):
        self.calls.append(("artifacts", progress, sys.stderr is sys.__stderr__))

    def run(self, progress=False):
        self.calls.append(("run", progress, sys.stderr is sys.__stderr__))
        return "result"


def test_progress_shown_on_the_real_stderr_outside_ci(request, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    fake = FakePass()
    assert sys.stderr is not sys.__stderr__  # pytest captures this test's stderr ...
    assert with_artifacts(request.config, fake) == "result"
    assert fake.calls == [("artifacts", True, True), ("run", True, True)]  # ... but not the pass's progress bars


def test_no_progress_in_ci(request, monkeypatch):
    monkeypatch.setenv("CI", "1")
    fake = FakePass()
    with_artifacts(request.config, fake)
    assert fake.calls == [("artifacts", False, False), ("run", False, False)]


@pytest.mark.parametrize("ci", [True, False])
def test_only_the_run_is_timed(request, monkeypatch, ci):
    """The timer (the benchmark's pedantic call) wraps ``run`` alone: the artifacts are made before it starts."""
    monkeypatch.setenv("CI", "1") if ci else monkeypatch.delenv("CI", raising=False)
    fake = FakePass()

    def timer(run):
        fake.calls.append("timer starts")
        return run()

    assert with_artifacts(request.config, fake, timer) == "result"
    assert [c if isinstance(c, str) else c[0] for c in fake.calls] == ["artifacts", "timer starts", "run"]


@pytest.mark.parametrize("cores,workers,threads", [(2, 2, 1), (2, 1, 2), (16, 4, 4), (16, 3, 5), (2, 8, 1), (1, 0, 1)])
def test_worker_threads(cores, workers, threads):
    assert worker_threads(cores, workers) == threads


def test_xdist_workers_set_their_torch_threads(pytester, monkeypatch, tmp_path):
    """A benchmark module's session on a pytest-xdist worker shares the cores out (an unrelated module is left
    alone: the plugin imports no torch there)."""
    (tmp_path / "placeholder").write_text("x")
    monkeypatch.setenv("BERTATTN_DATA_DIR", str(tmp_path))
    pytester.makeconftest('pytest_plugins = ["bertattn_bench.faces.pytest_plugin", "bertattn_bench.faces.short_options"]')
    pytester.makepyfile(test_threads="""
import os, torch

FAMILY = "dependency"

def test_a(bench):
    assert torch.get_num_threads() == max(1, (os.cpu_count() or 1) // 2)

def test_b(bench):
    assert torch.get_num_threads() == max(1, (os.cpu_count() or 1) // 2)
""")
    result = pytester.runpytest_subprocess("-n", "2", "-p", "xdist")
    result.assert_outcomes(passed=2)
