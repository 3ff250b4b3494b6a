"""One GPU per pytest-xdist worker (bertattn_bench.faces.gpu_workers): which GPU a worker gets, and the real mechanism in
xdist workers (no GPU needed: the variable is what torch reads when it initialises CUDA)."""
from types import SimpleNamespace

import pytest

from bertattn_bench.faces import gpu_workers as G


@pytest.mark.parametrize("worker, gpus, want", [
    ("gw0", ["0", "1"], "0"), ("gw1", ["0", "1"], "1"), ("gw2", ["0", "1"], "0"), ("gw3", ["4", "6", "7"], "4"),
    ("gw1", [], None), ("master", ["0"], None), ("", ["0"], None)])
def test_gpu_for_worker(worker, gpus, want):
    assert G.gpu_for_worker(worker, gpus) == want


def test_gpus_come_from_the_variable_else_nvidia_smi():
    smi = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n  MIG 1g.10gb Device 0: (UUID: MIG-1)\nGPU 1: NVIDIA H100 (UUID: GPU-2)\n"
    run = lambda *a, **k: SimpleNamespace(stdout=smi)  # noqa: E731
    assert G.listed_gpus({"CUDA_VISIBLE_DEVICES": "3, 5"}, run) == ["3", "5"]
    assert G.listed_gpus({}, run) == ["0", "1"]

    def missing(*a, **k):
        raise FileNotFoundError("nvidia-smi")
    assert G.listed_gpus({}, missing) == []
    env = {"PYTEST_XDIST_WORKER": "gw1"}
    assert G.assign(env, run) == "1" and env["CUDA_VISIBLE_DEVICES"] == "1"
    env = {}
    assert G.assign(env, run) is None and env == {}  # not a worker: untouched


def test_each_xdist_worker_sees_its_own_gpu(pytester, monkeypatch):
    """Two workers, the controller started with CUDA_VISIBLE_DEVICES=7,9: gw0 sees 7, gw1 sees 9, and each test
    checks it in its own worker."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7,9")
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # when the unit tests themselves run under xdist
    pytester.makepyfile(test_gpu="""
import os, pytest

@pytest.mark.parametrize("i", range(4))
def test_visible(i):
    worker = os.environ["PYTEST_XDIST_WORKER"]
    assert os.environ["CUDA_VISIBLE_DEVICES"] == {"gw0": "7", "gw1": "9"}[worker]
""")
    result = pytester.runpytest_subprocess("-n", "2", "-p", "xdist", "-p", "bertattn_bench.faces.gpu_workers")
    result.assert_outcomes(passed=4)
