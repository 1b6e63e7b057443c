#!/usr/bin/env bash
# One GPU call for the record: the C++/CUDA build and the Python extension build side by side, the
# GPU tests (C++ and Python; they run before any timing), then every benchmark one after another:
# FP8/FP4 kernels, nibble bench (default; all modes + autotune; llama-3-8b for the predictor),
# gpu_gemm_bench, the step benchmark (quartet on nibble's CUDA kernels), Triton's dot_scaled MXFP4.
# Everything lands in $OUT/run and is packed into $OUT/run.tgz. Usage: bash scripts/gpu_call_final.sh
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu_call_lib.sh
gpu_build_and_python_tests
for x in build-gpu/bench/gpu_quant_fp8_bench build-gpu/bench/gpu_quant_fp4_bench; do
  timeout 90 "$x" --json "$R/$(basename "$x").json" >"$R/$(basename "$x").txt" 2>&1; rc=$?; echo "$(el) $(basename "$x") rc=$rc"
done
timeout 120 build-gpu/nibble bench --quiet --json "$R/bench.json" --html "$R/bench.html" --csv "$R/bench.csv" >"$R/bench.txt" 2>&1; rc=$?; echo "$(el) bench rc=$rc"
timeout 150 build-gpu/nibble bench --quiet --mode all --autotune --json "$R/bench-all-autotune.json" --html "$R/bench-all-autotune.html" \
  --csv "$R/bench-all-autotune.csv" >"$R/bench-all-autotune.txt" 2>&1; rc=$?; echo "$(el) bench all+autotune rc=$rc"
timeout 60 build-gpu/nibble bench --quiet --model llama-3-8b --json "$R/bench-llama-3-8b.json" >"$R/bench-llama-3-8b.txt" 2>&1; rc=$?; echo "$(el) bench llama rc=$rc"
timeout 90 build-gpu/bench/gpu_gemm_bench --json "$R/gemm.json" >"$R/gemm.txt" 2>&1; rc=$?; echo "$(el) gemm bench rc=$rc"
NIBBLE_BUILD_DIR=build-py-gpu timeout 70 python3 bench/step_bench.py --preset codonfm-5b --reps 5 --warmup 2 \
  --bench-json "$R/bench.json" --json "$R/step-codonfm-5b.json" >"$R/step-codonfm-5b.txt" 2>&1; rc=$?; echo "$(el) step bench rc=$rc"
left=$(( 560 - ($(date +%s) - t0) ))
[ $left -gt 20 ] && { timeout $left python3 bench/triton_dot_scaled_mxfp4.py --json "$R/triton.json" >"$R/triton.txt" 2>&1; rc=$?; echo "$(el) triton rc=$rc"; }
gpu_bench_summary bench.json bench-all-autotune.json
grep -E "quartet|bf16" "$R/step-codonfm-5b.txt" | head -6
gpu_pack_results
echo "total $(( $(date +%s) - t0 )) s"
