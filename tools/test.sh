#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite (cpu tests run; gpu tests are Skipped, exit 77, only when
# the machine has no GPU: any other CUDA error fails them).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
# What the tests need beyond the CLI: chromium (the HTML report's browser test), Debian's Python with torch,
# NumPy and pytest, and nanobind for the extension nibble._C, whose CUDA argument checks the ctest entry
# python_cuda_argument_checks runs without a GPU.
bash tools/install_packages.sh chromium python3-dev python3-pip python3-torch python3-pytest python3-numpy
py=/usr/bin/python3
if ! "$py" -m nanobind --cmake_dir >/dev/null 2>&1; then
  "$py" -m pip install -q nanobind 2>/dev/null || "$py" -m pip install -q --break-system-packages nanobind
fi
export PATH=/usr/local/cuda/bin:$PATH
# setup.sh built only the `nibble` executable; the tests, benchmarks and the extension build here.
cmake -S . -B build -DNIBBLE_PYTHON=ON -DPython_EXECUTABLE="$py" >/dev/null
cmake --build build -j "$(nproc)"
ctest --test-dir build --output-on-failure -j "$(nproc)"
# The PyTorch layer on CPU tensors, against the CPU reference, through the package as users get it:
# `pip install .` into a fresh virtual env (tools/python_test.sh runs the same suite from a build tree), then
# the package in a second fresh env without torch.
bash tools/pip_test.sh
