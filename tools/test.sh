#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite (cpu tests run; gpu tests skip without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
ctest --test-dir build --output-on-failure -j "$(nproc)"
# The PyTorch layer (python/nibble) on CPU tensors, against the CPU reference.
bash tools/python_test.sh
# The same suite against the package as users get it: `pip install .` into a fresh virtual env.
bash tools/pip_test.sh
