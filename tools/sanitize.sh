#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer build of the library and tests (clang 14, CUDA on: nvcc
# compiles the .cu files' host code with clang++-14 and the same sanitizers; device code cannot be
# instrumented), then every cpu-labelled test under it: the host-only tests of the GPU test binaries
# (*_host_part) and test_engine_device_state need the CUDA build, which is why it is on. Any sanitizer
# report aborts the test that hit it (halt_on_error, -fno-sanitize-recover=all), so ctest fails.
# The run must be complete: the stage fails unless ctest ran (passed, not skipped) exactly the cpu entries
# a normal CUDA build lists (ctest -N -L cpu), so a target that did not build, or a test missing from this
# build, cannot shrink it silently.
# Usage: tools/sanitize.sh [ctest args...]   Env: NIBBLE_ASAN_BUILD (default build-asan), JOBS.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${NIBBLE_ASAN_BUILD:-build-asan}"
jobs="${JOBS:-$(nproc)}"

need_pkgs=(clang-14 libclang-rt-14-dev)
missing=()
for p in "${need_pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ] && command -v apt-get >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi

san="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
# nvcc splits -Xcompiler values at commas: one flag per -Xcompiler.
cuda_san="-Xcompiler=-fsanitize=address -Xcompiler=-fsanitize=undefined -Xcompiler=-fno-sanitize-recover=all -Xcompiler=-fno-omit-frame-pointer"
if [ ! -f "$build/CMakeCache.txt" ]; then
  # nvcc's host compiler: CUDAHOSTCXX (a full path) is what CMake's CUDA detection honours, so its implicit
  # link libraries are clang's, not GCC's libasan.
  CUDAHOSTCXX="$(command -v clang++-14)" cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
    -DNIBBLE_CUDA=ON -DNIBBLE_BENCH=OFF \
    -DCMAKE_CXX_FLAGS="$san" -DCMAKE_CUDA_FLAGS="$cuda_san" \
    -DCMAKE_EXE_LINKER_FLAGS="$san" -DCMAKE_SHARED_LINKER_FLAGS="$san"
fi
# Keep going past a target that does not build; ctest reports its test as "Not Run", which fails
# the stage.
cmake --build "$build" -j "$jobs" -- -k 0 || echo "sanitize: some targets did not build; ctest will report them"

# detect_leaks: a parser that leaks on a bad file is a bug too. abort_on_error gives a core-style
# exit that ctest reports as a failure even if a test harness swallowed the exit code.
export ASAN_OPTIONS="halt_on_error=1:abort_on_error=1:detect_leaks=1:detect_stack_use_after_return=1:strict_string_checks=1:check_initialization_order=1"
export UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1"
log="$build/sanitize-ctest.txt"
set +e
ctest --test-dir "$build" -L cpu --output-on-failure -j "$jobs" "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e

# Completeness: every cpu entry of the normal build (NIBBLE_SANITIZE_REFERENCE, default build: what
# tools/test.sh built; this build's own list when there is none), less not_here, must have Passed here: not
# skipped, not missing from this build. (Not checked when ctest arguments select a subset.)
reference="${NIBBLE_SANITIZE_REFERENCE:-build}"
[ -f "$reference/CTestTestfile.cmake" ] || reference="$build"
names() { ctest --test-dir "$1" -N -L cpu | sed -n 's/^ *Test *#[0-9]*: \([^ ]*\).*/\1/p' | sort -u; }
# Not run here, by name: python_cuda_argument_checks loads nibble._C into python3, which an ASan-instrumented
# extension cannot be loaded into (the ASan runtime must come first); its C++ is the bindings' argument checks.
not_here="python_cuda_argument_checks"
expected=$(names "$reference" | grep -vxF "$not_here" || true)
passed=$(sed -n 's/.*Test *#[0-9]*: \([^ ]*\) \.*[ ]*Passed.*/\1/p' "$log" | sort -u)
n_expected=$(grep -c . <<<"$expected" || true)
n_passed=$(grep -c . <<<"$passed" || true)
echo "sanitize: $n_passed cpu tests passed under ASan + UBSan; $reference lists $n_expected"
[ $rc -ne 0 ] && exit "$rc"
if [ $# -eq 0 ]; then
  not_run=$(comm -23 <(echo "$expected") <(echo "$passed"))
  if [ "$n_expected" -eq 0 ] || [ -n "$not_run" ]; then
    echo "sanitize: FAILED: cpu tests of $reference that did not pass here (skipped, or missing from $build):"
    echo "${not_run:-(no cpu test listed at all)}" | sed 's/^/  /'
    exit 1
  fi
fi
