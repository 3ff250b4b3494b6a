#!/usr/bin/env bash
# Install the torch build that fits this machine into a Python environment, and say which it chose.
#
#   bash scripts/install_torch.sh PYTHON [--dry-run]      (scripts/bootstrap.sh and tox call it)
#
# * torch already importable by PYTHON: kept (when $BERTATTN_TORCH is set, only if it satisfies that pin).
# * an NVIDIA GPU (`nvidia-smi -L` lists one): the package index's build, which on Linux is the CUDA build:
#       PYTHON -m pip install torch==2.13.0
# * no NVIDIA GPU: the CPU-only wheel from PyTorch's CPU index ($BERTATTN_TORCH_INDEX,
#   default https://download.pytorch.org/whl/cpu), a few hundred MB instead of GBs of nvidia-* wheels:
#       PYTHON -m pip install --index-url https://download.pytorch.org/whl/cpu torch==2.13.0
#   Where that index cannot be reached (only the package index is), the package index: fine where pip has a
#   local CPU wheel (find-links, a mirror); where it resolves the CUDA build instead, this says so afterwards.
# The pin is $BERTATTN_TORCH (default torch==2.13.0, the version the recorded baselines were measured with).
# pip's own output goes to $BERTATTN_PIP_LOG (default: the terminal).
set -euo pipefail
PY=${1:?usage: install_torch.sh PYTHON [--dry-run]}
DRY=${2:-}
PIN=${BERTATTN_TORCH:-torch==2.13.0}
CPU_INDEX=${BERTATTN_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}
LOG=${BERTATTN_PIP_LOG:-/dev/stdout}
say() { echo "bootstrap: torch: $*"; }

installed=$("$PY" - "$PIN" "${BERTATTN_TORCH:+pinned}" <<'PY' 2>/dev/null || true
import sys
from importlib.metadata import PackageNotFoundError, version
try:
    v = version("torch")
except PackageNotFoundError:
    sys.exit(0)
if sys.argv[2] == "pinned":  # an explicit $BERTATTN_TORCH: keep the installed torch only if it satisfies it
    from pip._vendor.packaging.requirements import Requirement
    if not Requirement(sys.argv[1]).specifier.contains(v, prereleases=True):
        sys.exit(0)
print(v)
PY
)
if [ -n "$installed" ]; then
  say "keeping the installed torch $installed (${BERTATTN_TORCH:+it satisfies $PIN; }set BERTATTN_TORCH=torch==X to ask for another)"
  exit 0
fi

gpus=$( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU ' || true)
if [ "$gpus" -gt 0 ]; then
  say "$gpus NVIDIA GPU(s) found by nvidia-smi: installing the CUDA build from the package index"
  cmd=("$PY" -m pip install "$PIN")
elif [ "$(uname -s)" != Linux ]; then
  say "$(uname -s), no NVIDIA GPU: the package index's build (CPU on this system)"
  cmd=("$PY" -m pip install "$PIN")
elif "$PY" -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1].rstrip('/') + '/torch/', timeout=8)" \
    "$CPU_INDEX" >/dev/null 2>&1; then
  say "no NVIDIA GPU: installing the CPU-only wheel from $CPU_INDEX"
  cmd=("$PY" -m pip install --index-url "$CPU_INDEX" "$PIN")
else
  say "no NVIDIA GPU and $CPU_INDEX is not reachable: installing from the package index (a local CPU wheel if pip has one)"
  cmd=("$PY" -m pip install "$PIN")
fi
echo "bootstrap: torch: \$ ${cmd[*]}"
[ "$DRY" = --dry-run ] && exit 0
if ! "${cmd[@]}" >>"$LOG" 2>&1; then
  say "the install failed (see ${BERTATTN_PIP_LOG:-the output above})" >&2
  exit 1
fi
build=$("$PY" -W ignore -c "import torch; print(torch.__version__, 'CUDA ' + torch.version.cuda if torch.version.cuda else 'CPU-only')")
say "installed torch $build"
if [ "$gpus" -eq 0 ] && [[ "$build" == *CUDA* ]]; then
  say "note: the package index gave a CUDA build on a machine without an NVIDIA GPU (it runs on CPU, but takes GBs);" \
      "where $CPU_INDEX is reachable, 'rm -rf .venv' and re-run for the CPU-only wheel" >&2
fi
