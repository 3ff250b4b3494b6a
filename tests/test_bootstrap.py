"""scripts/install_torch.sh and scripts/bootstrap.sh, run for real with fake python / nvidia-smi executables: which
torch build they choose where, the exact pip command, the stamp, a failed `python -m venv`. No network, no installs."""
import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
UNREACHABLE = "http://127.0.0.1:9/whl/cpu"  # the discard port: connection refused at once


def script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


@pytest.fixture
def fakes(tmp_path):
    """A bin folder first on PATH (for a fake nvidia-smi) and a python that cannot import torch (-S: no site)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = script(tmp_path / "py" / "python", f'exec {sys.executable} -S "$@"\n')
    return bin_dir, python


def install_torch(python, bin_dir, **env):
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("BERTATTN_")},
           "PATH": f"{bin_dir}:{os.environ['PATH']}", **env}
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "install_torch.sh"), str(python), "--dry-run"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def test_no_gpu_takes_the_cpu_wheel_index(fakes):
    bin_dir, python = fakes
    root = bin_dir.parent / "index"
    (root / "whl" / "cpu" / "torch").mkdir(parents=True)
    (root / "whl" / "cpu" / "torch" / "index.html").write_text("<a>torch</a>")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        index = f"http://127.0.0.1:{server.server_address[1]}/whl/cpu"
        lines = install_torch(python, bin_dir, BERTATTN_TORCH_INDEX=index)
    finally:
        server.shutdown()
    assert lines == [f"bootstrap: torch: no NVIDIA GPU: installing the CPU-only wheel from {index}",
                     f"bootstrap: torch: $ {python} -m pip install --index-url {index} torch==2.13.0"]


def test_no_gpu_and_no_cpu_index_falls_back_to_the_package_index(fakes):
    bin_dir, python = fakes
    lines = install_torch(python, bin_dir, BERTATTN_TORCH_INDEX=UNREACHABLE)
    assert lines[0].startswith(f"bootstrap: torch: no NVIDIA GPU and {UNREACHABLE} is not reachable")
    assert lines[1] == f"bootstrap: torch: $ {python} -m pip install torch==2.13.0"


def test_a_gpu_gets_the_cuda_build(fakes):
    bin_dir, python = fakes
    script(bin_dir / "nvidia-smi", 'echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)"\n')
    lines = install_torch(python, bin_dir, BERTATTN_TORCH="torch==2.13.0")
    assert lines == ["bootstrap: torch: 1 NVIDIA GPU(s) found by nvidia-smi: installing the CUDA build from the package index",
                     f"bootstrap: torch: $ {python} -m pip install torch==2.13.0"]


def test_nvidia_smi_without_a_gpu_is_no_gpu(fakes):
    bin_dir, python = fakes
    script(bin_dir / "nvidia-smi", 'echo "NVIDIA-SMI has failed because it could not communicate with the driver" >&2; exit 9\n')
    assert "no NVIDIA GPU" in install_torch(python, bin_dir, BERTATTN_TORCH_INDEX=UNREACHABLE)[0]


def test_an_installed_torch_is_kept_unless_a_pin_excludes_it(fakes):
    import torch

    bin_dir, _ = fakes
    script(bin_dir / "nvidia-smi", 'echo "GPU 0: NVIDIA H100"\n')
    version = torch.__version__
    assert install_torch(sys.executable, bin_dir) == [
        f"bootstrap: torch: keeping the installed torch {version} (set BERTATTN_TORCH=torch==X to ask for another)"]
    kept = install_torch(sys.executable, bin_dir, BERTATTN_TORCH=f"torch=={version.split('+')[0]}")
    assert kept[0].startswith(f"bootstrap: torch: keeping the installed torch {version} (it satisfies")
    other = install_torch(sys.executable, bin_dir, BERTATTN_TORCH="torch==1.0.0")
    assert other[-1] == f"bootstrap: torch: $ {sys.executable} -m pip install torch==1.0.0"


def project_copy(tmp_path) -> Path:
    proj = tmp_path / "proj"
    (proj / "scripts").mkdir(parents=True)
    for f in ("bootstrap.sh", "install_torch.sh"):
        shutil.copy(ROOT / "scripts" / f, proj / "scripts" / f)
    shutil.copy(ROOT / "pyproject.toml", proj)
    return proj


def bootstrap(proj, python, **env):
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("BERTATTN_")}, "PYTHON": str(python), **env}
    return subprocess.run(["bash", "scripts/bootstrap.sh"], cwd=proj, env=env, capture_output=True, text=True,
                          timeout=60)


def test_failed_venv_leaves_no_venv_that_the_next_run_trusts(tmp_path):
    proj = project_copy(tmp_path)
    # like python3 without python3-venv: .venv/bin/python is created, then ensurepip is missing
    broken = script(tmp_path / "python3", 'mkdir -p .venv/bin && ln -sf /bin/true .venv/bin/python\n'
                                          'echo "The virtual environment was not created successfully because '
                                          'ensurepip is not available." >&2; exit 1\n')
    first = bootstrap(proj, broken)
    assert first.returncode == 1 and not (proj / ".venv").exists()
    assert "ensurepip is not available" in first.stderr and "apt install python3-venv" in first.stderr
    # a half-made .venv left by an older bootstrap: not trusted, made again (and fails again, cleanly)
    script(proj / ".venv" / "bin" / "python", "exit 1\n")
    second = bootstrap(proj, broken)
    assert "incomplete" in second.stdout and second.returncode == 1 and not (proj / ".venv").exists()


def test_stamp_covers_the_torch_pin(tmp_path):
    proj = project_copy(tmp_path)
    calls = tmp_path / "calls.log"
    # a .venv whose python records every call and succeeds (pip installs are no-ops)
    script(proj / ".venv" / "bin" / "python", f'echo "$*" >> {calls}\n')
    env = {"BERTATTN_TORCH_INDEX": UNREACHABLE, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    first = bootstrap(proj, "python3", **env)
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines()[-1] == "bootstrap: done"
    installs = [c for c in calls.read_text().splitlines() if c.startswith("-m pip install")]
    assert installs[1].endswith(" torch==2.13.0") and installs[2] == "-m pip install -e .[test]", installs
    n = len(calls.read_text().splitlines())
    again = bootstrap(proj, "python3", **env)
    assert again.stdout == "" and len(calls.read_text().splitlines()) == n + 1  # only the `pip --version` check
    pinned = bootstrap(proj, "python3", BERTATTN_TORCH="torch==2.12.0", **env)
    later = [c for c in calls.read_text().splitlines()[n + 1:] if c.startswith("-m pip install")]
    assert pinned.returncode == 0 and later[1].endswith(" torch==2.12.0"), later
