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
echo "$(el) build rc=$?"
# The throttle-reason field was renamed (clocks_event_reasons in newer drivers); use whichever exists.
reasons=clocks_event_reasons.active
nvidia-smi --query-gpu=$reasons --format=csv >/dev/null 2>&1 || reasons=clocks_throttle_reasons.active
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,$reasons \
  --format=csv -lms 100 >"$R/smi.csv" 2>&1 &
smi=$!
ms=${WARMUP_MS:-200}
reversed=bf16,fp8-current,fp8-delayed,fp8-block,mxfp8,nvfp4,mxfp4,quartet
run() {  # name, then nibble bench arguments
  local name=$1; shift
  echo "$(el) start $name" >>"$R/marks.txt"
  timeout 240 build-gpu/nibble bench --quiet --json "$R/bench-$name.json" "$@" >"$R/bench-$name.txt" 2>&1
  echo "$(el) $name rc=$?"; echo "$(el) end $name" >>"$R/marks.txt"
}
run default
run warm --warmup-ms "$ms"
run reversed --recipes "$reversed"
run reversed-warm --recipes "$reversed" --warmup-ms "$ms"
kill $smi 2>/dev/null
python3 scripts/bench_noise.py "$R"/bench-default.json "$R"/bench-warm.json "$R"/bench-reversed.json \
  "$R"/bench-reversed-warm.json | tee "$R/noise.txt"
tar -czf "$OUT/run.tgz" -C "$OUT" run
