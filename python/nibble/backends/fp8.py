"""fp8-current, fp8-delayed and fp8-block on CUDA tensors through nibble's own kernels and cuBLASLt
(the CUDA build of nibble._C: src/bindings/bind_cuda_fp8.cpp, and gemm_cuda).

The GPU half of nibble.torch.Linear for those recipes; the calls of src/recipes/tensor_quantizer_fp8.cu:
  fprop: X and W are each quantized in one pass into the row-wise copy (fprop) and, when a gradient will
         need it, the column-wise copy (X^T for wgrad, W^T for dgrad); Y = GEMM(X, W)
  dgrad: dY is quantized in one pass into dY (row-wise, when dX is needed) and dY^T (column-wise, when
         dW is); dX = GEMM(dY, W^T)
  wgrad: dW = GEMM(dY^T, X^T)
Recipes (docs/spec.md §2, the same rules as the reference backend):
  fp8-current  per tensor, hybrid (E4M3 X and W, E5M2 dY): the amax pass, then the cast pass deriving
               s_enc = fmax / amax on the device (two launches, no host round trip)
  fp8-delayed  per tensor, hybrid, Transformer Engine's delayed scaling on the module's state (amax_history /
               amax_filled / scale buffers, history newest last, the state_dict format every backend shares):
               the update kernel sets s_enc from the history max when that is finite and > 0 (else the
               layer's previous scale stays; 1 before any update, TE's first step), then one cast pass
               records this step's amax (NaN/inf as they are). delayed_first_step="own_amax": an empty
               history uses the tensor's own amax instead (an amax pass). Evaluation passes read X's and W's
               histories without adding to them (dY always records).
  fp8-block    E4M3, 1x128 blocks for X and dY (VEC128 scales), 128x128 blocks for W (BLK128x128). The
               column-wise copies are blocked along the transposed tensors' inner dimension, i.e. what the
               reference backend's requantization of X^T, dY^T and W^T gives.
GEMMs: gemm_cuda on the recipe's own FP8 data (path "native"), accumulation as in Transformer Engine
(default_for_pass: fast for fprop, split for dgrad and wgrad; the block-scaled modes always split).
Inputs: the FP8 kernels read BF16, so FP32 tensors are rounded to BF16 first (one cast each, named in
last_path). On BF16 values every quantized operand equals the reference backend's bit for bit, and the
results differ from it only by the GEMMs' accumulation (and the BF16 outputs of BF16 inputs).
Host syncs: none for fp8-current, fp8-block and fp8-delayed (the first step and kept scales are decided on
the device). With delayed_first_step="own_amax", fp8-delayed needs to know whether a role's history is
empty and reads amax_filled back only until each role has recorded once: the layer remembers non-empty
histories (_history_nonempty), and load_state_dict forgets them. Streams and
allocation as in nibble.backends.quartet.
"""
import copy

import torch

from .._ext import bf16_input, extension, extension_error, extension_lacks, on_device, out_dtype, stream_handle
from .common import finish_backward, finish_forward, gemm_into
from .emulated import DELAYED_FIRST_STEP
from ..weight_cache import cached

RECIPES = ("fp8-current", "fp8-delayed", "fp8-block")
HYBRID_FORMAT = {"x": "e4m3", "w": "e4m3", "dy": "e5m2"}
ROLE_INDEX = {"x": 0, "w": 1, "dy": 2}  # rows of the module's amax_history
MULTIPLE = 16  # of tokens, in_features, out_features: the kernels' 16-byte stores, FP8 GEMMs' K % 16


def unsupported_reason(ext, shape=None):
    """Why the FP8 CUDA path cannot run with this extension on a [tokens, in_features, out_features]
    problem `shape` (None: shape not yet known); None when it can."""
    lacks = extension_lacks(ext, "quantize_fp8_current_cuda", "FP8", "bind_cuda_fp8.cpp")
    if lacks:
        return lacks
    if shape is not None:
        bad = [f"{name} {n}" for name, n in zip(("tokens", "in_features", "out_features"), shape) if n % MULTIPLE]
        if bad:
            return (f"{', '.join(bad)} not a multiple of {MULTIPLE} (the FP8 kernels and cuBLASLt's FP8 GEMMs need "
                    f"whole 16-element rows)")
    return None


