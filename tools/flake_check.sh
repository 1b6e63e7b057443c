#!/usr/bin/env bash
# Reruns every randomized C++ test N times with fresh seeds, to find tests that fail only for some inputs.
# Not a CI stage (200 rounds take hours on 2 cores); run it after changing a randomized test or a tolerance.
# A randomized test is one that draws seeds from tests/test_seed.hpp: a first pass runs each test binary
# once with NIBBLE_TEST_SEED_LOG, which lists the tests that drew seeds; each round then reruns only those
# (--gtest_filter), each run with a fresh master seed. Every failure is reported with its replay line
# (NIBBLE_TEST_SEED=<master> <binary> --gtest_filter=<test>, printed by the test's seed listener).
# Usage: tools/flake_check.sh [N (default 200)] [test binary ...]
#   binaries: default every C++ test executable ctest lists in the build folder (cpu and gpu labelled; on a
#   machine without a GPU the GPU tests skip and only host tests run).
# Env: NIBBLE_FLAKE_BUILD (default build), NIBBLE_FLAKE_MINUTES (stop starting rounds after this many minutes;
#      default none), NIBBLE_FLAKE_TIMEOUT (seconds per binary run, default 900).
# Writes $build/flake-check/failures.txt (one replay line per failed test run) and summary.txt.
# Exit: 0 when all N rounds ran and passed; 1 when a run failed; 2 when no randomized test was found or the
# build folder has no test; 3 when the time limit stopped it before N rounds (no failure seen).
set -uo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-200}"
shift || true
build="${NIBBLE_FLAKE_BUILD:-build}"
limit_s=$(( ${NIBBLE_FLAKE_MINUTES:-0} * 60 ))
per_run="${NIBBLE_FLAKE_TIMEOUT:-900}"
out="$build/flake-check"
mkdir -p "$out"
out=$(cd "$out" && pwd)
failures="$out/failures.txt"
summary="$out/summary.txt"
: >"$failures"
unset NIBBLE_TEST_SEED  # fresh seeds on every run
export NIBBLE_GPU_SKIP_EXIT_CODE=0  # without a GPU, the host tests' result decides
t0=$(date +%s)

bins=("$@")
if [ ${#bins[@]} -eq 0 ]; then
  mapfile -t bins < <(ctest --test-dir "$build" --show-only=json-v1 2>/dev/null | python3 -c '
import json, os, sys
seen = []
for t in json.load(sys.stdin).get("tests", []):
    cmd = t.get("command") or []
    if cmd and os.path.basename(cmd[0]).startswith("test_") and os.access(cmd[0], os.X_OK) and cmd[0] not in seen:
        seen.append(cmd[0])
print("\n".join(seen))')
fi
if [ ${#bins[@]} -eq 0 ]; then
  echo "flake_check: no test binary in $build (build it first, or name the binaries)"; exit 2
fi

# Pass 1: which tests of each binary draw seeds.
declare -A filter=()
for bin in "${bins[@]}"; do
  name=$(basename "$bin")
  list="$out/$name.randomized"
  rm -f "$list"
  NIBBLE_TEST_SEED_LOG="$list" timeout "$per_run" "$bin" >"$out/$name.discovery.log" 2>&1
  rc=$?
  if [ $rc -ne 0 ]; then
    echo "$name: discovery run FAILED (exit $rc); log $out/$name.discovery.log"
    grep -h "^\[ seed     \]" "$out/$name.discovery.log" | sed "s/^/discovery: /" >>"$failures"
    grep -q "^\[ seed     \]" "$out/$name.discovery.log" || echo "discovery: $name exit $rc (no seed line)" >>"$failures"
  fi
  if [ -s "$list" ]; then
    filter[$bin]=$(sort -u "$list" | paste -sd: -)
    echo "$name: $(sort -u "$list" | wc -l) randomized tests"
  fi
done
if [ ${#filter[@]} -eq 0 ]; then
  echo "flake_check: no test drew seeds (is tests/test_seed.cpp's NIBBLE_TEST_SEED_LOG in these binaries?)"; exit 2
fi

# The rounds.
declare -A runs=() fails=()
done_rounds=0
for (( r = 1; r <= rounds; r++ )); do
  if [ $limit_s -gt 0 ] && [ $(( $(date +%s) - t0 )) -ge $limit_s ]; then break; fi
  for bin in "${!filter[@]}"; do
    name=$(basename "$bin")
    log="$out/$name.last.log"
    timeout "$per_run" "$bin" --gtest_filter="${filter[$bin]}" >"$log" 2>&1
    rc=$?
    runs[$name]=$(( ${runs[$name]:-0} + 1 ))
    if [ $rc -ne 0 ]; then
      fails[$name]=$(( ${fails[$name]:-0} + 1 ))
      cp "$log" "$out/$name.fail-$r.log"
      if grep -q "^\[ seed     \]" "$log"; then
        grep -h "^\[ seed     \]" "$log" | sed "s/^/round $r: /" | tee -a "$failures"
      else
        echo "round $r: $name exit $rc$([ $rc = 124 ] && echo ' (timed out)') without a seed line; log $out/$name.fail-$r.log" \
          | tee -a "$failures"
      fi
    fi
  done
  done_rounds=$r
  (( r % 10 == 0 )) && echo "round $r/$rounds: $(wc -l <"$failures") failed test runs so far ($(( $(date +%s) - t0 )) s)"
done

{
  echo "flake_check: $done_rounds of $rounds rounds in $(( $(date +%s) - t0 )) s, build $build"
  for bin in "${!filter[@]}"; do
    name=$(basename "$bin")
    echo "  $name: ${runs[$name]:-0} runs of $(tr ':' '\n' <<<"${filter[$bin]}" | wc -l) randomized tests, ${fails[$name]:-0} failed"
  done
  echo "failed test runs: $(wc -l <"$failures") (replay lines in $failures)"
} | tee "$summary"
[ -s "$failures" ] && exit 1
[ "$done_rounds" -lt "$rounds" ] && { echo "incomplete: the time limit stopped it after $done_rounds rounds"; exit 3; }
exit 0
