#!/usr/bin/env bash
# One GPU call for FP4 kernel A/B work: build the C++/CUDA tree, every C++ GPU test (bit-exactness
# first), the FP4 kernel benchmark with the default launch and with each measurement knob named in
# KNOBS (space-separated VAR=VALUE, each run separately), then nibble bench on bf16, mxfp4, quartet.
# Everything goes to $OUT/run. Usage: KNOBS="NIBBLE_FUSED_FWD_PER=1" bash scripts/gpu_call_kernels.sh
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu_call_lib.sh
{ cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DNIBBLE_BENCH=ON &&
  cmake --build build-gpu -j 16 -- -k 0; } >"$R/build.txt" 2>&1
echo "$(el) build rc=$?"
ctest --test-dir build-gpu -L gpu --output-on-failure --timeout 200 >"$R/gpu-tests.txt" 2>&1
echo "$(el) $(grep 'tests passed' "$R/gpu-tests.txt")"
grep -E "FAILED|Failure" "$R/gpu-tests.txt" | head -20
b=build-gpu/bench/gpu_quant_fp4_bench
timeout 100 $b --json "$R/fp4-default.json" >"$R/fp4-default.txt" 2>&1; echo "$(el) fp4 default rc=$?"
for k in ${KNOBS:-}; do
  n=$(echo "$k" | tr '=' '-')
  env "$k" timeout 100 $b --json "$R/fp4-$n.json" >"$R/fp4-$n.txt" 2>&1; echo "$(el) fp4 $k rc=$?"
done
for f in "$R"/fp4-*.txt; do echo "== $(basename "$f")"; grep -E "row\+col|col only|fused|mxfp4 ocp |transposed|copy" "$f" | head -40; done
timeout 120 build-gpu/nibble bench --quiet --recipes ${RECIPES:-bf16,mxfp4,quartet} --json "$R/bench.json" >"$R/bench.txt" 2>&1
echo "$(el) bench rc=$?"
gpu_bench_summary bench.json
echo "total $(( $(date +%s) - t0 )) s"
