#!/usr/bin/env bash
# One call on the GPU machine for the loss study: build nibble._C with its CUDA kernels (once per warm
# machine, in build-py-gpu), optionally the speed table (train/speed.py, SPEED=1), then train/plan.py with
# the seconds left and WORKERS runs at a time, copying runs.csv, failed.csv and curves.jsonl to $OUT after
# every finished run. Copy $OUT/runs.csv (and the other two) back over data/law/loss-study/ so the next
# call resumes after them. Exits non-zero when the build, the speed table or the plan fails.
# Usage: OUT=/tmp/o [SPEED=1] [SPEED_SIZES=xs,s] [WORKERS=3] bash tools/loss_study_gpu.sh [SECONDS=570] [plan.py args]
set -uo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
LIMIT=${1:-570}; shift || true
PY=${PYTHON:-python3}
build=${NIBBLE_PY_BUILD:-build-py-gpu}
OUT=${OUT:-/tmp/nibble-loss-study}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
left() { echo $(( LIMIT - ($(date +%s) - t0) )); }
if [ ! -f "$build/build.ninja" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNIBBLE_CUDA=ON -DNIBBLE_TESTS=OFF \
    -DNIBBLE_BENCH=OFF -DNIBBLE_PYTHON=ON -DPython_EXECUTABLE="$(command -v "$PY")" >"$OUT/build.txt" 2>&1 \
    || { tail -20 "$OUT/build.txt"; rm -f "$build/build.ninja"; echo "loss_study_gpu: configure failed"; exit 1; }
fi
timeout -k 5 "$(( $(left) - 60 ))" cmake --build "$build" -j 16 --target nibble_python_ext >>"$OUT/build.txt" 2>&1 \
  || { grep -E "error|FAILED" "$OUT/build.txt" | head -20; echo "loss_study_gpu: build failed"; exit 1; }
echo "build done at $(( $(date +%s) - t0 )) s"
export PYTHONPATH=python NIBBLE_BUILD_DIR="$build"
# The study's files live in an ignored folder on the GPU machine, which a warm machine keeps between calls;
# the committed ones (copied back after each call) seed it when they hold more runs (a fresh machine).
study=${STUDY_DIR:-out/loss-study}
mkdir -p "$study"
for f in runs.csv failed.csv curves.jsonl; do
  src=data/law/loss-study/$f
  if [ -f "$src" ] && [ "$(wc -l <"$src")" -gt "$(cat "$study/$f" 2>/dev/null | wc -l)" ]; then cp "$src" "$study/$f"; fi
done
status=0
if [ "${SPEED:-0}" = 1 ]; then
  timeout -k 5 "${SPEED_SECONDS:-240}" "$PY" train/speed.py --sizes "${SPEED_SIZES:-xs,s}" --json "$OUT/speed-$(echo "${SPEED_SIZES:-xs,s}" | tr , -).json" \
    2>"$OUT/speed-log.txt"
  rc=$?
  echo "speed table: exit $rc at $(( $(date +%s) - t0 )) s"
  [ "$rc" -eq 0 ] || { tail -30 "$OUT/speed-log.txt"; status=$rc; }
fi
"$PY" train/plan.py --csv "$study/runs.csv" --max-seconds "$(( $(left) - 15 ))" --workers "${WORKERS:-3}" \
  --copy-to "$OUT" "$@" 2>&1 \
  | tee "$OUT/plan-log.txt"
rc=${PIPESTATUS[0]}
echo "plan: exit $rc at $(( $(date +%s) - t0 )) s"
[ "$rc" -eq 0 ] || status=$rc
exit "$status"
