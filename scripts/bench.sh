#!/usr/bin/env bash
# The main job: set up (if needed) and run the claim benchmarks on the embedded model (or --model ...).
# The data: --data-dir DIR or BERTATTN_DATA_DIR=DIR, else the default data folder (python -m bertattn_bench data
# fetch fills it; docs/data.md). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
# -p short_options first: Ctrl-C from here on is one line and exit 2 (it loads before the entry-point plugins);
# hypothesis and anyio are plugins of the unit tests and of nothing here (their import costs ~2 s of start-up)
exec .venv/bin/python -m pytest benchmarks -p bertattn_bench.faces.short_options -p no:hypothesispytest -p no:anyio \
    --benchmark-columns=min,mean,rounds "$@"
