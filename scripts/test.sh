#!/usr/bin/env bash
# The tests: set up (if needed), the linter and the type check (scripts/lint.sh), then the unit tests. Extra
# arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
bash scripts/lint.sh
exec .venv/bin/python -m pytest tests "$@"
