#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang 14, ASan + UBSan + leak checking) and runs each for a
# bounded time from its seed folders (seed_dirs below: fuzz/corpus/<target>/ for seeds found nowhere
# else, plus the repository's own data files of that format; all read-only, new inputs go to a scratch
# folder). Fails on any crash, sanitizer report, leak, timeout or out-of-memory; the reproducer is
# left in $NIBBLE_FUZZ_BUILD/findings/<target>/. Prints executions per target and writes them to
# $NIBBLE_FUZZ_BUILD/fuzz-summary.txt.
# Usage: tools/fuzz.sh [seconds per target (default 45)] [targets...]
# Env: NIBBLE_FUZZ_BUILD (default build-fuzz), JOBS (build parallelism), FUZZ_RSS_MB (default 2048).
set -euo pipefail
cd "$(dirname "$0")/.."
build="${NIBBLE_FUZZ_BUILD:-build-fuzz}"
jobs="${JOBS:-$(nproc)}"
seconds="${1:-45}"
shift || true
all_targets=(npy safetensors hf_config preset runs_csv bench_result bench_speedups law_fit)
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${all_targets[@]}")

need_pkgs=(clang-14 libclang-rt-14-dev)
missing=()
for p in "${need_pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ] && command -v apt-get >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S fuzz -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14
fi
cmake --build "$build" -j "$jobs" --target "${targets[@]/#/fuzz_}"

# Seed folders per target. The same table is in tests/reliability/test_fuzz_findings.cpp, which
# replays every seed through the harness in the ordinary test run.
seed_dirs() {
  case "$1" in
    npy | safetensors | bench_result) echo "fuzz/corpus/$1" ;;
    hf_config) echo "tests/workload/fixtures" ;;
    preset) echo "data/presets" ;;
    runs_csv | law_fit) echo "fuzz/corpus/$1 data/law" ;;
    # The bench result JSONs and tests/law/bench_sample.json (what `nibble law --speedups` reads).
    bench_speedups) echo "fuzz/corpus/bench_result tests/law" ;;
    *) echo "no seed folders for fuzz target '$1'" >&2; return 1 ;;
  esac
}

export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:allocator_may_return_null=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
summary="$build/fuzz-summary.txt"
: > "$summary"
status=0
for t in "${targets[@]}"; do
  work="$build/corpus-work/$t"
  findings="$build/findings/$t"
  mkdir -p "$work" "$findings"
  log="$build/fuzz-$t.log"
  seeds=$(seed_dirs "$t")
  # The first folder is libFuzzer's writable corpus; the seed folders after it are only read.
  # -timeout: one input taking more than 10 s is a hang; -rss_limit_mb: a parser that allocates
  # what a header claims instead of checking it first shows up as an out-of-memory finding.
  set +e
  "$build/fuzz_$t" "$work" $seeds -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb="${FUZZ_RSS_MB:-2048}" -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$findings/" >"$log" 2>&1
  rc=$?
  set -e
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo "?")
  if [ $rc -eq 0 ]; then
    line="$t: ok, $execs executions in ${seconds}s, coverage $cov edges"
  else
    line="$t: FAILED (exit $rc) after $execs executions; reproducer in $findings/, log $log"
    status=1
    grep -E 'ERROR|SUMMARY|terminate|what\(\)' "$log" | head -5 || true
  fi
  echo "$line" | tee -a "$summary"
done
exit $status
