#!/usr/bin/env bash
# One GPU call that validates kernel changes: build, every GPU test (C++ and Python, before any
# timing; the Python suite gets PY_DEADLINE seconds including its build), the FP4 kernel benchmark,
# then nibble bench on the default model. Set FULL=1 to add the FP8 kernel benchmark, per-gemm FP8
# and the PyTorch step benchmark. Everything goes to $OUT/run
# (+ run.tgz). Usage: bash scripts/gpu_call_ab.sh   (about 5 minutes on the H200 with 16 cores)
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD_JOBS=11 PY_JOBS=5 PY_DEADLINE=${PY_DEADLINE:-330}
source scripts/gpu_call_lib.sh
gpu_build_and_python_tests
benches=(build-gpu/bench/gpu_quant_fp4_bench)
[ "${FULL:-0}" = 1 ] && benches+=(build-gpu/bench/gpu_quant_fp8_bench)
for x in "${benches[@]}"; do
  timeout 100 "$x" --json "$R/$(basename "$x").json" >"$R/$(basename "$x").txt" 2>&1; rc=$?; echo "$(el) $(basename "$x") rc=$rc"
done
grep -E "quartet bwd|mxfp4 ocp|copy" "$R/gpu_quant_fp4_bench.txt" | head -24
timeout 120 build-gpu/nibble bench --quiet --json "$R/bench.json" --html "$R/bench.html" >"$R/bench.txt" 2>&1; rc=$?; echo "$(el) bench rc=$rc"
if [ "${FULL:-0}" = 1 ]; then
  timeout 60 build-gpu/nibble bench --quiet --mode per-gemm --recipes bf16,fp8-delayed,fp8-block --json "$R/bench-per-gemm.json" \
    >"$R/bench-per-gemm.txt" 2>&1; rc=$?; echo "$(el) bench per-gemm rc=$rc"
  NIBBLE_BUILD_DIR=build-py-gpu timeout 80 python3 bench/step_bench.py --preset codonfm-5b --reps 5 --warmup 2 \
    --recipes bf16,fp8-current,fp8-delayed,fp8-block,quartet --bench-json "$R/bench.json" --json "$R/step-codonfm-5b.json" \
    >"$R/step-codonfm-5b.txt" 2>&1; rc=$?; echo "$(el) step bench rc=$rc"
fi
gpu_bench_summary bench.json bench-per-gemm.json
gpu_pack_results
echo "total $(( $(date +%s) - t0 )) s"
