#!/usr/bin/env bash
# Installs what nibble needs on a fresh Debian 12 machine (with the CUDA toolkit already present),
# then configures ./build and builds the `nibble` executable with the libraries and CUDA kernels it links,
# nothing else: tests, benchmarks and the Python extension are built by tools/test.sh (`cmake --build build`
# builds everything). Idempotent: a second run only rebuilds what changed. Extra arguments go to cmake's
# configure step. nvcc must be found (PATH or /usr/local/cuda/bin): configure stops otherwise; pass
# -DNIBBLE_CUDA=OFF for a build without CUDA.
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/install_packages.sh libcli11-dev nlohmann-json3-dev libfmt-dev libgtest-dev libbenchmark-dev \
  libeigen3-dev libceres-dev ninja-build cmake g++

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