def unavailable_for(layer, x):
    """Why Linear(recipe in RECIPES) cannot run this call x [tokens, in_features] here (None when it can)."""
    ext = extension()
    if ext is None:
        return extension_error()
    return unsupported_reason(ext, (x.shape[0], layer.in_features, layer.out_features))


def apply(layer, x):
    """y = x W^T (+ b) for x [tokens, in_features] on a CUDA device."""
    return Fp8CudaFunction.apply(x, layer.weight, layer.bias, layer, torch.is_grad_enabled())


def _conversions(notes):
    return f" ({', '.join(notes)}: the FP8 kernels read BF16)" if notes else ""


class Operand:
    """One quantized tensor [rows, cols]: its row-wise copy [rows, cols] and/or column-wise copy [cols, rows]
    (uint8 FP8 codes of format `fmt`), each with FP32 decode scales in the cuBLASLt layout of `mode`."""

    def __init__(self, fmt, mode, row=None, row_scale=None, col=None, col_scale=None):
        self.fmt, self.mode = fmt, mode
        self.row, self.row_scale, self.col, self.col_scale = row, row_scale, col, col_scale

    def copy(self, which):
        codes, scale = (self.row, self.row_scale) if which == "row" else (self.col, self.col_scale)
        assert codes is not None, f"the {which}-wise copy was not made"
        return codes, scale


def _delayed(ext, layer, x, role, fmt, row, col, scale, scale_inv, filled, stream):
    """fp8-delayed on the module's state for `role`: its amax_history row (newest last) and its `scale` entry, as
    Transformer Engine's DelayedScaling (quant::AmaxHistory). `scale`, `scale_inv`: a fresh 16-byte slot each, used
    only by the own-amax first step (s_dec always lands in scale_inv, the GEMM's scale). Returns the kernels' paths."""
    idx = ROLE_INDEX[role]
    hist = layer.amax_history[idx]
    window, margin = hist.shape[0], layer.options["margin"]
    record = layer.training or role == "dy"
    own_first = layer.options["delayed_first_step"] == "own_amax" and not filled
    how = DELAYED_FIRST_STEP[layer.options["delayed_first_step"]] + ("; this step: own amax" if own_first else "")
    # The update writes s_enc and s_dec only where the history max is finite and > 0 (else the previous scale
    # stays, 1 before any update), so s_dec starts as the decode of the layer's scale. It reads every slot
    # (unfilled ones hold 0, which the max ignores), then zeroes slot 0, the oldest amax, which the roll below
    # turns into this step's slot (on a copy when not recording).
    kept = layer.scale[idx:idx + 1]
    torch.reciprocal(kept, out=scale_inv)
    kernels = [ext.update_fp8_delayed_scale_cuda(hist if record else hist.clone(), kept, scale_inv,
                                                 step=window - 1, format=fmt, margin=margin, stream=stream)]
    if own_first:
        # The first step's own amax: the amax pass into a one-slot ring, and the scale from that ring (1 where
        # that amax is 0 or non-finite); the layer's scale is not changed by it.
        ring = torch.empty(1, dtype=torch.float32, device=x.device)
        scale.fill_(1.0)
        scale_inv.fill_(1.0)
        kernels += [ext.amax_bf16_cuda(x, ring, stream=stream),
                    ext.update_fp8_delayed_scale_cuda(ring, scale, scale_inv, step=0, format=fmt, margin=margin,
                                                      stream=stream)]
    else:
        scale = kept
    if record:
        hist.copy_(torch.roll(hist, -1))
        hist[-1:].zero_()
        # The kernel max-combines the amax into the zeroed slot; NaN/inf stay there (Transformer Engine's rule).
        kernels.append(ext.quantize_fp8_delayed_cuda(x, hist, scale, scale_inv, row, col, step=window - 1,
                                                     format=fmt, stream=stream))
        layer.amax_filled[idx:idx + 1].add_(1).clamp_(max=window)
        layer._delayed_nonempty[idx] = True
    else:
        how += "; eval: not recorded"
        kernels.append(ext.cast_transpose_fp8_cuda(x, scale, row, col, None, format=fmt, stream=stream))
    return f"fp8-delayed {fmt} (delayed scaling, {how}): " + " + ".join(kernels)


