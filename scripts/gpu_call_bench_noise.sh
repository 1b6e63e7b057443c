#!/usr/bin/env bash
# One GPU call that tests why identical GEMMs time differently between rows of one `nibble bench`
# (docs/perf/bench-noise.md): the default sweep, the same with --warmup-ms (every row first runs its
# own work for that long), and both again with the FP8 recipes in the reverse order, while nvidia-smi
# logs SM clock, power and temperature every 100 ms. Then scripts/bench_noise.py compares them.
# Builds only the nibble binary (ninja). Output: $OUT/run/{bench-*.json,smi.csv,noise.txt}, packed
# into $OUT/run.tgz. Usage: WARMUP_MS=200 bash scripts/gpu_call_bench_noise.sh
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu_call_lib.sh
{ cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DNIBBLE_BENCH=OFF -DNIBBLE_TESTS=OFF &&
  cmake --build build-gpu -j 16 --target nibble; } >"$R/build.txt" 2>&1
rc=$?; echo "$(el) build rc=$rc"
gpu_bench_noise_runs build-gpu/nibble
tar -czf "$OUT/run.tgz" -C "$OUT" run
