#!/usr/bin/env bash
# One GPU call that validates a CUDA change and measures it: build (ninja, 16 jobs), every C++ GPU
# test (bit-exactness first), the FP8 and FP4 kernel benchmarks (the FP4 one also once per KNOBS
# entry, VAR=VALUE, for A/B), nibble bench on every recipe (step mode, JSON + HTML + CSV), then
# compute-sanitizer over the GPU tests with what is left of the time budget (BUDGET_S, default 570).
# PY=1 also builds the Python extension and runs its GPU tests; EXTRA=1 adds bench --mode all,
# llama-3-8b and an out-of-memory shape; STEP=1 (with PY=1) adds the PyTorch step benchmark of
# codonfm-5b (GEMM speedups from this call's bench.json) and of llama-3-8b at 1 x 4096 tokens (GEMM
# speedups from a measured `nibble bench` of that shape in this call), every recipe, JSON + HTML.
# Everything lands in $OUT/run, packed into $OUT/run.tgz (the device tool returns at most 8 files).
# Usage: KNOBS="NIBBLE_FUSED_FWD_PER=1" bash scripts/gpu_call_validate.sh
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu_call_lib.sh
budget=${BUDGET_S:-570}
left() { echo $(( budget - ($(date +%s) - t0) )); }
if [ "${PY:-0}" = 1 ]; then  # the Python extension and its GPU tests too, built beside the C++ tree
  gpu_build_and_python_tests
else
  gpu_build_and_tests
fi
b=build-gpu/bench/gpu_quant_fp4_bench
timeout 100 $b --json "$R/fp4-default.json" >"$R/fp4-default.txt" 2>&1; rc=$?; echo "$(el) fp4 default rc=$rc"
for k in ${KNOBS:-}; do
  n=$(echo "$k" | tr '=' '-')
  env "$k" timeout 100 $b --json "$R/fp4-$n.json" >"$R/fp4-$n.txt" 2>&1; rc=$?; echo "$(el) fp4 $k rc=$rc"
done
timeout 90 build-gpu/bench/gpu_quant_fp8_bench --json "$R/fp8.json" >"$R/fp8.txt" 2>&1; rc=$?; echo "$(el) fp8 rc=$rc"
for f in "$R"/fp4-*.txt; do echo "== $(basename "$f")"; grep -E "row\+col|fused|mxfp4 ocp  |copy" "$f" | head -24; done
timeout 150 build-gpu/nibble bench --quiet --json "$R/bench.json" --html "$R/bench.html" --csv "$R/bench.csv" \
  >"$R/bench.txt" 2>&1
rc=$?; echo "$(el) bench rc=$rc"
gpu_bench_summary bench.json
if [ "${EXTRA:-0}" = 1 ]; then
  # Every mode (per-gemm with TE's settings too), a model the predictor was not fitted on, and a shape
  # whose MLP rows cannot fit in GPU memory (refused with the numbers; the run must go on, rc 0).
  timeout 120 build-gpu/nibble bench --quiet --mode all --json "$R/bench-all.json" >"$R/bench-all.txt" 2>&1
  rc=$?; echo "$(el) bench --mode all rc=$rc"
  timeout 60 build-gpu/nibble bench --quiet --model llama-3-8b --json "$R/bench-llama-3-8b.json" \
    >"$R/bench-llama-3-8b.txt" 2>&1
  rc=$?; echo "$(el) bench llama-3-8b rc=$rc"
  timeout 90 build-gpu/nibble bench --quiet --ffn 4194304 --recipes bf16,fp8-current --iters 3 --warmup 1 \
    --json "$R/bench-oom.json" >"$R/bench-oom.txt" 2>&1
  rc=$?; echo "$(el) bench oom rc=$rc (0 expected)"; grep -m3 -i "memory" "$R/bench-oom.txt"
  gpu_bench_summary bench-all.json bench-llama-3-8b.json
fi
if [ "${STEP:-0}" = 1 ] && [ "${PY:-0}" = 1 ]; then
  export PYTHONPATH=python NIBBLE_BUILD_DIR=${NIBBLE_PY_BUILD:-build-py-gpu}
  all=bf16,fp8-delayed,fp8-current,fp8-block,mxfp8,nvfp4,mxfp4,quartet
  timeout 100 python3 bench/step_bench.py --preset codonfm-5b --recipes $all --reps 5 --warmup 2 \
    --bench-json "$R/bench.json" --json "$R/step-codonfm-5b.json" --html "$R/step-codonfm-5b.html" \
    >"$R/step-codonfm-5b.txt" 2>&1
  rc=$?; echo "$(el) step bench codonfm-5b rc=$rc"; grep -E "speedup|step" "$R/step-codonfm-5b.txt" | tail -12
  timeout 60 build-gpu/nibble bench --quiet --model llama-3-8b --mbs 1 --seq 4096 --json "$R/bench-llama-3-8b-4096.json" \
    >"$R/bench-llama-3-8b-4096.txt" 2>&1
  rc=$?; echo "$(el) bench llama-3-8b 1x4096 rc=$rc"
  timeout 80 python3 bench/step_bench.py --preset llama-3-8b --tokens 4096 --seq-len 4096 --recipes $all --reps 5 \
    --warmup 2 --bench-json "$R/bench-llama-3-8b-4096.json" --json "$R/step-llama-3-8b.json" \
    --html "$R/step-llama-3-8b.html" >"$R/step-llama-3-8b.txt" 2>&1
  rc=$?; echo "$(el) step bench llama-3-8b rc=$rc"; grep -E "speedup|step" "$R/step-llama-3-8b.txt" | tail -12
fi
l=$(left)
if [ "$l" -gt 30 ]; then
  timeout "$l" bash scripts/compute_sanitizer.sh build-gpu >"$R/compute-sanitizer.txt" 2>&1
  rc=$?; echo "$(el) compute-sanitizer rc=$rc (budget ${l}s)"
  grep -vE ": ok |: n/a " "$R/compute-sanitizer.txt" | head -20
  cp build-gpu/compute-sanitizer/*.log "$R/" 2>/dev/null
fi
tar -C "$OUT" -czf "$OUT/run.tgz" run && rm -rf "$R"
echo "total $(( $(date +%s) - t0 )) s"
