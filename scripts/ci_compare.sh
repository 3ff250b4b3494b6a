#!/usr/bin/env bash
# Swap an encoder in, learn which claims still hold, fail the build when one is lost (issue 37).
#
#   scripts/ci_compare.sh MODEL_A MODEL_B [pytest args, e.g. -k dependency --limit 50]
#
# 1. data: $BERTATTN_DATA_DIR must hold the data sets; where it is missing and $BERTATTN_DATA_FETCH is set, that
#    command is run first to fetch (or restore) them;
# 2. records MODEL_A's baseline into $OUT/baseline/<slug>.json (its claims report in $OUT/A); a baseline already
#    there (e.g. restored from a CI cache of the default branch) is reused with BERTATTN_REUSE_BASELINE=1;
# 3. runs MODEL_B judged against it (compare: a claim that held on A and does not hold on B fails), report in $OUT/B;
# 4. writes the Markdown job summary to $OUT/summary.md and appends it to $GITHUB_STEP_SUMMARY when set.
#
# Both runs use the persistent pass cache $BERTATTN_CACHE_DIR (default .bertattn_cache): keep it between CI runs.
# Exit status: 0 every check passed; 1 a claim was lost or a check failed (named on stderr and in the summary);
# 4 bad usage or input (arguments, data folder, model, cache folder); anything else: pytest's own status.
# Env: PYTHON (default .venv/bin/python where present, else python3), OUT (default out/ci).
set -uo pipefail

usage() { echo "usage: $0 MODEL_A MODEL_B [pytest args]" >&2; exit 4; }
[ $# -ge 2 ] || usage
A=$1 B=$2
shift 2
cd "$(dirname "$0")/.."
if [ -z "${PYTHON:-}" ]; then
  if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
OUT=${OUT:-out/ci}
CACHE=${BERTATTN_CACHE_DIR:-.bertattn_cache}
DATA=${BERTATTN_DATA_DIR:-}

if [ -n "$DATA" ] && [ ! -d "$DATA" ] && [ -n "${BERTATTN_DATA_FETCH:-}" ]; then
  echo "ci_compare: fetching data into $DATA: $BERTATTN_DATA_FETCH"
  bash -c "$BERTATTN_DATA_FETCH" || { echo "ci_compare: ERROR: the data fetch command failed" >&2; exit 4; }
fi
if [ -z "$DATA" ] || [ ! -d "$DATA" ]; then
  echo "ci_compare: ERROR: set BERTATTN_DATA_DIR to the data folder (ud_english_ewt/, gum/, glue/, ...)${DATA:+; $DATA is not a folder}" >&2
  exit 4
fi
mkdir -p "$OUT" "$CACHE" || { echo "ci_compare: ERROR: cannot create $OUT or the cache folder $CACHE" >&2; exit 4; }

common=(--data-dir "$DATA" --cache-dir "$CACHE" --benchmark-disable)

# 1. model A's baseline
baseline=$(ls "$OUT"/baseline/*.json 2>/dev/null | head -n 1)
if [ "${BERTATTN_REUSE_BASELINE:-0}" = 1 ] && [ -n "$baseline" ]; then
  echo "ci_compare: reusing the baseline $baseline"
else
  rm -rf "$OUT/baseline"
  echo "ci_compare: recording the baseline of $A"
  "$PYTHON" -m bertattn_bench run --model "$A" "${common[@]}" --claims-report "$OUT/A" \
      --record-baseline "$OUT/baseline" "$@" > "$OUT/A.log" 2>&1
  rc=$?
  tail -n 5 "$OUT/A.log"
  baseline=$(ls "$OUT"/baseline/*.json 2>/dev/null | head -n 1)
  if [ -z "$baseline" ]; then
    echo "ci_compare: ERROR: recording $A wrote no baseline (pytest exit $rc); see $OUT/A.log" >&2
    [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ] && exit "$rc"
    exit 4
  fi
fi

# 2. model B against it
echo "ci_compare: running $B against $baseline"
"$PYTHON" -m bertattn_bench compare --model "$B" --against "$baseline" "${common[@]}" \
    --claims-report "$OUT/B" "$@" > "$OUT/B.log" 2>&1
rc=$?
tail -n 5 "$OUT/B.log"
if [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ]; then  # no verdict: usage/input error (4), interrupted (2), internal (3), ...
  echo "ci_compare: ERROR: the run of $B stopped with pytest exit status $rc; see $OUT/B.log" >&2
  exit "$rc"
fi

# 3. the job summary (names the lost claims; --fail: exit 1 when one is lost or a check failed)
rm -f "$OUT/summary.md"
"$PYTHON" -m bertattn_bench summary "$OUT/B" --title "bertattn-bench: $B against $A" --out "$OUT/summary.md" \
    --fail > /dev/null
summary_rc=$?
if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then cat "$OUT/summary.md" >> "$GITHUB_STEP_SUMMARY"; fi
echo "ci_compare: reports in $OUT/A and $OUT/B, summary in $OUT/summary.md"
if [ "$rc" -eq 1 ] || [ "$summary_rc" -ne 0 ]; then
  echo "ci_compare: FAILED: $B loses claims that hold on $A, or a check failed (pytest $rc, summary $summary_rc)" >&2
  exit 1
fi
echo "ci_compare: OK: every claim that held on $A holds on $B"
exit 0
