#!/usr/bin/env bash
# One batched call on the GPU machine: build with ninja, run the gpu tests, run the benchmarks, and
# leave logs + JSON under $OUT (at most 8 files come back: keep the list short).
# Usage: bash tools/gpu_check.sh [tests] [bench] [benchall] [kernels] [gemm] [triton] [torch] [sanitize] [train:MIN]
# With PACK=1 everything lands in $OUT/run/ and is packed into $OUT/run.tgz (one file comes back).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/nibble-out}
FINAL_OUT=$OUT
[ "${PACK:-0}" = 1 ] && OUT=$OUT/run
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
log=$OUT/log.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv >"$log" 2>&1
start=$(date +%s)
if [ ! -f build-gpu/build.ninja ]; then
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DNIBBLE_BENCH=ON >>"$log" 2>&1 || { echo "configure failed"; tail -30 "$log"; exit 1; }
fi
cmake --build build-gpu -j 16 -- -k 0 >>"$log" 2>&1 || { echo "BUILD HAD ERRORS (continuing with what built):"; grep -E "error" "$log" | head -30; }
echo "build: $(( $(date +%s) - start )) s" | tee -a "$log"
want() { [ $# -eq 0 ] && return 0; for a in "${ARGS[@]}"; do [ "$a" = "$1" ] && return 0; done; return 1; }
ARGS=("$@"); [ ${#ARGS[@]} -eq 0 ] && ARGS=(tests bench)
if want tests; then
  ctest --test-dir build-gpu -L gpu --output-on-failure --timeout 300 >"$OUT/gpu-tests.txt" 2>&1
  tail -25 "$OUT/gpu-tests.txt"
fi
for b in "${ARGS[@]}"; do
  case $b in
    kernels) for x in build-gpu/benchmarks/gpu_quant_*_bench; do [ -x "$x" ] && timeout 120 "$x" --json "$OUT/$(basename "$x").json" 2>&1 | tail -30; done ;;
    gemm) [ -x build-gpu/benchmarks/gpu_gemm_bench ] && timeout 200 build-gpu/benchmarks/gpu_gemm_bench --json "$OUT/gemm.json" 2>&1 | tail -30 ;;
    bench) timeout 300 build-gpu/nibble bench --quiet --json "$OUT/bench.json" --html "$OUT/bench.html" --csv "$OUT/bench.csv" >"$OUT/bench.txt" 2>&1; head -60 "$OUT/bench.txt" ;;
    benchall) timeout 300 build-gpu/nibble bench --quiet --mode all --autotune --json "$OUT/bench-all-autotune.json" \
                --html "$OUT/bench-all-autotune.html" --csv "$OUT/bench-all-autotune.csv" >"$OUT/bench-all-autotune.txt" 2>&1
              grep -iE "summary|speedup|x " "$OUT/bench-all-autotune.txt" | head -40 ;;
    sanitize) timeout 240 bash tools/compute_sanitizer.sh build-gpu >"$OUT/compute-sanitizer.txt" 2>&1; echo "compute-sanitizer rc=$?"
              cat "$OUT/compute-sanitizer.txt" | tail -50 ;;
    train:*) mins=${b#train:}; [ -f tools/gpu_train.sh ] && OUT="$OUT" timeout $(( mins * 60 + 30 )) bash tools/gpu_train.sh "$mins" 2>&1 | tail -40 ;;
    triton) timeout 150 python3 benchmarks/triton_dot_scaled_mxfp4.py --json "$OUT/triton.json" 2>&1 | tail -20 ;;
    torch) for p in benchmarks/torch_compile_*.py; do timeout 150 python3 "$p" --json "$OUT/$(basename "$p" .py).json" 2>&1 | tail -15; done ;;
  esac
done
echo "total: $(( $(date +%s) - start )) s"
if [ "${PACK:-0}" = 1 ]; then
  tar -C "$FINAL_OUT" -czf "$FINAL_OUT/run.tgz" run && rm -rf "$FINAL_OUT/run"
fi
