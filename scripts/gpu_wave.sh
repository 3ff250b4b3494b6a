#!/usr/bin/env bash
# Stop 70's GPU check (issues 61, 63-64), one prepared script for one lent GPU: six jobs side by side, each stopped
# with SIGINT after GPU_WAVE_BUDGET seconds (default 480; an interrupted pytest writes its report, marked
# complete: false), then every job's reports packed into $GPU_CHECK_OUT (at most 8 files come back):
#   quick    the whole quick tier from a cold pass cache, seed 0, against the CPU-recorded baselines (its wall time
#            here is shared with the other jobs: not a speed figure)
#   sq012    issue 61's seed-flip check, quick tier, every family reading a trained model, seeds 0, 1, 2
#   sq345    the same at seeds 3, 4, 5 (seeds the CPU runs never used: is the seed interval calibrated?)
#   sr012    the regression tier's seed-flip check (finetune, disable, prune, probes): windows 0-4, 1-5, 2-6
#   sr7      the same at windows 7-11 and 12-16
#   full     the full tier of trees, trees_ft, roles (issue 64), recorded into a copy of the baselines
#   gates    the full tier of the gates on MRPC (its 5 seeds, 8 lambdas x 600 steps), recorded likewise
# Every spread job compares with the CPU baselines in reference_numbers/baselines (its --check). The spreads' runs
# are kept in their work folders (claims.json + spread-run.json per run), so the windows can be joined afterwards:
#   scripts/spread.py --family trained --runs 0:2,1:2,2:2,3:2,4:2,5:2 --work <unpacked sq> --out ... --check
#
#   bash .gpu2/run.sh --cmd bash scripts/gpu_wave.sh            # on the GPU machine (scripts/gpu_carry.sh --exact)
#   GPU_WAVE_SMOKE=1 BERTATTN_DATA_DIR=../shared/data bash scripts/gpu_wave.sh   # anywhere: tiny sizes, the plumbing
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
: "${BERTATTN_DATA_DIR:?set BERTATTN_DATA_DIR to the data folder}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} CI=1 OMP_NUM_THREADS=2
SMOKE=${GPU_WAVE_SMOKE:-0}
BUDGET=${GPU_WAVE_BUDGET:-480}
OUTD=${GPU_CHECK_OUT:-/tmp/gpu_wave_out}
W=${GPU_WAVE_WORK:-/tmp/gpu_wave}
rm -rf "$W" && mkdir -p "$W" "$OUTD"
if (( SMOKE )); then
  QUICK=(-k "(-surface- or -roles-) and not negative" --limit 20); LIM=(--limit 16)
  FULL_K="(-roles-) and not negative"; GATES_K="voita-gates-minilm-mrpc and prune_most"; TIER_FULL=quick
else
  QUICK=(); LIM=()
  FULL_K="(-trees- or -trees_ft- or -roles-)"; GATES_K="voita-gates-minilm-mrpc or voita-gates-random0-mrpc"; TIER_FULL=full
fi
COMMIT=${BERTATTN_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo "unknown commit")}
{
  echo "device: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "no NVIDIA GPU (CPU)")"
  echo "torch $($PY -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())')"
  echo "transformers $($PY -c 'import transformers; print(transformers.__version__)'), python $($PY -c 'import sys; print(sys.version.split()[0])')"
  echo "commit $COMMIT; $(date -u +%FT%TZ); cpus $(nproc); budget ${BUDGET}s per job; smoke $SMOKE"
  sha256sum "$($PY -c 'from bertattn_bench.engine.model import embedded_model_path; print(embedded_model_path())')/model.safetensors"
} | tee "$W/env.txt"
cp -r reference_numbers/baselines "$W/base-full"
cp -r reference_numbers/baselines "$W/base-gates"

job() {  # job NAME COMMAND...: in the background, stopped by SIGINT at the budget (KILL 30 s later)
  local name=$1; shift
  ( start=$SECONDS
    echo "\$ $*" > "$W/$name.log"
    timeout -s INT -k 30 "$BUDGET" "$@" >> "$W/$name.log" 2>&1
    echo "$name: exit $? after $((SECONDS - start)) s" | tee -a "$W/jobs.txt" ) &
}
PT=("$PY" -m pytest benchmarks -q -p no:cacheprovider)
job quick "${PT[@]}" "${QUICK[@]}" --durations=15 --cache-dir "$W/cq" --claims-report "$W/quick"
job sq012 "$PY" scripts/spread.py --family trained --runs 0:2,1:2,2:2 "${LIM[@]}" --work "$W/sq" --cache-dir "$W/cs" \
  --out "$W/sq/gpu-trained-quick-012.json" --check
job sq345 "$PY" scripts/spread.py --family trained --runs 3:2,4:2,5:2 "${LIM[@]}" --work "$W/sq" --cache-dir "$W/cs" \
  --out "$W/sq/gpu-trained-quick-345.json" --check
job sr012 "$PY" scripts/spread.py --family trained-regression --tier regression --runs 0:2,1:2,2:2 "${LIM[@]}" \
  --work "$W/sr" --cache-dir "$W/cr" --out "$W/sr/gpu-trained-regression-012.json" --check
job sr7 "$PY" scripts/spread.py --family trained-regression --tier regression --runs 7:2,12:2 "${LIM[@]}" \
  --work "$W/sr" --cache-dir "$W/cr" --out "$W/sr/gpu-trained-regression-7-12.json" --check
job full "${PT[@]}" --tier "$TIER_FULL" -k "$FULL_K" "${LIM[@]}" --durations=10 --cache-dir "$W/cr" \
  --claims-report "$W/full" --record-baseline "$W/base-full"
job gates "${PT[@]}" --tier "$TIER_FULL" -k "$GATES_K" "${LIM[@]}" --durations=10 --cache-dir "$W/cr" \
  --claims-report "$W/gates" --record-baseline "$W/base-gates"
# (a -k expression must not begin with "-": argparse would read it as an option)
# the GPU's use while the jobs run (one line every 15 s)
( while sleep 15; do
    echo "$(date -u +%T) $(nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader 2>/dev/null) load $(cut -d' ' -f1 /proc/loadavg)"
  done > "$W/gpu-use.txt" 2>&1 ) &
MON=$!
wait $(jobs -p | grep -v "^$MON$") 2>/dev/null
kill $MON 2>/dev/null
cat "$W/jobs.txt"
for name in quick sq012 sq345 sr012 sr7 full gates; do tail -4 "$W/$name.log" | sed "s/^/[$name] /"; done
# what comes back (8 files at most): the reports without figures and pages, the spreads' runs, the recorded baselines
tar -czf "$OUTD/reports.tar.gz" -C "$W" --exclude='*.png' --exclude='*.html' --exclude='*.pdf' \
  $(cd "$W" && ls -d quick full gates sq sr 2>/dev/null)
tar -czf "$OUTD/logs.tar.gz" -C "$W" env.txt jobs.txt gpu-use.txt $(cd "$W" && ls *.log)
cp "$W/base-full/all-MiniLM-L6-v2.json" "$OUTD/base-full.json" 2>/dev/null
cp "$W/base-gates/all-MiniLM-L6-v2.json" "$OUTD/base-gates.json" 2>/dev/null
ls -la "$OUTD"
