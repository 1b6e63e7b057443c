#!/usr/bin/env bash
# compute-sanitizer over the GPU test binaries (on a GPU machine, after a CUDA build with tests; gpu_check.sh's
# `sanitize` stage). The test list comes from CTest (ctest --show-only=json-v1 -L gpu): the script fails when
# CTest lists no GPU test or any listed executable is missing. Tools: memcheck (--leak-check full), initcheck,
# racecheck and synccheck, each with a per-test gtest filter (plan() below) chosen so the whole script ends
# within NIBBLE_CS_MINUTES (default 8) on an H100; a run still going at its limit, or not started because the
# time is spent, fails the script. A skip is always by name, with its reason.
# Any tool error fails the script (--error-exitcode), and so does a run whose log says the program
# "terminated before first instrumented API call" (its filter ran no CUDA code: nothing was checked).
# Prints a table tool x test: seconds, result. Logs: <build>/compute-sanitizer/<tool>-<test>.log
# Usage: tools/compute_sanitizer.sh [build folder (default build-gpu)]
# Env: NIBBLE_CS_MINUTES (8), NIBBLE_CS_TOOLS (default "memcheck initcheck racecheck synccheck").
set -uo pipefail
cd "$(dirname "$0")/.."
build="${1:-build-gpu}"
minutes="${NIBBLE_CS_MINUTES:-8}"
tools=(${NIBBLE_CS_TOOLS:-memcheck initcheck racecheck synccheck})
t0=$(date +%s)
deadline=$(( t0 + minutes * 60 - 15 ))  # 15 s kept for the table
cs="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
out="$build/compute-sanitizer"

# plan TOOL TEST: prints the gtest filter for this run, or "skip: REASON".
plan() {
  local tool=$1 name=$2
  case "$name" in
    test_gemm_host) echo "skip: makes no CUDA call (host-only GEMM rules: validation, labels, scale layouts)"; return ;;
    test_engine_bench)
      case "$tool" in
        # The other three tests time 8 recipes x 3 modes: initcheck of the binary alone ran over 8 minutes.
        # This one runs the bf16 and mxfp4 runners end to end; the kernel tests cover every kernel.
        memcheck|initcheck) echo "EngineSequences.OffMeansNone" ;;
        *) echo "skip: its kernels are the kernel tests', which $tool runs on one case per family" ;;
      esac
      return ;;
  esac
  case "$tool" in
    # The out-of-memory test asks cudaMalloc for more than the GPU has on purpose; memcheck reports that
    # API error, so it runs in the plain GPU test run only.
    memcheck) echo "*-*OutOfMemory*" ;;
    initcheck) echo "*" ;;
    racecheck|synccheck)
      # These instrument every shared-memory access (tens of times slower): one small case per kernel family.
      case "$name" in
        test_e2m1_fast_math) echo "skip: its only GPU test sweeps all 2^32 floats (hours under $tool); the encoder uses no shared memory" ;;
        test_gemm_accuracy) echo "skip: cuBLASLt GEMMs, which $tool runs through test_gemm_errors" ;;
        test_gemm_errors) echo "GemmErrors.*-*OutOfMemory*" ;;
        test_quantize_fp8_block) echo "*Activations1x128*:*Weights128x128*" ;;
        test_quantize_fp8_hw_convert) echo "*FirstArgumentIsLowByte*" ;;
        test_quantize_fp8_mx) echo "*BothRulesBothLayoutsBothRoundings*:*StraightAndTransposedMatchReference*" ;;
        test_quantize_fp8_per_tensor) echo "*CurrentScalingBothPaths*" ;;
        test_quantize_nvfp4) echo "*NanAndInfTensors*" ;;
        test_quartet_fp4) echo "*MatchesReferenceAllVariants*:*RowwiseColwiseNearestAndStochastic*:*LargeRotationsAndNoRotationRowwise*:*FromMxfp4TransposedMatchesReference*:QuartetEpilogue.*:*QuantizeAndDecodeMatchReference*:*RowColMatchesReference*" ;;
        test_quartet_fused_forward) echo "*MatchesForwardThenRowReencode*" ;;
        test_reencode_mxfp4) echo "ReencodeMxfp4.*" ;;
        *) echo "none" ;;  # a new test binary: it needs its subset here
      esac ;;
  esac
}

# The GPU test executables CTest lists.
mapfile -t listed < <(ctest --test-dir "$build" --show-only=json-v1 -L gpu 2>/dev/null | python3 -c '
import json, sys
try:
    tests = json.load(sys.stdin).get("tests", [])
except ValueError:
    tests = []
for t in tests:  # ctest leaves out the command of a test whose executable does not exist
    print(t["command"][0] if t.get("command") else "(no executable) " + t.get("name", "?"))')
bins=()
for b in "${listed[@]}"; do [ -x "$b" ] && bins+=("$b"); done
if [ ${#listed[@]} -eq 0 ]; then
  echo "compute_sanitizer: FAILED: ctest lists no gpu-labelled test in $build (a CUDA build with tests first)"; exit 1
fi
if [ ${#bins[@]} -lt ${#listed[@]} ]; then
  echo "compute_sanitizer: FAILED: ctest lists ${#listed[@]} GPU tests in $build but only ${#bins[@]} executables exist:"
  for b in "${listed[@]}"; do [ -x "$b" ] || echo "  missing: $b"; done
  exit 1
fi
if [ ! -x "$cs" ]; then
  echo "compute_sanitizer: FAILED: compute-sanitizer not found (PATH, /usr/local/cuda/bin)"; exit 1
fi
mkdir -p "$out"

status=0
rows=()
row() { rows+=("$(printf '%-10s %-30s %5s  %s' "$1" "$2" "$3" "$4")"); }
for tool in "${tools[@]}"; do
  for bin in "${bins[@]}"; do
    name="$(basename "$bin")"
    p="$(plan "$tool" "$name")"
    if [[ "$p" == skip:* ]]; then row "$tool" "$name" - "skipped (${p#skip: })"; continue; fi
    if [ "$p" = none ]; then
      row "$tool" "$name" - "FAILED: no $tool subset for this test (add one to plan() in tools/compute_sanitizer.sh)"
      status=1; continue
    fi
    left=$(( deadline - $(date +%s) ))
    if [ "$left" -lt 10 ]; then
      row "$tool" "$name" - "FAILED: not run, the ${minutes}-minute budget is spent"; status=1; continue
    fi
    args=(--tool "$tool" --error-exitcode 99)
    [ "$tool" = memcheck ] && args+=(--leak-check full)
    log="$out/$tool-$name.log"
    start=$(date +%s)
    timeout -k 10 "$left" "$cs" "${args[@]}" "$bin" --gtest_filter="$p" >"$log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - start ))
    summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -1 | sed 's/^=* *//')
    if grep -q "terminated before first instrumented API call" "$log"; then
      row "$tool" "$name" "$secs" "FAILED: no CUDA call under filter '$p' (nothing checked); see $log"; status=1
    elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
      row "$tool" "$name" "$secs" "FAILED: still running at the ${minutes}-minute limit; see $log"; status=1
    elif [ $rc -ne 0 ]; then
      row "$tool" "$name" "$secs" "FAILED rc=$rc ${summary}; see $log"; status=1
    else
      row "$tool" "$name" "$secs" "ok ${summary}"
    fi
  done
done
printf '%-10s %-30s %5s  %s\n' tool test s result
printf '%s\n' "${rows[@]}"
echo "compute_sanitizer: $([ $status = 0 ] && echo OK || echo FAILED) in $(( $(date +%s) - t0 )) s (${#bins[@]} GPU tests from ctest)"
exit $status