def _history_known(layer, roles):
    """fp8-delayed: whether each role's history is non-empty, read only where it matters: with
    delayed_first_step="own_amax" (the empty history's own-amax rule); with "te" the update on the device
    covers the first step (an all-zero history keeps the scale 1), so nothing is read back."""
    if layer.recipe != "fp8-delayed" or layer.options["delayed_first_step"] != "own_amax":
        return [True] * len(roles)
    return _history_nonempty(layer, roles)


def _read_filled(layer):
    """amax_filled on the host (a device-to-host copy: a host sync when the buffers live on a GPU)."""
    return layer.amax_filled.tolist()


def _history_nonempty(layer, roles):
    """fp8-delayed: whether the amax history of each role holds at least one amax. A history only grows
    (recording, DDP's MAX all-reduce) until load_state_dict replaces it, which clears what the layer
    remembers (Linear._load_from_state_dict); so once a role is known non-empty nothing is read back, and
    after the first step the fp8-delayed passes make no host sync. Editing amax_filled by hand to 0 needs
    layer.forget_history_state() afterwards."""
    known = layer._delayed_nonempty
    if not all(known[ROLE_INDEX[r]] for r in roles):
        for i, n in enumerate(_read_filled(layer)):
            known[i] = known[i] or n > 0
    return [known[ROLE_INDEX[r]] for r in roles]


def quantize(ext, layer, x, role, rowwise, colwise, filled, stream):
    """x [rows, cols] (BF16, on the device) under the layer's recipe for `role` -> (Operand with the copies
    asked for, kernel path). `filled`: fp8-delayed: whether this role's amax history is non-empty."""
    (rows, cols), dev = x.shape, x.device
    row = torch.empty(rows, cols, dtype=torch.uint8, device=dev) if rowwise else None
    col = torch.empty(cols, rows, dtype=torch.uint8, device=dev) if colwise else None
    if layer.recipe == "fp8-block":
        block, mode = ("128x128", "blk128x128") if role == "w" else ("1x128", "vec128")
        rs, cs = (torch.empty(ext.fp8_block_scale_count(block, rows, cols, copy), dtype=torch.float32, device=dev)
                  if want else None for copy, want in (("rowwise", rowwise), ("colwise", colwise)))
        fn = ext.quantize_fp8_block_128x128_cuda if role == "w" else ext.quantize_fp8_block_1x128_cuda
        return Operand("e4m3", mode, row, rs, col, cs), fn(x, row, col, rs, cs, layout="cublaslt", stream=stream)
    fmt = HYBRID_FORMAT[role]
    scalars = torch.empty(3, 4, dtype=torch.float32, device=dev)  # amax, s_enc, s_dec: one 16-byte slot each
    amax, scale, scale_inv = scalars[0, :1], scalars[1, :1], scalars[2, :1]
    if layer.recipe == "fp8-current":
        kernel = f"fp8-current {fmt}: " + ext.quantize_fp8_current_cuda(x, row, col, amax, scale, scale_inv,
                                                                         format=fmt, stream=stream)
    else:
        kernel = _delayed(ext, layer, x, role, fmt, row, col, scale, scale_inv, filled, stream)
    return Operand(fmt, "per_tensor", row, scale_inv, col, scale_inv), kernel


def gemm(ext, a, a_copy, b, b_copy, out, pass_, stream):
    """out = A B^T from copies of two operands; returns the label for last_path."""
    (ac, asc), (bc, bsc) = a.copy(a_copy), b.copy(b_copy)
    kw = dict(a_dtype=a.fmt, b_dtype=b.fmt, a_scale_mode=a.mode, b_scale_mode=b.mode, alpha=1.0, pass_=pass_,
              accumulation="default", operands="native", stream=stream)
    return f"{pass_} GEMM " + gemm_into(ext, (ac, asc, bc, bsc), out, kw, f"{a.mode} x {b.mode}")


def _quantize_weight(ext, layer, w, need_wt, filled, stream):
    notes = []
    wq, kernel = quantize(ext, layer, bf16_input(w, "W", notes), "w", True, need_wt, filled, stream)
    return wq, kernel, notes


