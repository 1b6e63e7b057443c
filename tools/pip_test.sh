#!/usr/bin/env bash
# `pip install .` into a fresh virtual env, then the pytest suite of the PyTorch layer against the
# INSTALLED package: no PYTHONPATH to python/, no NIBBLE_BUILD_DIR. The env sees Debian's python3-torch
# and NumPy (--system-site-packages); the build requirements (scikit-build-core, nanobind) come from PyPI.
# CPU-only extension by default (NIBBLE_PIP_CUDA=ON builds the CUDA kernels too: ~20 min on 2 cores).
# Then the package without PyTorch: a second fresh env that does not see the system's packages (NumPy and
# pytest from PyPI, no torch), the same `pip install .`, and tests/python_without_torch (the extension
# loads, nibble.quantize on NumPy arrays, nibble.torch's ImportError names `pip install torch`).
# Installs what is missing like tools/python_test.sh (apt: python3-torch python3-pytest python3-numpy
# python3-dev python3-venv).
# Usage: tools/pip_test.sh [pytest args...]
# Env: NIBBLE_PIP_ENV (default build-pip-env; the env without torch: <it>-no-torch), NIBBLE_PIP_BUILD
# (default build-pip: CMake build folder kept between runs; <it>-no-torch for the second env), NIBBLE_PIP_CUDA
# (OFF), PYTHON (/usr/bin/python3).
set -euo pipefail
cd "$(dirname "$0")/.."
py="${PYTHON:-/usr/bin/python3}"
venv="${NIBBLE_PIP_ENV:-build-pip-env}"
build="${NIBBLE_PIP_BUILD:-build-pip}"
cuda="${NIBBLE_PIP_CUDA:-OFF}"
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
if ! "$py" -c "import torch, numpy, pytest, ensurepip" >/dev/null 2>&1; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-torch python3-pytest python3-numpy \
    python3-dev python3-venv >/dev/null
fi
rm -rf "$venv"
"$py" -m venv --system-site-packages "$venv"
vpy="$PWD/$venv/bin/python"
# ml_dtypes: the independent reference of tests/python/test_independent_formats.py; without dependencies,
# so Debian's NumPy (which python3-torch is built against) stays.
"$vpy" -m pip install -q --no-deps "ml_dtypes==0.5.1"
launcher=()
# (--config-settings: Debian 12's pip 23.0 predates its short form -C.)
command -v ccache >/dev/null 2>&1 && launcher=(--config-settings=cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache
  --config-settings=cmake.define.CMAKE_CUDA_COMPILER_LAUNCHER=ccache)
env -u PYTHONPATH -u NIBBLE_BUILD_DIR "$vpy" -m pip install -q . --config-settings=build-dir="$build" \
  --config-settings=cmake.define.NIBBLE_CUDA="$cuda" "${launcher[@]}"
# From outside the checkout, so `import nibble` can only find the installed package.
root="$PWD"
cd "$venv"
env -u PYTHONPATH -u NIBBLE_BUILD_DIR NIBBLE_EXPECT_INSTALLED=1 NIBBLE_REQUIRE_ML_DTYPES=1 \
  "$vpy" -m pytest -q -p no:cacheprovider --rootdir "$root/tests/python" "$root/tests/python" "$@"
cd "$root"

# Without PyTorch (and without the system's site-packages, where Debian's python3-torch lives).
venv_nt="$venv-no-torch"
rm -rf "$venv_nt"
"$py" -m venv "$venv_nt"
npy="$PWD/$venv_nt/bin/python"
"$npy" -m pip install -q numpy pytest
env -u PYTHONPATH -u NIBBLE_BUILD_DIR "$npy" -m pip install -q . --config-settings=build-dir="$build-no-torch" \
  --config-settings=cmake.define.NIBBLE_CUDA="$cuda" "${launcher[@]}"
cd "$venv_nt"
env -u PYTHONPATH -u NIBBLE_BUILD_DIR "$npy" -m pytest -q -p no:cacheprovider \
  --rootdir "$root/tests/python_without_torch" "$root/tests/python_without_torch"
