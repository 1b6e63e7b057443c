#!/usr/bin/env bash
# One GPU call: the training comparison + step benchmark (scripts/gpu_train.sh, MINUTES) while the
# C++/CUDA tree builds in the background (niced, 12 jobs), then the Quartet tile test (both kernel
# versions), the FP4 kernel benchmark and compute-sanitizer with what time is left. Everything is
# packed into $OUT/run.tgz (one file comes back). Usage: bash scripts/gpu_call_train.sh [MINUTES=7]
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
MINUTES=${1:-7}
R=$OUT/run
mkdir -p "$R"
t0=$(date +%s)
( { cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DNIBBLE_BENCH=ON && nice -n 10 cmake --build build-gpu -j 12 -- -k 0; } \
    >"$R/build.txt" 2>&1; echo "build rc=$? after $(( $(date +%s) - t0 )) s" >>"$R/build.txt" ) &
bpid=$!
OUT=$R BENCH_JSON=docs/perf/2026-12-03-h200/run2/bench.json bash scripts/gpu_train.sh "$MINUTES" >"$R/train-stdout.txt" 2>&1
echo "train done after $(( $(date +%s) - t0 )) s"
wait $bpid; tail -1 "$R/build.txt"
timeout 60 build-gpu/tests/cuda/test_quartet_fp4 >"$R/test_quartet_fp4.txt" 2>&1; echo "test_quartet_fp4 rc=$?"; tail -3 "$R/test_quartet_fp4.txt"
timeout 60 build-gpu/bench/gpu_quant_fp4_bench --json "$R/gpu_quant_fp4_bench.json" >"$R/fp4-bench.txt" 2>&1; echo "fp4 bench rc=$?"
left=$(( 570 - ($(date +%s) - t0) ))
if [ "$left" -gt 20 ]; then
  timeout "$left" bash scripts/compute_sanitizer.sh build-gpu >"$R/compute-sanitizer.txt" 2>&1; echo "compute-sanitizer rc=$? (limit ${left} s)"
  cp -r build-gpu/compute-sanitizer "$R/" 2>/dev/null
fi
tail -25 "$R/train-stdout.txt"
tar -C "$OUT" -czf "$OUT/run.tgz" run && rm -rf "$R"
echo "total $(( $(date +%s) - t0 )) s"
