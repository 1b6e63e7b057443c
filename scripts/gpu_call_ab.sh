#!/usr/bin/env bash
# One GPU call that validates and A/Bs kernel changes not yet measured: build, every GPU test (C++
# and Python, before any timing), the FP8/FP4 kernel benchmarks (the FP4 one carries the Quartet
# backward tile versions 1/2/3 side by side), then nibble bench on the default model with the default
# tile kernel (version 1) and again with NIBBLE_QUARTET_TILE=3, so the step-faithful Quartet/MXFP4
# rows of both land in the same run next to BF16. Everything goes to $OUT/run (+ run.tgz).
# Usage: bash scripts/gpu_call_ab.sh      (about 6-7 minutes on the H200 with 16 cores)
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
R=$OUT/run
mkdir -p "$R"
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s]"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv >"$R/gpu.txt" 2>&1
( { cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DNIBBLE_BENCH=ON && cmake --build build-gpu -j 11 -- -k 0; } \
    >"$R/build.txt" 2>&1; echo "build rc=$?" >>"$R/build.txt" ) &
bpid=$!
JOBS=5 DEADLINE=240 OUT=$R bash scripts/gpu_python_test.sh >"$R/python-gpu.txt" 2>&1; echo "$(el) python: $(tail -1 "$R/python-gpu.txt")"
wait $bpid; echo "$(el) $(tail -1 "$R/build.txt")"
ctest --test-dir build-gpu -L gpu --output-on-failure --timeout 200 >"$R/gpu-tests.txt" 2>&1; echo "$(el) $(grep 'tests passed' "$R/gpu-tests.txt")"
grep -E "FAILED|Failure" "$R/gpu-tests.txt" | head -20
for x in build-gpu/bench/gpu_quant_fp4_bench build-gpu/bench/gpu_quant_fp8_bench; do
  timeout 100 "$x" --json "$R/$(basename "$x").json" >"$R/$(basename "$x").txt" 2>&1; echo "$(el) $(basename "$x") rc=$?"
done
grep -E "quartet bwd|quartet fwd|mxfp4|copy" "$R/gpu_quant_fp4_bench.txt" | head -40
timeout 120 build-gpu/nibble bench --quiet --json "$R/bench.json" --html "$R/bench.html" >"$R/bench.txt" 2>&1; echo "$(el) bench (tile v1) rc=$?"
NIBBLE_QUARTET_TILE=3 timeout 90 build-gpu/nibble bench --quiet --recipes bf16,mxfp4,quartet --json "$R/bench-tile3.json" \
  >"$R/bench-tile3.txt" 2>&1; echo "$(el) bench (tile v3) rc=$?"
python3 - "$R" <<'PY'
import json, sys, os
R = sys.argv[1]
for f in ("bench.json", "bench-tile3.json"):
    p = os.path.join(R, f)
    if not os.path.exists(p): continue
    for s in json.load(open(p))["summary"]:
        print(f"{f:16s} {s['recipe']:12s} {s['mode']:14s} {s['layer_ms']:7.2f} ms {s['speedup_vs_bf16']:5.2f}x bound {s.get('bound_layer_ms') or 0:6.2f}")
PY
tar -C "$OUT" -czf "$OUT/run.tgz" run && rm -rf "$R"
echo "total $(( $(date +%s) - t0 )) s"
