#!/usr/bin/env bash
# compute-sanitizer over the GPU test binaries (run on a GPU machine after a GPU build into
# build-gpu/). memcheck and initcheck run every test; racecheck and synccheck (much slower: they
# instrument every shared-memory access) run a filter that still launches every kernel family once.
# Any tool error fails the script (--error-exitcode). Logs: build-gpu/compute-sanitizer/<tool>-<test>.log
# Usage: tools/compute_sanitizer.sh [build folder (default build-gpu)]
set -uo pipefail
cd "$(dirname "$0")/.."
build="${1:-build-gpu}"
cs="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
out="$build/compute-sanitizer"
mkdir -p "$out"
# One small case per kernel family for the slow tools (the exhaustive all-floats codec tests use no
# shared memory and would take hours under racecheck, so they run under memcheck/initcheck only):
# fp8 per-tensor, 1x128 / 128x128 block, mxfp8 quantize + (transposed) decode, nvfp4, Quartet
# forward / backward (row, column, large rotations, from-MXFP4 transposed) / epilogue, the fused
# forward, MXFP4 quantize/decode, the re-encoders, the GEMM wrappers.
slow_filter="${NIBBLE_CS_FILTER:-*NanAndInfTensors*:*Activations1x128*:*Weights128x128*:*BothRulesBothLayoutsBothRoundings*:*StraightAndTransposedMatchReference*:*CurrentScalingBothPaths*:*RowwiseColwiseNearestAndStochastic*:*LargeRotationsAndNoRotationRowwise*:*FromMxfp4TransposedMatchesReference*:*MatchesReferenceAllVariants*:QuartetEpilogue.*:*MatchesForwardThenRowReencode*:*QuantizeAndDecodeMatchReference*:*Reencode*:*GemmErrors*:*RowColMatchesReference*}"
status=0
for bin in "$build"/tests/kernels/test_*; do
  [ -x "$bin" ] || continue
  name="$(basename "$bin")"
  for tool in memcheck initcheck racecheck synccheck; do
    args=(--tool "$tool" --error-exitcode 99)
    filter=()
    case "$tool" in
      # The out-of-memory test asks cudaMalloc for more than the GPU has on purpose; memcheck reports
      # that API error, so it is left out here (it runs in the plain GPU test run).
      memcheck) args+=(--leak-check full); filter=(--gtest_filter="-*OutOfMemory*") ;;
      initcheck) ;;
      racecheck|synccheck) filter=(--gtest_filter="$slow_filter") ;;
    esac
    log="$out/$tool-$name.log"
    start=$(date +%s)
    "$cs" "${args[@]}" "$bin" "${filter[@]}" >"$log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - start ))
    summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -1)
    if [ $rc -eq 0 ]; then
      echo "$tool $name: ok (${secs}s) $summary"
    elif grep -q "terminated before first instrumented API call" "$log"; then
      # No CUDA work ran under this tool's filter (CPU-only tests, or no test matched): nothing to check.
      echo "$tool $name: n/a (no CUDA call under this filter) (${secs}s)"
    else
      echo "$tool $name: FAILED rc=$rc (${secs}s) $summary; see $log"; status=1
    fi
  done
done
exit $status
