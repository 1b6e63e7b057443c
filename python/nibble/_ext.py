"""What every backend shares: loading the extension nibble._C, the recipe names it carries, the CUDA
stream handle passed to its kernels, and the dtype / device helpers of kernel inputs and outputs.

The lowest module of the torch side of the package: it imports torch, nibble._C and the torch-free
package __init__ (load_extension) only, so every other module can import it. The extension is loaded
lazily and once per process; a missing extension is an ImportError from load_extension() (which names the
fix), or a reason string from extension_error() for the paths that fall back to the torch emulation.
"""
import contextlib

import torch

from . import load_extension  # nibble._C or an ImportError naming the fix (defined without torch)

KERNEL_INPUT_DTYPES = (torch.float32, torch.bfloat16)  # the kernels read these directly; others go via FP32

_loaded = None  # nibble._C once imported (tests put a CPU stand-in here)
_load_error = None


def extension():
    """nibble._C, loaded once per process (None if it cannot be imported; extension_error() says why)."""
    global _loaded, _load_error
    if _loaded is None and _load_error is None:
        try:
            _loaded = load_extension()
        except ImportError as e:
            _load_error = str(e)
    return _loaded


def extension_error():
    """Why nibble._C could not be imported (None when it was, or was not tried yet)."""
    return None if _loaded is not None else _load_error


def extension_lacks(ext, binding=None, what=None, source=None):
    """Why `ext` cannot run a CUDA path: not built, built without CUDA, or (binding given) built before the
    bindings of `what` in src/bindings/`source` existed; None when it can."""
    if ext is None:
        return "nibble._C is not built (`pip install .`, or configure with -DNIBBLE_PYTHON=ON: docs/training.md)"
    if not getattr(ext, "has_cuda", False):
        return "nibble._C was built without CUDA (configured with NIBBLE_CUDA=OFF)"
    if binding is not None and not hasattr(ext, binding):
        return f"nibble._C has no {what} CUDA bindings (built before {source} existed: rebuild it)"
    return None


def recipe_names(ext):
    """The recipe names of the C++ table (include/nibble/quant/recipe_list.hpp), in its order."""
    names = getattr(ext, "recipe_names", None)
    return tuple(names) if names is not None else tuple(ext.recipes.split(", "))


def stream_handle(t):
    """The raw cudaStream_t (as an int) of torch's current stream on t's device; 0 for CPU tensors.
    Under torch.compile, torch.cuda.current_stream() may return a generic torch.Stream, which has no
    cuda_stream attribute: the handle is then taken from its stream id."""
    if not t.is_cuda:
        return 0
    s = torch.cuda.current_stream(t.device)
    handle = getattr(s, "cuda_stream", None)
    if handle is not None:
        return handle
    if hasattr(torch._C, "_cuda_getCurrentRawStream"):
        return torch._C._cuda_getCurrentRawStream(t.device.index if t.device.index is not None
                                                  else torch.cuda.current_device())
    return torch.cuda.Stream(stream_id=s.stream_id, device_index=s.device_index,
                             device_type=s.device_type).cuda_stream


def on_device(t):
    """Context making t's CUDA device current (CPU tensors only reach here in tests, where
    tests/python/fake_cuda_ext.py stands in for the kernels)."""
    return torch.cuda.device(t.device) if t.is_cuda else contextlib.nullcontext()


def kernel_input(t):
    """t as the kernels read it: detached, float32 or bfloat16, contiguous, 16-byte aligned."""
    t = t.detach()
    if t.dtype not in KERNEL_INPUT_DTYPES:
        t = t.float()
    t = t.contiguous()
    if t.data_ptr() % 16:
        t = t.clone()  # an offset view; the kernels' vector loads need 16-byte alignment
    return t


def bf16_input(t, name, notes):
    """t as the BF16-reading kernels (FP8, MXFP8, NVFP4) take it: a cast appends "name dtype -> BF16" to notes."""
    t = t.detach()
    if t.dtype != torch.bfloat16:
        notes.append(f"{name} {str(t.dtype).replace('torch.', '')} -> BF16")
        t = t.to(torch.bfloat16)
    t = t.contiguous()
    return t.clone() if t.data_ptr() % 16 else t  # an offset view; the kernels' vector loads need 16 bytes


def out_dtype(dtype):
    """The dtype a GEMM writes for inputs of `dtype`: bfloat16 for bfloat16, else float32."""
    return torch.bfloat16 if dtype == torch.bfloat16 else torch.float32
