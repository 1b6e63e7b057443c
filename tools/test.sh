#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite (cpu tests run; gpu tests skip without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
# setup.sh builds only the `nibble` executable; the tests, benchmarks and everything else build here.
cmake --build build -j "$(nproc)"
ctest --test-dir build --output-on-failure -j "$(nproc)"
# The PyTorch layer on CPU tensors, against the CPU reference, through the package as users get it:
# `pip install .` into a fresh virtual env (tools/python_test.sh runs the same suite from a build tree).
bash tools/pip_test.sh
