"""mxfp4 on CUDA tensors through nibble's own kernels and cuBLASLt (the CUDA build of nibble._C:
src/bindings/bind_cuda_fp4.cpp for the quantizers; the re-encoding, decode and GEMM of bind_cuda.cpp).

The GPU half of nibble.torch.Linear(recipe="mxfp4") (docs/spec.md §2: 1x32 blocks along each GEMM's inner
dimension, E2M1 elements, E8M0 scales by the layer's mx_scale_rule: ocp = 2^(floor(log2 amax) - 2), or
round-up = 2^ceil(log2(amax / 6)); round-to-nearest-even in every role, as the reference backend's
quantize(..., rounding="by-recipe") does for mxfp4). The calls of src/recipes/tensor_quantizer_fp4.cu:
  fprop: X and W are each quantized once: the row-wise copy (fprop) and, when a gradient will need it,
         the column-wise copy (X^T for wgrad, W^T for dgrad) from the same read (quantize_mxfp4_rowcol;
         a row-wise copy alone runs the thread-per-group quantize_mxfp4); Y = GEMM(X, W)
  dgrad: dY is quantized once into dY (row-wise, when dX is needed) and dY^T (column-wise, when dW is);
         dX = GEMM(dY, W^T)
  wgrad: dW = GEMM(dY^T, X^T)
The column-wise copies are blocked along the transposed tensors' inner dimension, i.e. exactly the
reference backend's requantization of X^T, W^T and dY^T. The kernels read FP32 and BF16 directly (other
dtypes via FP32), so every quantized operand equals the reference backend's bit for bit.

GEMMs (docs/spec.md §4), as in nibble.backends.quartet: each MXFP4 operand is re-encoded exactly into E4M3 with one
power-of-two scale per row and multiplied by cuBLASLt's FP8 GEMM (OUTER_VEC, split accumulation: path
"emulated-exact (fp8)"). A pair with a row whose block exponents spread over more than 14 binades is
re-encoded per 1x128 group (VEC128), or, when that is inexact too (or K % 128 != 0), decoded to BF16 for
an exact BF16 GEMM; last_path / last_backward_path name the path and why. Results differ from the
reference backend only by the GEMMs' FP32 accumulation (and BF16 outputs for BF16 inputs).
Cost of that check: as in nibble.backends.quartet (gemm_check: "sync" reads the violation counters, one host
sync per forward and one per backward; "deferred", the default, reads them back after the pass).
Streams and allocation as in nibble.backends.quartet.
"""
import torch

from .._ext import (KERNEL_INPUT_DTYPES, extension, extension_error, extension_lacks, kernel_input, on_device,
                    out_dtype, stream_handle)
from .common import finish_backward, finish_forward, require_whole_token_blocks
from .quartet import Operand, Planes, deferred_check, gemm_pair, settle
from ..weight_cache import cached

RECIPES = ("mxfp4",)
BLOCK = 32  # along every GEMM's inner dimension: in_features (fprop), out_features (dgrad), tokens (wgrad)


def unsupported_reason(ext):
    """Why the MXFP4 CUDA path cannot run with this extension (None when it can)."""
    return extension_lacks(ext, "quantize_mxfp4_rowcol_cuda", "MXFP4", "bind_cuda_fp4.cpp")


def unavailable_for(layer, x):
    """Why Linear(recipe="mxfp4") cannot run this call on the kernels (None when it can). in_features and
    out_features are multiples of 32 for every mxfp4 layer; tokens are checked where a gradient needs them."""
    ext = extension()
    return extension_error() if ext is None else unsupported_reason(ext)


def apply(layer, x):
    """y = x W^T (+ b) for x [tokens, in_features] on a CUDA device (x's dtype kept into the kernels)."""
    return Mxfp4CudaFunction.apply(x, layer.weight, layer.bias, layer, torch.is_grad_enabled())


def quantize(ext, x, rowwise, colwise, rule, stream):
    """x [rows, cols] (FP32 or BF16, on the device) -> (row-wise planes or None, column-wise planes of x^T or
    None, kernel path). One read of x whatever is asked for."""
    (rows, cols), dev = x.shape, x.device
    row = Planes(rows, cols, dev) if rowwise else None
    col = Planes(cols, rows, dev) if colwise else None
    if col is None:
        return row, None, ext.quantize_mxfp4_cuda(x, row.codes, row.scales, scale_rule=rule, stream=stream)
    kernel = ext.quantize_mxfp4_rowcol_cuda(x, *((row.codes, row.scales) if row else (None, None)), col.codes,
                                            col.scales, scale_rule=rule, stream=stream)
    return row, col, kernel


def _gemms(ext, pairs, dev, stream, deferred=None):
    """pairs: (pass, (A planes, name), (B planes, name), output dtype). Row re-encodes every operand, reads all
    violation counts with one host sync, then runs each GEMM on its coarsest exact path. Returns (outputs, labels)."""
    counts = torch.full((2 * len(pairs), 2), -1, dtype=torch.int32, device=dev)
    ops = [Operand(p, what, counts[j]) for j, (p, what) in enumerate(x for pr in pairs for x in pr[1:3])]
    for op in ops:
        op.reencode(ext, "row", stream)  # also counts the 1x128 groups when cols % 128 == 0
    settle(counts, ops, [pr[0] for pr in pairs], deferred)
    outs, labels = [], []
    for j, (pass_, _, _, dtype) in enumerate(pairs):
        a, b = ops[2 * j], ops[2 * j + 1]
        out = torch.empty(a.p.rows, b.p.rows, dtype=out_dtype(dtype), device=dev)
        labels.append(gemm_pair(ext, a, b, out, 1.0, pass_, stream))
        outs.append(out)
    return outs, labels


