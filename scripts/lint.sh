#!/usr/bin/env bash
# The linter (ruff: unused imports and names, bare excepts, shadowed builtins, import order) over the package, the
# tests, the benchmarks and the scripts, and the type check (mypy) of the lower floors (base, claims, engine); their
# settings are in pyproject.toml. Run by scripts/test.sh (and so by .ci/run). Extra arguments go to neither.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -m ruff check --no-cache bertattn_bench tests benchmarks scripts conftest.py
.venv/bin/python -m mypy --no-error-summary --cache-dir .venv/mypy_cache
