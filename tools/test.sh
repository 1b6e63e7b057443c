#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite (cpu tests run; gpu tests are Skipped, exit 77, only when
# the machine has no GPU: any other CUDA error fails them).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
ctest --test-dir build --output-on-failure -j "$(nproc)"
# The PyTorch layer on CPU tensors, against the CPU reference, through the package as users get it:
# `pip install .` into a fresh virtual env (tools/python_test.sh runs the same suite from a build tree), then
# the package in a second fresh env without torch.
bash tools/pip_test.sh
