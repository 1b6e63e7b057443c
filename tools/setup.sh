#!/usr/bin/env bash
# Installs what nibble needs on a fresh Debian 12 machine (with the CUDA toolkit already present),
# then configures and builds into ./build: the library, the CLI, the tests (CUDA kernels included) and the
# Python extension nibble._C with its CUDA bindings for /usr/bin/python3, whose argument checks the ctest
# entry python_cuda_argument_checks runs without a GPU. Idempotent: a second run only rebuilds what changed.
# Arguments are passed to the first configure. nvcc must be found (PATH or /usr/local/cuda/bin): configure
# stops otherwise; pass -DNIBBLE_CUDA=OFF for a build without CUDA.
set -euo pipefail
cd "$(dirname "$0")/.."

need_pkgs=(libcli11-dev nlohmann-json3-dev libfmt-dev libgtest-dev libbenchmark-dev libeigen3-dev libceres-dev ninja-build cmake g++
           python3-dev python3-pip python3-torch python3-pytest python3-numpy)
missing=()
for p in "${need_pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ] && command -v apt-get >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
py=/usr/bin/python3
if ! "$py" -m nanobind --cmake_dir >/dev/null 2>&1; then
  "$py" -m pip install -q nanobind 2>/dev/null || "$py" -m pip install -q --break-system-packages nanobind
fi

# nvcc lives in the CUDA toolkit's bin folder, which is not always on PATH.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi

generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
if [ ! -f build/CMakeCache.txt ]; then
  cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DNIBBLE_PYTHON=ON -DPython_EXECUTABLE="$py" "$@"
fi
cmake --build build -j "$(nproc)"
