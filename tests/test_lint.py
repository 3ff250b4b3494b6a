"""The linter and the type check (issue 44): scripts/lint.sh runs ruff over the code and mypy over the lower floors
with pyproject.toml's settings; here, that both fail on a planted fault (an unused import, a type error), so a
passing lint means something."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _tool(module: str, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    if subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True).returncode:
        pytest.skip(f"{module} is not installed (pip install -e '.[test]')")
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, cwd=cwd, timeout=600)


def test_ruff_fails_on_a_planted_unused_import(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text("import os\n\n\ndef f(x: int) -> int:\n    return x\n")
    out = _tool("ruff", "check", "--no-cache", "--config", str(ROOT / "pyproject.toml"), str(planted))
    assert out.returncode == 1 and "F401" in out.stdout and "`os` imported but unused" in out.stdout
    planted.write_text("def f(x: int) -> int:\n    return x\n")
    assert _tool("ruff", "check", "--no-cache", "--config", str(ROOT / "pyproject.toml"), str(planted)).returncode == 0


def test_mypy_fails_on_a_planted_type_error(tmp_path):
    """The project's mypy settings over a copy of a checked module with a type error planted in it."""
    pkg = tmp_path / "bertattn_bench" / "claims"
    pkg.mkdir(parents=True)
    (tmp_path / "bertattn_bench" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    shutil.copy(ROOT / "bertattn_bench" / "claims" / "verdicts.py", pkg / "verdicts.py")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    args = ("--no-error-summary", "--cache-dir", str(tmp_path / ".mypy"), "bertattn_bench/claims/verdicts.py")
    assert _tool("mypy", *args, cwd=tmp_path).returncode == 0
    with open(pkg / "verdicts.py", "a") as f:
        f.write("\n\ndef planted() -> int:\n    return verdict_of({})  # a str where an int is promised\n")
    out = _tool("mypy", *args, cwd=tmp_path)
    assert out.returncode == 1 and "Incompatible return value type" in out.stdout
