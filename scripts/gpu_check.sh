#!/usr/bin/env bash
# Issue 47's GPU check, one prepared script (about 4-6 minutes on one H100/H200; budget 8): prints
#   1. the Clark §4 core against its floor (scripts/core_vs_floor.py, interleaved rounds, median) for MiniLM and a
#      bert-base-shaped random model (12 layers x 12 heads, hidden 768), at batch 32 and 128; for MiniLM at batch 32
#      also the operators with the most device time in one core pass and one floor pass (torch.profiler);
#   2. the fine-tune against a plain Hugging Face loop (scripts/finetune_vs_naive.py, MRPC, 3 epochs, on the GPU),
#      eager and with the step as CUDA graphs;
#   3. the quick tier's wall time from a cold pass cache, and its five most expensive tests (pytest --durations=5).
# Every section prints its device (nvidia-smi's name) and its command; a section that fails says so and the next one
# runs (one lent machine, one try). Append the output to docs/results.md. GPU_CHECK_OUT=DIR: the quick tier's claims
# report and log are left there as report.tar.gz. BERTATTN_COMMIT names the commit where the checkout has no .git.
#
#   BERTATTN_DATA_DIR=../shared/data bash scripts/gpu_check.sh            # on a GPU machine
#   BERTATTN_DATA_DIR=../shared/data bash scripts/gpu_check.sh --smoke    # anywhere (CPU): tiny sizes, checks it runs
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
DATA=${BERTATTN_DATA_DIR:?set BERTATTN_DATA_DIR to the data folder}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
SMOKE=0
[[ "${1:-}" == "--smoke" ]] && SMOKE=1
if (( SMOKE )); then
  ROUNDS=1; LIMIT="--limit 64"; BATCHES="32"; EPOCHS="--epochs 1 --max-train 64"
  QUICK=(-k "surface and not negative" --limit 20)
else
  ROUNDS=5; LIMIT=""; BATCHES="32 128"; EPOCHS="--epochs 3"
  QUICK=()
fi
failed() { echo "!! that section failed (exit $1); going on"; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
COMMIT=${BERTATTN_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo "unknown commit")}
echo "== device: $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null || echo "no NVIDIA GPU (CPU)")"
echo "== torch $($PY -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda)'), transformers" \
  "$($PY -c 'import transformers; print(transformers.__version__)'), $COMMIT, $(date -u +%FT%TZ)$( (( SMOKE )) && echo ', SMOKE sizes')"

# a bert-base-shaped random model: the embedded tokenizer with a 12 x 12, 768-wide config (weights never loaded)
BASE="$WORK/bert-base-shape"
$PY - "$BASE" <<'PYEOF' || failed $?
import json, shutil, sys
from pathlib import Path
from bertattn_bench.engine.model import embedded_model_path
src, out = Path(embedded_model_path()), Path(sys.argv[1])
out.mkdir(parents=True)
for f in src.iterdir():
    if f.is_file() and f.suffix not in (".safetensors", ".bin", ".pt", ".onnx", ".h5", ".msgpack"):
        shutil.copy(f, out / f.name)
config = json.loads((src / "config.json").read_text())
config.update(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)
(out / "config.json").write_text(json.dumps(config))
PYEOF

SECONDS=0
for model in embedded "random:$BASE"; do
  for b in $BATCHES; do
    echo "== core/floor: model ${model/$WORK/TMP}, batch $b ($ROUNDS rounds)"
    PROFILE=""
    [[ "$model" == embedded && "$b" == 32 ]] && PROFILE="--profile"
    echo "\$ scripts/core_vs_floor.py --data-dir DATA --model ${model/$WORK/TMP} --batch-size $b --rounds $ROUNDS $LIMIT $PROFILE"
    $PY scripts/core_vs_floor.py --data-dir "$DATA" --model "$model" --batch-size "$b" --rounds "$ROUNDS" $LIMIT \
      $PROFILE 2>&1 | grep -v "Loading weights" || failed $?
  done
done
echo "== ($SECONDS s so far)"
echo "== fine-tune vs the plain loop"
# interleaved (ours first: the process's first run pays the device's warm-up), the medians and their ratio at the end
# ours-graphs: the step as CUDA graphs per batch shape, batches padded to 16 (Recipe.step_graphs; off by default
# until this check has measured it); ours-pad16: that padding alone, eager
FT_VARIANTS=ours-fp32,naive,ours-graphs,ours-fp32,naive,ours-graphs,ours-fp32,naive,ours-graphs,ours-pad16,ours-bf16
echo "\$ scripts/finetune_vs_naive.py --data-dir DATA $EPOCHS --variants $FT_VARIANTS"
$PY scripts/finetune_vs_naive.py --data-dir "$DATA" $EPOCHS --variants "$FT_VARIANTS" 2>&1 \
  | grep -v "Loading weights\|it/s\]$" || failed $?
echo "== ($SECONDS s so far)"
echo "== the quick tier, cold pass cache"
echo "\$ pytest benchmarks -q ${QUICK[*]} --durations=5"
start=$SECONDS
BERTATTN_CACHE_DIR="$WORK/cache" $PY -m pytest benchmarks -q -p no:cacheprovider "${QUICK[@]}" --durations=5 \
  --claims-report "$WORK/report" > "$WORK/quick.log" 2>&1 || failed $?
grep -A8 "slowest" "$WORK/quick.log" | grep -v "^$" | head -12
grep -E "^(FAILED|ERROR)|[0-9]+ (passed|failed|error)" "$WORK/quick.log" | head -20
if [[ -n "${GPU_CHECK_OUT:-}" ]]; then
  tar -czf "$GPU_CHECK_OUT/report.tar.gz" -C "$WORK" $(cd "$WORK" && ls -d report quick.log 2>/dev/null)
fi
echo "== quick tier wall time: $((SECONDS - start)) s; whole check: $SECONDS s"
