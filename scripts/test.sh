#!/usr/bin/env bash
# The tests: set up (if needed) and run the unit tests. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/python -m pytest tests "$@"
