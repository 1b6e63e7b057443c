#!/usr/bin/env bash
# One GPU call: the training comparison (train/train.py, all 7 recipes) on nibble's CUDA kernels.
# Builds nibble._C WITH CUDA for this python3 (torch, nanobind, cmake, ninja; no network) in
# build-py-gpu, checks that it imports with has_cuda, then trains with --backend auto (quartet,
# mxfp4, nvfp4 and the fp8 recipes on nibble's kernels; bf16 the plain torch path), the wall-clock
# budget being what BUDGET_S (default 575 s) leaves after the build. Everything lands in $OUT/run
# (log, results.json, runs.csv, val_loss.svg), packed into $OUT/run.tgz; results.json and
# val_loss.svg are also copied to $OUT. TRAIN_ARGS are appended to train.py's arguments.
# Usage (device machine): bash scripts/gpu_call_train_cuda.sh
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
R=${OUT:?set OUT}/run
mkdir -p "$R"
t0=$(date +%s)
budget=${BUDGET_S:-575}
el() { echo "[$(( $(date +%s) - t0 )) s]"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv >"$R/gpu.txt" 2>&1
build=build-py-gpu
{ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNIBBLE_CUDA=ON -DNIBBLE_TESTS=OFF \
    -DNIBBLE_BENCH=OFF -DNIBBLE_PYTHON=ON -DPython_EXECUTABLE="$(command -v python3)" &&
  cmake --build "$build" -j 16 --target nibble_python_ext; } >"$R/build.txt" 2>&1
rc=$?
echo "$(el) build rc=$rc"
[ $rc = 0 ] || { grep -E "error|FAILED" "$R/build.txt" | head -20; tar -C "$OUT" -czf "$OUT/run.tgz" run; exit 1; }
export PYTHONPATH=python NIBBLE_BUILD_DIR=$build
python3 -c "import sys, torch, nibble; e = nibble.load_extension(); print('nibble._C has_cuda =', e.has_cuda); \
sys.exit(0 if e.has_cuda and torch.cuda.is_available() else 1)" || { echo "nibble._C lacks CUDA or no GPU"; exit 1; }
minutes=$(awk -v s=$(( budget - ($(date +%s) - t0) - 20 )) 'BEGIN { printf "%.2f", s / 60 }')
echo "$(el) training budget $minutes min"
timeout -k 5 $(( budget - ($(date +%s) - t0) )) python3 train/train.py --max-minutes "$minutes" --backend auto \
  --out "$R/train" ${TRAIN_ARGS:-} >"$R/train-stdout.txt" 2>&1
rc=$?; echo "$(el) train rc=$rc"
grep -E "calibration|budget|STOPPED|DIVERGED|truncated|SKIPPED" "$R/train/log.txt" | head -30
tail -16 "$R/train/log.txt"
cp "$R/train/results.json" "$OUT/train-results.json" 2>/dev/null
cp "$R/train/val_loss.svg" "$OUT/val_loss.svg" 2>/dev/null
tar -C "$OUT" -czf "$OUT/run.tgz" run && rm -rf "$R"
echo "total $(( $(date +%s) - t0 )) s"