def forward(ext, x, w, options, need_xt, need_wt, stream, deferred=None, layer=None):
    """Y = Q(X) Q(W)^T for x [T, I], w [O, I] (FP32 or BF16, contiguous, on one CUDA device). need_xt / need_wt:
    also make the column-wise copies X^T (for wgrad) / W^T (for dgrad). Returns (y, X^T planes or None,
    W^T planes or None, path); y is BF16 when x is, else FP32. layer: whose weight_cache keeps W's planes
    (w may be a function returning the kernel's input, then called only when W is quantized)."""
    rule = options["mx_scale_rule"]
    xp, xtp, kx = quantize(ext, x, True, need_xt, rule, stream)
    (wp, wtp, kw), hit = cached(layer, ("mxfp4", need_wt, rule),
                                lambda: quantize(ext, w() if callable(w) else w, True, need_wt, rule, stream))
    kw = "cached (weight_cache)" if hit else kw
    (y,), (g,) = _gemms(ext, [("fprop", (xp, "X"), (wp, "W"), x.dtype)], x.device, stream, deferred)
    return y, xtp, wtp, f"cuda mxfp4 forward: X {kx}; W {kw}; {g}"


def backward(ext, dy, xtp, wtp, options, dx_dtype, dw_dtype, stream, need_dx=True, need_dw=True, deferred=None):
    """dX [T, I] and dW [O, I] (None where not needed) from dy [T, O] and the forward's column-wise copies."""
    dyp, dytp, kernel = quantize(ext, dy, need_dx, need_dw, options["mx_scale_rule"], stream)
    pairs = []
    if need_dx:
        pairs.append(("dgrad", (dyp, "dY"), (wtp, "W^T"), dx_dtype))
    if need_dw:
        pairs.append(("wgrad", (dytp, "dY^T"), (xtp, "X^T"), dw_dtype))
    outs, labels = _gemms(ext, pairs, dy.device, stream, deferred)
    dx = outs.pop(0) if need_dx else None
    dw = outs.pop(0) if need_dw else None
    return dx, dw, "cuda mxfp4 backward: " + "; ".join([f"dY {kernel}"] + labels)


class Mxfp4CudaFunction(torch.autograd.Function):
    """y = x W^T (+ b) with mxfp4's three GEMMs on nibble's kernels and cuBLASLt. x: [T, I] on a CUDA device;
    dX comes back in x's dtype, dW in the weight's, dB in the bias's. grad_enabled: the caller's
    torch.is_grad_enabled() (inside forward it is always off), so no-grad passes skip the column-wise copies."""

    @staticmethod
    def forward(ctx, x, weight, bias, layer, grad_enabled):
        ext = extension()
        need_dx, need_dw = grad_enabled and ctx.needs_input_grad[0], grad_enabled and ctx.needs_input_grad[1]
        if need_dw:
            require_whole_token_blocks(layer, x.shape[0], BLOCK)
        with on_device(x):
            y, xtp, wtp, path = forward(ext, kernel_input(x), lambda: kernel_input(weight), layer.options, need_dw,
                                        need_dx, stream_handle(x), deferred_check(layer), layer)
        ctx.save_for_backward(*((None, None) if xtp is None else (xtp.codes, xtp.scales)),
                              *((None, None) if wtp is None else (wtp.codes, wtp.scales)))
        ctx.layer, ctx.step = layer, layer.host_step()
        ctx.shapes = (x.shape[0], x.shape[1], weight.shape[0])
        ctx.dtypes = (x.dtype, weight.dtype, None if bias is None else bias.dtype)
        return finish_forward(layer, x, weight, bias, y, path, keep_dtype=x.dtype in KERNEL_INPUT_DTYPES)

    @staticmethod
    def backward(ctx, dy):
        layer, (t, i, o), (x_dtype, w_dtype, b_dtype) = ctx.layer, ctx.shapes, ctx.dtypes
        xtc, xts, wtc, wts = ctx.saved_tensors
        xtp = None if xtc is None else Planes(i, t, None, tensors=(xtc, xts, None))
        wtp = None if wtc is None else Planes(i, o, None, tensors=(wtc, wts, None))
        need_dx, need_dw = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        if (need_dx and wtp is None) or (need_dw and xtp is None):  # forward makes them whenever grad is on
            raise RuntimeError("nibble.backends.mxfp4: a gradient is needed whose column-wise copy forward did "
                               "not make")
        dx = dw = None
        if need_dx or need_dw:
            with on_device(dy):
                dx, dw, path = backward(extension(), kernel_input(dy), xtp, wtp, layer.options, x_dtype, w_dtype,
                                        stream_handle(dy), need_dx, need_dw, deferred_check(layer, ctx.step))
            layer.last_backward_path = path
        dx, dw, db = finish_backward(ctx, layer, dy, dx, dw, (x_dtype, w_dtype, b_dtype), ctx.step)
        return dx, dw, db, None, None