def forward(ext, layer, x, w, need_xt, need_wt, stream):
    """Y = Q(X) Q(W)^T for x [T, I], w [O, I] on one CUDA device. need_xt / need_wt: keep the column-wise
    copies X^T (for wgrad) / W^T (for dgrad). Returns (y, X operand, W operand, path); y is BF16 when x is,
    else FP32. Only the column-wise copies stay in the operands."""
    notes = []
    xb = bf16_input(x, "X", notes)
    filled = _history_known(layer, ("x", "w"))
    xq, kx = quantize(ext, layer, xb, "x", True, need_xt, filled[0], stream)
    (wq, kw, wnotes), hit = cached(layer, ("fp8", need_wt), lambda: _quantize_weight(ext, layer, w, need_wt,
                                                                                     filled[1], stream))
    wq, notes = copy.copy(wq), notes + wnotes  # the cache keeps its operand whole; this pass drops the row copy
    kw = "cached (weight_cache)" if hit else kw
    y = torch.empty(x.shape[0], w.shape[0], dtype=out_dtype(x.dtype), device=x.device)
    g = gemm(ext, xq, "row", wq, "row", y, "fprop", stream)
    for op in (xq, wq):
        op.row = op.row_scale = None  # fprop's copies: not needed any more
    return y, xq, wq, f"cuda {layer.recipe} forward{_conversions(notes)}: X {kx}; W {kw}; {g}"


def backward(ext, layer, dy, xq, wq, need_dx, need_dw, dx_dtype, dw_dtype, stream):
    """dX [T, I] and dW [O, I] (None where not needed) from dy [T, O] and the forward's column-wise copies."""
    notes = []
    dyb = bf16_input(dy, "dY", notes)
    (t, o), i = dy.shape, (xq.col if xq.col is not None else wq.col).shape[0]
    filled = _history_known(layer, ("dy",))[0]
    dyq, kernel = quantize(ext, layer, dyb, "dy", need_dx, need_dw, filled, stream)
    dx = dw = None
    paths = [f"dY {kernel}"]
    if need_dx:
        dx = torch.empty(t, i, dtype=out_dtype(dx_dtype), device=dy.device)
        paths.append(gemm(ext, dyq, "row", wq, "col", dx, "dgrad", stream))
    if need_dw:
        dw = torch.empty(o, i, dtype=out_dtype(dw_dtype), device=dy.device)
        paths.append(gemm(ext, dyq, "col", xq, "col", dw, "wgrad", stream))
    return dx, dw, f"cuda {layer.recipe} backward{_conversions(notes)}: " + "; ".join(paths)


class Fp8CudaFunction(torch.autograd.Function):
    """y = x W^T (+ b) with the recipe's three GEMMs on nibble's FP8 kernels and cuBLASLt. x: [T, I] on a CUDA
    device; y comes back in x's dtype, dX in x's, dW in the weight's, dB in the bias's. grad_enabled: the
    caller's torch.is_grad_enabled() (inside forward it is always off), so no-grad passes skip the
    column-wise copies."""

    @staticmethod
    def forward(ctx, x, weight, bias, layer, grad_enabled):
        ext = extension()
        need_dx, need_dw = grad_enabled and ctx.needs_input_grad[0], grad_enabled and ctx.needs_input_grad[1]
        with on_device(x):
            y, xq, wq, path = forward(ext, layer, x, weight, need_dw, need_dx, stream_handle(x))
        ctx.save_for_backward(xq.col, xq.col_scale, wq.col, wq.col_scale)
        ctx.layer, ctx.step = layer, layer.host_step()
        ctx.kinds = ((xq.fmt, xq.mode), (wq.fmt, wq.mode))
        ctx.dtypes = (x.dtype, weight.dtype, None if bias is None else bias.dtype)
        return finish_forward(layer, x, weight, bias, y, path)

    @staticmethod
    def backward(ctx, dy):
        layer, (x_dtype, w_dtype, b_dtype) = ctx.layer, ctx.dtypes
        xc, xs, wc, ws = ctx.saved_tensors
        xq, wq = Operand(*ctx.kinds[0], col=xc, col_scale=xs), Operand(*ctx.kinds[1], col=wc, col_scale=ws)
        need_dx, need_dw = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        dx = dw = None
        if need_dx or need_dw:
            with on_device(dy):
                dx, dw, path = backward(extension(), layer, dy, xq, wq, need_dx, need_dw, x_dtype, w_dtype,
                                        stream_handle(dy))
            layer.last_backward_path = path
        dx, dw, db = finish_backward(ctx, layer, dy, dx, dw, (x_dtype, w_dtype, b_dtype), ctx.step)
        return dx, dw, db, None, None
