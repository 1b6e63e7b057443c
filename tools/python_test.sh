#!/usr/bin/env bash
# Build nibble._C for /usr/bin/python3 (Debian's python3-torch 1.13, CPU) and run the pytest suite of
# the PyTorch layer on CPU tensors. Installs what is missing (apt: python3-torch python3-pytest
# python3-numpy python3-dev, ~2 min here; pip: nanobind and ml_dtypes, ~2 s each).
# Usage: tools/python_test.sh [pytest args...]   Env: NIBBLE_PY_BUILD (default build-python), PYTHON, JOBS.
set -euo pipefail
cd "$(dirname "$0")/.."
py="${PYTHON:-/usr/bin/python3}"
build="${NIBBLE_PY_BUILD:-build-python}"
jobs="${JOBS:-2}"
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
if ! "$py" -c "import torch, numpy, pytest" >/dev/null 2>&1; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-torch python3-pytest python3-numpy python3-dev >/dev/null
fi
if ! "$py" -m nanobind --cmake_dir >/dev/null 2>&1; then
  "$py" -m pip install -q nanobind 2>/dev/null || "$py" -m pip install -q --break-system-packages nanobind
fi
# ml_dtypes (JAX's FP8/FP4/E8M0 dtypes): the independent reference of tests/python/test_independent_formats.py.
# Pinned, without dependencies, so pip leaves Debian's numpy 1.24 (which python3-torch is built against) alone.
if ! "$py" -c "import ml_dtypes" >/dev/null 2>&1; then
  "$py" -m pip install -q --no-deps "ml_dtypes==0.5.1" 2>/dev/null ||
    "$py" -m pip install -q --no-deps --break-system-packages "ml_dtypes==0.5.1"
fi
# CPU only: the extension's CPU reference is what CI can test; CUDA builds add the kernels on top.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNIBBLE_CUDA=OFF -DNIBBLE_TESTS=OFF \
  -DNIBBLE_BENCH=OFF -DNIBBLE_PYTHON=ON -DPython_EXECUTABLE="$py" >/dev/null
cmake --build "$build" -j "$jobs" --target nibble_python_ext
PYTHONPATH=python NIBBLE_BUILD_DIR="$build" NIBBLE_REQUIRE_ML_DTYPES=1 "$py" -m pytest -q tests/python "$@"
