"""One GPU per pytest-xdist worker: ``pytest benchmarks -n 4 -p bertattn_bench.faces.gpu_workers``.

Loaded with ``-p`` (by the controller and by each worker), this module sets, in a worker, ``CUDA_VISIBLE_DEVICES``
to one GPU: worker ``gwK`` gets the K-th (modulo their number) of the GPUs the run was started with, i.e. the
comma-separated ``CUDA_VISIBLE_DEVICES`` of the controller's environment (xdist workers inherit it), else
``0 .. N-1`` for the N GPUs ``nvidia-smi -L`` lists. It acts at import, while ``-p`` plugins load: before any model
is built, so before torch initialises CUDA (a later change of the variable would be ignored). Each worker's
``--device auto`` then is ``cuda:0``, its own GPU; the pass cache is shared (file-locked) as usual. Without
xdist, or without a GPU, it changes nothing.
"""
from __future__ import annotations

import os
import re
import subprocess

ENV = "CUDA_VISIBLE_DEVICES"


def listed_gpus(environ=os.environ, run=subprocess.run) -> list[str]:
    """The GPUs this process may use: the ids in ``CUDA_VISIBLE_DEVICES`` (when set), else ``nvidia-smi -L``'s."""
    if environ.get(ENV, "").strip():
        return [g.strip() for g in environ[ENV].split(",") if g.strip()]
    try:
        out = run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i, line in enumerate(l for l in out.splitlines() if line_is_gpu(l))]


def line_is_gpu(line: str) -> bool:
    return bool(re.match(r"GPU \d+:", line.strip()))


def gpu_for_worker(worker: str, gpus: list[str]) -> str | None:
    """``gw3`` with GPUs ``[a, b]`` -> ``b`` (worker index modulo the number of GPUs); None without GPUs or when
    ``worker`` is not an xdist worker id."""
    m = re.fullmatch(r"gw(\d+)", worker or "")
    if not m or not gpus:
        return None
    return gpus[int(m.group(1)) % len(gpus)]


def assign(environ=os.environ, run=subprocess.run) -> str | None:
    """Set ``CUDA_VISIBLE_DEVICES`` of this xdist worker to its GPU (and return it); no-op outside a worker."""
    worker = environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return None
    gpu = gpu_for_worker(worker, listed_gpus(environ, run))
    if gpu is not None:
        environ[ENV] = gpu
    return gpu


ASSIGNED = assign()


def pytest_report_header(config):
    if ASSIGNED is not None:
        return f"bertattn-bench: this worker uses GPU {ASSIGNED} ({ENV}={ASSIGNED})"
    return None
