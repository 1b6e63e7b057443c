"""nibble: FP8/FP4 transformer-training recipes (docs/spec.md §2-3) for Python.

`nibble._C` is the compiled extension (nanobind; CPU reference, plus CUDA kernels when built with CUDA).
`nibble.torch` holds the PyTorch layer (`Linear`, `convert`), `nibble.backends` the ways it quantizes.
The extension is found next to this file (installed by `pip install .`) or, in a build tree, in
$NIBBLE_BUILD_DIR/python/nibble (set by tools/python_test.sh), so `PYTHONPATH=python NIBBLE_BUILD_DIR=build ...`
works without installing.
"""
import os as _os

_build = _os.environ.get("NIBBLE_BUILD_DIR")
if _build:
    __path__.append(_os.path.join(_os.path.abspath(_build), "python", "nibble"))  # noqa: F821

__all__ = ["load_extension"]


def load_extension():
    """Return nibble._C, or raise ImportError saying how to build it."""
    from ._ext import load_extension as load
    return load()
