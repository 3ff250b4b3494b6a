#!/usr/bin/env bash
# The full tier of a selection, recorded and then checked from an empty pass cache (issue 36's procedure):
#
#   bash scripts/full_tier.sh SELECT CACHE_DIR record|check [pytest args]
#
# record: pytest benchmarks --tier full -k SELECT --cache-dir CACHE_DIR/record --record-baseline (resumable: a rerun
#         reuses the finished passes and checkpoints; keep CACHE_DIR outside the work tree).
# check:  a new pass cache CACHE_DIR/check-<time> that holds only the record run's trained checkpoints (hard links to
#         CACHE_DIR/record/finetune and CACHE_DIR/record/arct_ft), then the same selection against the recorded
#         baselines: every pass computed again, every value checked; prints the wall time.
# The data comes from $BERTATTN_DATA_DIR (or --data-dir in the extra arguments). Hours on 2 CPU cores: run it niced,
# alone (e.g. nice -n 19 bash scripts/full_tier.sh kovaleva /work/.bertattn-full record).
set -euo pipefail
SELECT=${1:?usage: full_tier.sh SELECT CACHE_DIR record|check [pytest args]}
CACHE=${2:?usage: full_tier.sh SELECT CACHE_DIR record|check [pytest args]}
MODE=${3:?usage: full_tier.sh SELECT CACHE_DIR record|check [pytest args]}
shift 3
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh >/dev/null
run() { .venv/bin/python -m pytest benchmarks -q --benchmark-disable -p no:cacheprovider --tier full -k "$SELECT" "$@"; }
start=$(date +%s)
case "$MODE" in
  record)
    mkdir -p "$CACHE/record"
    run --cache-dir "$CACHE/record" --record-baseline "$@" ;;
  check)
    [ -d "$CACHE/record" ] || { echo "full_tier: no $CACHE/record (run record first)" >&2; exit 4; }
    fresh="$CACHE/check-$(date +%Y%m%d-%H%M%S)"
    mkdir -p "$fresh"
    for kind in finetune arct_ft; do  # the trained checkpoints only: no pass result is carried over
      [ -d "$CACHE/record/$kind" ] && cp -al "$CACHE/record/$kind" "$fresh/$kind"
    done
    find "$fresh" -name '*.npz' -delete  # pass results stored beside the checkpoints, if any
    run --cache-dir "$fresh" "$@" ;;
  *) echo "full_tier: mode must be record or check, got $MODE" >&2; exit 4 ;;
esac
echo "full_tier: $MODE -k $SELECT done in $(( $(date +%s) - start ))s"
