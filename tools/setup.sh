#!/usr/bin/env bash
# Installs what nibble needs on a fresh Debian 12 machine (with the CUDA toolkit already present),
# then configures ./build and builds the `nibble` executable with the libraries and CUDA kernels it links,
# nothing else: tests and benchmarks are built by tools/test.sh (`cmake --build build` builds everything).
# Idempotent: a second run only rebuilds what changed. Extra arguments go to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."

# chromium: the HTML report's browser test (tests/report/check_html_in_browser.py) renders the page headless.
need_pkgs=(libcli11-dev nlohmann-json3-dev libfmt-dev libgtest-dev libbenchmark-dev libeigen3-dev libceres-dev ninja-build cmake g++
           chromium)
missing=()
for p in "${need_pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ] && command -v apt-get >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# nvcc lives in the CUDA toolkit's bin folder, which is not always on PATH.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi

generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
if [ ! -f build/CMakeCache.txt ]; then
  cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "$@"
fi
cmake --build build -j "$(nproc)" --target nibble
