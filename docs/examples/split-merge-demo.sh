#!/bin/bash
# issue 28 (docs/matrix.md): two parts in two processes (separate outputs and caches), merge, and one combined run to compare.
# Usage: BERTATTN_DATA_DIR=... bash docs/examples/split-merge-demo.sh   (about 75 s wall, 1 thread, 2-core CPU)
set -u
D=${D:-/tmp/bertattn-split-demo}   # work folder; REPO: the checkout to clone (default: this one)
REPO=${REPO:-$(git -C "$(dirname "$0")" rev-parse --show-toplevel)}
PY=${PY:-python}
rm -rf $D/clone $D/out && mkdir -p $D/out
REV=${REV:-$(git -C "$REPO" rev-parse HEAD)}
git clone -q "$REPO" $D/clone && cd $D/clone && git checkout -q "$REV"
git log --oneline -1
export PYTHONPATH=$PWD BERTATTN_DATA_DIR=${BERTATTN_DATA_DIR:?set it to the data folder} HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_NUM_THREADS=1

K="(surface or dependency) and not uncased_similar"
COMMON="--limit 20 --benchmark-disable -q"
M=$D/models; $PY docs/examples/make_tiny_models.py $M
echo "== part 1: the embedded model (and its random-init twin, the negative control)"
/usr/bin/time -f "%e s wall" $PY -m bertattn_bench run --model embedded -k "$K" $COMMON --cache-dir $D/out/cache-p1 \
  --claims-report $D/out/p1 --record-baseline $D/out/p1/baselines > $D/out/p1.log 2>&1; echo "rc=$?"; tail -1 $D/out/p1.log
echo "== part 2: two tiny models of other architectures (no twin: the control is part 1's)"
/usr/bin/time -f "%e s wall" $PY -m bertattn_bench run --model $M/tiny-bert --model $M/tiny-distilbert -k "$K and not negative_control" \
  $COMMON --cache-dir $D/out/cache-p2 --claims-report $D/out/p2 --record-baseline $D/out/p2/baselines > $D/out/p2.log 2>&1; echo "rc=$?"; tail -1 $D/out/p2.log
echo "== merge"
$PY -m bertattn_bench merge $D/out/merged $D/out/p1 $D/out/p2 --reference minilm
echo "== one combined run (its own cache: everything recomputed)"
/usr/bin/time -f "%e s wall" $PY -m bertattn_bench run --model embedded --model $M/tiny-bert --model $M/tiny-distilbert -k "$K" $COMMON \
  --cache-dir $D/out/cache-all --claims-report $D/out/combined --record-baseline $D/out/combined/baselines > $D/out/combined.log 2>&1; echo "rc=$?"; tail -1 $D/out/combined.log
$PY -m bertattn_bench matrix $D/out/combined-ref $D/out/combined --reference minilm > /dev/null
echo "== compare"
for f in claims.json claims.csv claims.md; do cmp -s $D/out/merged/$f $D/out/combined/$f && echo "$f: identical" || echo "$f: DIFFERS"; done
for f in matrix.md matrix.csv matrix.html; do cmp -s $D/out/merged/$f $D/out/combined-ref/$f && echo "$f (--reference minilm): identical" || echo "$f: DIFFERS"; done
for b in $D/out/combined/baselines/*.json; do echo "baseline $(basename $b):"; $PY -m bertattn_bench diff $b $D/out/merged/baselines/$(basename $b) | tail -1; done
ls $D/out/merged/baselines
