"""nibble: FP8/FP4 transformer-training recipes (docs/spec.md §2-3) for Python.

`nibble._C` is the compiled extension (nanobind; CPU reference, plus CUDA kernels when built with CUDA).
`nibble.quantize` runs the CPU reference on a NumPy array and needs no PyTorch; `nibble.torch` holds the
PyTorch layer (`Linear`, `convert`), `nibble.backends` the ways it quantizes.
The extension is found next to this file (installed by `pip install .`) or, in a build tree, in
$NIBBLE_BUILD_DIR/python/nibble (set by tools/python_test.sh), so `PYTHONPATH=python NIBBLE_BUILD_DIR=build ...`
works without installing. This module imports neither torch nor NumPy at import time.
"""
import os as _os

_build = _os.environ.get("NIBBLE_BUILD_DIR")
if _build:
    __path__.append(_os.path.join(_os.path.abspath(_build), "python", "nibble"))  # noqa: F821

__all__ = ["load_extension", "quantize"]

_BUILD_HINT = ("install the package (`pip install .` in the nibble checkout; it builds nibble._C with the CUDA "
               "kernels, or without them with -C cmake.define.NIBBLE_CUDA=OFF), or in a build tree configure with "
               "-DNIBBLE_PYTHON=ON -DPython_EXECUTABLE=$(which python3), build target nibble_python_ext and set "
               "NIBBLE_BUILD_DIR=<build folder> (tools/python_test.sh does both)")


def load_extension():
    """Return nibble._C, or raise ImportError saying how to build it."""
    try:
        from . import _C
    except ImportError as e:
        raise ImportError(f"nibble._C is not built: {_BUILD_HINT}. Cause: {e}") from e
    return _C


def quantize(x, recipe, role="x", **options):
    """The CPU reference's quantization of a 2-D array (any array-like; copied to contiguous float32), blocks
    along its last dimension: nibble._C.quantize's dict, e.g. "original" (decoded back to x's domain, a NumPy
    float32 array), "codes" (element codes), "scale_codes", "produced_by". options: nibble._C.quantize's
    keywords (seed, rounding, mx_scale_rule, hadamard_size, ...). Needs NumPy, not PyTorch."""
    import numpy as np
    a = np.ascontiguousarray(x, dtype=np.float32)
    if a.ndim != 2:
        raise ValueError(f"nibble.quantize: x has shape {a.shape}; give a 2-D array [rows, cols] "
                         "(blocks run along cols; reshape a vector to (1, n))")
    return load_extension().quantize(a, recipe, role, **options)
