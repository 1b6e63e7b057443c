#!/usr/bin/env bash
# One GPU call for the record: the C++/CUDA build and the Python extension build side by side, the
# GPU tests (C++ and Python; they run before any timing), then every benchmark one after another:
# FP8/FP4 kernels, nibble bench (default; all modes + autotune; llama-3-8b for the predictor),
# gpu_gemm_bench, the step benchmark (quartet on nibble's CUDA kernels), Triton's dot_scaled MXFP4.
# Everything lands in $OUT/run and is packed into $OUT/run.tgz. Usage: bash scripts/gpu_call_final.sh
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
R=$OUT/run
mkdir -p "$R"
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s]"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv >"$R/gpu.txt" 2>&1
( { cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DNIBBLE_BENCH=ON && cmake --build build-gpu -j 10 -- -k 0; } \
    >"$R/build.txt" 2>&1; echo "build rc=$?" >>"$R/build.txt" ) &
bpid=$!
JOBS=6 DEADLINE=240 OUT=$R bash scripts/gpu_python_test.sh >"$R/python-gpu.txt" 2>&1; echo "$(el) python: $(tail -1 "$R/python-gpu.txt")"
wait $bpid; echo "$(el) $(tail -1 "$R/build.txt")"
ctest --test-dir build-gpu -L gpu --output-on-failure --timeout 200 >"$R/gpu-tests.txt" 2>&1; echo "$(el) $(grep 'tests passed' "$R/gpu-tests.txt")"
for x in build-gpu/bench/gpu_quant_fp8_bench build-gpu/bench/gpu_quant_fp4_bench; do
  timeout 90 "$x" --json "$R/$(basename "$x").json" >"$R/$(basename "$x").txt" 2>&1; echo "$(el) $(basename "$x") rc=$?"
done
timeout 120 build-gpu/nibble bench --quiet --json "$R/bench.json" --html "$R/bench.html" --csv "$R/bench.csv" >"$R/bench.txt" 2>&1; echo "$(el) bench rc=$?"
timeout 150 build-gpu/nibble bench --quiet --mode all --autotune --json "$R/bench-all-autotune.json" --html "$R/bench-all-autotune.html" \
  --csv "$R/bench-all-autotune.csv" >"$R/bench-all-autotune.txt" 2>&1; echo "$(el) bench all+autotune rc=$?"
timeout 60 build-gpu/nibble bench --quiet --model llama-3-8b --json "$R/bench-llama-3-8b.json" >"$R/bench-llama-3-8b.txt" 2>&1; echo "$(el) bench llama rc=$?"
timeout 90 build-gpu/bench/gpu_gemm_bench --json "$R/gemm.json" >"$R/gemm.txt" 2>&1; echo "$(el) gemm bench rc=$?"
NIBBLE_BUILD_DIR=build-py-gpu timeout 70 python3 bench/step_bench.py --preset codonfm-5b --reps 5 --warmup 2 \
  --bench-json "$R/bench.json" --json "$R/step-codonfm-5b.json" >"$R/step-codonfm-5b.txt" 2>&1; echo "$(el) step bench rc=$?"
left=$(( 560 - ($(date +%s) - t0) ))
[ $left -gt 20 ] && { timeout $left python3 bench/triton_dot_scaled_mxfp4.py --json "$R/triton.json" >"$R/triton.txt" 2>&1; echo "$(el) triton rc=$?"; }
python3 - "$R" <<'PY'
import json, sys, os
R = sys.argv[1]
for f in ("bench.json", "bench-all-autotune.json"):
    p = os.path.join(R, f)
    if not os.path.exists(p): continue
    for s in json.load(open(p))["summary"]:
        print(f"{f[:14]:14s} {s['recipe']:12s} {s['mode']:14s} {s['layer_ms']:7.2f} ms {s['speedup_vs_bf16']:5.2f}x bound {s.get('bound_layer_ms') or 0:6.2f}")
PY
grep -E "quartet|bf16" "$R/step-codonfm-5b.txt" | head -6
tar -C "$OUT" -czf "$OUT/run.tgz" run && rm -rf "$R"
echo "total $(( $(date +%s) - t0 )) s"
