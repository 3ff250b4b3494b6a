#!/usr/bin/env bash
# The main job: set up (if needed) and run the claim benchmarks on the embedded model (or --model ...).
# The data: --data-dir DIR or BERTATTN_DATA_DIR=DIR, else the default data folder (python -m bertattn_bench data
# fetch fills it; docs/data.md). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/python -m pytest benchmarks --benchmark-columns=min,mean,rounds "$@"
