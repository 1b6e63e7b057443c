"""mxfp8 and nvfp4 on CUDA tensors through nibble's own quantizers, an exact BF16 decode and cuBLASLt's BF16
GEMM (the CUDA build of nibble._C: src/bindings/bind_cuda_mx_nv.cpp, and gemm_cuda of bind_cuda.cpp).

docs/spec.md §4: Hopper has no MXFP8 / NVFP4 GEMM and no exact FP8 re-encoding of either, so every operand is
quantized by nibble's kernel, decoded exactly to BF16 and multiplied by a BF16 GEMM with FP32 accumulation
(path "emulated-exact (bf16)"), as src/recipes/tensor_quantizer_fp8.cu (Mxfp8Emulated) and
tensor_quantizer_fp4.cu (Nvfp4Emulated) do. The quantized operands are the reference backend's
(nibble.torch._RecipeLinearFunction) bit for bit:
  fprop: X and W are each quantized once, into the row-wise copy and, when a gradient will need it, the
         column-wise copy (X^T for wgrad, W^T for dgrad) blocked along the transposed tensor's inner
         dimension (the reference's requantization of X^T and W^T); Y = GEMM(X, W)
  dgrad: dX = GEMM(dY, W^T);  wgrad: dW = GEMM(dY^T, X^T)
Recipes (docs/spec.md §2):
  mxfp8  E4M3 in 1x32 blocks, E8M0 scales by the layer's mx_scale_rule, round to nearest in every role.
         The kernel reads BF16, so FP32 (and other) tensors are rounded to BF16 first, named in last_path;
         on BF16 values the operands are the reference's bit for bit. Its tiles need rows % 32 == 0: a
         row-wise copy alone (inference, or dX without dW) pads the tokens with zero rows, which changes no
         other row's blocks, and the padding is dropped from the decoded operand.
  nvfp4  E2M1 in 1x16 blocks (16x16 for W), UE4M3 block scales, an FP32 global decode scale per copy; the
         16-point fixed-sign random Hadamard on the wgrad operands X^T and dY^T; stochastic rounding of
         dY with the reference's seeds: mix(seed, step, 1) for the row-wise dY (dgrad) and
         mix(seed, step, 2) for dY^T (wgrad), both copies from one launch (the kernel's colwise_seed).
         The kernels read FP32 and BF16 directly. The decode leaves the global scales out
         (they are not exact in BF16); the GEMM writes FP32 and the output is multiplied by s_A * s_B on
         the device (no host read of the scales).
Results differ from the reference backend only by the GEMMs' FP32 accumulation order, the place of the
global-scale products (nvfp4) and the BF16 rounding of outputs for BF16 inputs.
Host syncs: none in steady state (nvfp4's seeds come from the layer's host copies of its step counter and
seed, Linear.host_step and Linear.seed). Streams and allocation as in nibble.backends.quartet.
"""
import torch

from .._ext import (bf16_input, extension, extension_error, extension_lacks, kernel_input, on_device, out_dtype,
                    stream_handle)
from ..seeds import mix
from ..weight_cache import cached, derived
from .common import finish_backward, finish_forward, gemm_into, require_whole_token_blocks

RECIPES = ("mxfp8", "nvfp4")
BLOCK = {"mxfp8": 32, "nvfp4": 16}  # along every GEMM's inner dimension (and the wgrad's: tokens)
NVFP4_BLOCK_ROWS = {"x": 1, "w": 16, "dy": 1}
NVFP4_COLWISE_RHT = {"x": True, "w": False, "dy": True}  # the wgrad operands X^T and dY^T only


def unsupported_reason(ext):
    """Why the mxfp8 / nvfp4 CUDA path cannot run with this extension (None when it can)."""
    return extension_lacks(ext, "quantize_nvfp4_cuda", "MXFP8 / NVFP4", "bind_cuda_mx_nv.cpp")


def unavailable_for(layer, x):
    """Why Linear(recipe="mxfp8" | "nvfp4") cannot run this call on the kernels (None when it can). The features
    are multiples of the recipe's block for every such layer; tokens are checked where a gradient needs them."""
    ext = extension()
    return extension_error() if ext is None else unsupported_reason(ext)


def apply(layer, x):
    """y = x W^T (+ b) for x [tokens, in_features] on a CUDA device."""
    return DecodedCudaFunction.apply(x, layer.weight, layer.bias, layer, torch.is_grad_enabled())


class Copy:
    """One quantized copy [rows, cols] on the device. mxfp8: E4M3 codes [rows, cols], E8M0 scales [rows, cols/32];
    nvfp4: E2M1 codes [rows, cols/2], UE4M3 scales [rows/block_rows, cols/16], FP32 global decode scale [1].
    valid_rows < rows when the tokens were padded (only the first valid_rows are the tensor's)."""

    def __init__(self, recipe, rows, cols, device, block_rows=1, valid_rows=None, tensors=None):
        self.recipe, self.rows, self.cols, self.block_rows = recipe, rows, cols, block_rows
        self.valid_rows = rows if valid_rows is None else valid_rows
        if tensors is not None:
            self.codes, self.scales, self.global_scale = tensors
            return
        u8 = dict(dtype=torch.uint8, device=device)
        if recipe == "mxfp8":
            self.codes, self.scales, self.global_scale = (torch.empty(rows, cols, **u8),
                                                          torch.empty(rows, cols // 32, **u8), None)
        else:
            self.codes = torch.empty(rows, cols // 2, **u8)
            self.scales = torch.empty(rows // block_rows, cols // 16, **u8)
            self.global_scale = torch.empty(1, dtype=torch.float32, device=device)

    def planes(self):
        return (self.codes, self.scales) + (() if self.recipe == "mxfp8" else (self.global_scale,))

    def decode(self, ext, stream):
        """The exact BF16 operand [valid_rows, cols] (nvfp4: without the global scale)."""
        out = torch.empty(self.rows, self.cols, dtype=torch.bfloat16, device=self.codes.device)
        if self.recipe == "mxfp8":
            ext.decode_mxfp8_bf16_cuda(self.codes, self.scales, out, stream=stream)
        else:
            ext.decode_nvfp4_bf16_cuda(self.codes, self.scales, out, block_rows=self.block_rows, stream=stream)
        return out[:self.valid_rows]  # a row prefix: still contiguous and aligned


def _none(copy, n):
    return copy.planes() if copy is not None else (None,) * n


def _saved(copy):
    return (None,) * 3 if copy is None else (copy.codes, copy.scales, copy.global_scale)


def quantize_mxfp8(ext, x, rowwise, colwise, rule, stream):
    """x [rows, cols] (BF16, on the device) -> (row-wise Copy or None, column-wise Copy of x^T or None, path)."""
    (rows, cols), dev = x.shape, x.device
    pad, note = (-rows) % BLOCK["mxfp8"], ""
    if pad:
        assert not colwise, "a column-wise copy needs whole 32-row blocks (checked before)"
        x = torch.cat([x, x.new_zeros(pad, cols)])
        note = f" ({rows} rows padded to {rows + pad} for the kernel's 32-row tiles)"
    row = Copy("mxfp8", rows + pad, cols, dev, valid_rows=rows) if rowwise else None
    col = Copy("mxfp8", cols, rows, dev) if colwise else None
    kernel = ext.quantize_mxfp8_cuda(x, *_none(row, 2), *_none(col, 2), scale_rule=rule, stream=stream)
    return row, col, kernel + note


def quantize_nvfp4(ext, x, role, rowwise, colwise, stream, seed=0, colwise_seed=None):
    """x [rows, cols] (FP32 or BF16, on the device) under nvfp4's rules for `role` -> (row-wise Copy or None,
    column-wise Copy of x^T or None, path). dY rounds stochastically with key (seed, nvfp4's stream); the
    column-wise copy with colwise_seed when given (one launch for dY and dY^T with their own seeds)."""
    (rows, cols), dev, br = x.shape, x.device, NVFP4_BLOCK_ROWS[role]
    row = Copy("nvfp4", rows, cols, dev, br) if rowwise else None
    col = Copy("nvfp4", cols, rows, dev, br) if colwise else None
    kw = {} if colwise_seed is None else dict(colwise_seed=colwise_seed)
    kernel = ext.quantize_nvfp4_cuda(x, *_none(row, 3), *_none(col, 3), block_rows=br, stochastic=role == "dy",
                                     seed=seed, rowwise_rht=False, colwise_rht=NVFP4_COLWISE_RHT[role], stream=stream,
                                     **kw)
    return row, col, kernel


def gemm(ext, a, b, like_dtype, pass_, stream, weight_of=None):
    """A B^T from two copies, decoded to BF16 here. Returns (output, label for last_path); nvfp4's output is FP32
    and carries the global scales s_A s_B. weight_of: the layer whose weight B is a copy of (fprop's W, dgrad's
    W^T): its weight_cache keeps B's decode."""
    da = a.decode(ext, stream)
    db, hit = derived(weight_of, f"{pass_} decode", b.codes, lambda: b.decode(ext, stream))
    nv = a.recipe == "nvfp4"
    out = torch.empty(da.shape[0], db.shape[0], dtype=torch.float32 if nv else out_dtype(like_dtype), device=da.device)
    kw = dict(a_dtype="bf16", b_dtype="bf16", a_scale_mode="none", b_scale_mode="none", alpha=1.0, pass_=pass_,
              accumulation="split", operands="emulated-exact (bf16)", stream=stream)
    label = f"{pass_} GEMM " + gemm_into(ext, (da, None, db, None), out, kw, "none")
    if hit:
        label += " (B's decode cached: weight_cache)"
    if nv:
        out.mul_(a.global_scale * b.global_scale)  # FP32 product of the two global decode scales, on the device
        label += " x s_A s_B (FP32 global scales)"
    return out, label


def _input(layer, t, name, notes):
    return bf16_input(t, name, notes) if layer.recipe == "mxfp8" else kernel_input(t)


def _conversions(notes):
    return f" ({', '.join(notes)}: the MXFP8 kernel reads BF16)" if notes else ""


def forward(ext, layer, x, w, need_xt, need_wt, stream):
    """Y = Q(X) Q(W)^T for x [T, I], w [O, I] on one CUDA device. need_xt / need_wt: also make the column-wise
    copies X^T (for wgrad) / W^T (for dgrad). Returns (y, X^T Copy or None, W^T Copy or None, path); y is BF16
    when x is (mxfp8), else FP32."""
    notes = []
    xk = _input(layer, x, "X", notes)
    if layer.recipe == "mxfp8":
        rule = layer.options["mx_scale_rule"]
        xr, xt, kx = quantize_mxfp8(ext, xk, True, need_xt, rule, stream)
        (wr, wt, kw), hit = cached(layer, ("mxfp8", need_wt, rule), lambda: quantize_mxfp8(
            ext, _input(layer, w, "W", notes), True, need_wt, rule, stream))
    else:
        xr, xt, kx = quantize_nvfp4(ext, xk, "x", True, need_xt, stream)
        (wr, wt, kw), hit = cached(layer, ("nvfp4", need_wt), lambda: quantize_nvfp4(
            ext, _input(layer, w, "W", notes), "w", True, need_wt, stream))
    kw = "cached (weight_cache)" if hit else kw
    y, g = gemm(ext, xr, wr, x.dtype, "fprop", stream, weight_of=layer)
    return y, xt, wt, f"cuda {layer.recipe} forward{_conversions(notes)}: X {kx}; W {kw}; {g}"


def backward(ext, layer, dy, xt, wt, seeds, dx_dtype, dw_dtype, stream, need_dx=True, need_dw=True):
    """dX [T, I] and dW [O, I] (None where not needed) from dy [T, O] and the forward's column-wise copies.
    seeds: nvfp4's (dgrad, wgrad) stochastic-rounding seeds of this step (the reference backend's)."""
    notes = []
    if layer.recipe == "mxfp8":
        dyk = bf16_input(dy, "dY", notes)
        dyr, dyt, k = quantize_mxfp8(ext, dyk, need_dx, need_dw, layer.options["mx_scale_rule"], stream)
        kernels = [f"dY {k}"]
    else:
        # One launch for both copies; the reference rounds dY and dY^T with their own seeds (dgrad's, wgrad's).
        dyr, dyt, k = quantize_nvfp4(ext, kernel_input(dy), "dy", need_dx, need_dw, stream, seeds[0],
                                     colwise_seed=seeds[1])
        which = "dY and dY^T (RHT), one launch" if need_dx and need_dw else "dY" if need_dx else "dY^T (RHT)"
        kernels = [f"{which}: {k}"]
    dx = dw = None
    if need_dx:
        dx, g = gemm(ext, dyr, wt, dx_dtype, "dgrad", stream, weight_of=layer)
        kernels.append(g)
    if need_dw:
        dw, g = gemm(ext, dyt, xt, dw_dtype, "wgrad", stream)
        kernels.append(g)
    return dx, dw, f"cuda {layer.recipe} backward{_conversions(notes)}: " + "; ".join(kernels)


def _seeds(layer):
    """nvfp4's (dgrad, wgrad) stochastic-rounding seeds for this forward's step, the reference backend's:
    mix(seed, step, 1) and mix(seed, step, 2), from the layer's host copies (no host sync in steady state)."""
    step, seed = layer.host_step(), layer.seed
    return mix(seed, step, 1), mix(seed, step, 2)


class DecodedCudaFunction(torch.autograd.Function):
    """y = x W^T (+ b) with mxfp8's / nvfp4's three GEMMs as nibble's quantizers, exact BF16 decodes and BF16
    GEMMs. x: [T, I] on a CUDA device; y and dX come back in x's dtype, dW in the weight's, dB in the bias's.
    grad_enabled: the caller's torch.is_grad_enabled() (inside forward it is always off), so no-grad passes
    skip the column-wise copies."""

    @staticmethod
    def forward(ctx, x, weight, bias, layer, grad_enabled):
        ext = extension()
        need_dx, need_dw = grad_enabled and ctx.needs_input_grad[0], grad_enabled and ctx.needs_input_grad[1]
        if need_dw:
            require_whole_token_blocks(layer, x.shape[0], BLOCK[layer.recipe])
        with on_device(x):
            y, xt, wt, path = forward(ext, layer, x, weight, need_dw, need_dx, stream_handle(x))
        ctx.save_for_backward(*_saved(xt), *_saved(wt))
        ctx.layer, ctx.step = layer, layer.host_step()
        ctx.seeds = _seeds(layer) if layer.recipe == "nvfp4" and (need_dx or need_dw) else None
        ctx.shapes = (x.shape[0], x.shape[1], weight.shape[0])
        ctx.dtypes = (x.dtype, weight.dtype, None if bias is None else bias.dtype)
        return finish_forward(layer, x, weight, bias, y, path)

    @staticmethod
    def backward(ctx, dy):
        layer, (t, i, o), (x_dtype, w_dtype, b_dtype) = ctx.layer, ctx.shapes, ctx.dtypes
        saved = ctx.saved_tensors
        br = NVFP4_BLOCK_ROWS
        xt = None if saved[0] is None else Copy(layer.recipe, i, t, None, br["x"], tensors=saved[0:3])
        wt = None if saved[3] is None else Copy(layer.recipe, i, o, None, br["w"], tensors=saved[3:6])
        need_dx, need_dw = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        if (need_dx and wt is None) or (need_dw and xt is None):  # forward makes them whenever grad is on
            raise RuntimeError("nibble.backends.decoded: a gradient is needed whose column-wise copy forward did "
                               "not make")
        dx = dw = None
        if need_dx or need_dw:
            with on_device(dy):
                dx, dw, path = backward(extension(), layer, dy, xt, wt, ctx.seeds, x_dtype, w_dtype, stream_handle(dy),
                                        need_dx, need_dw)
            layer.last_backward_path = path
        dx, dw, db = finish_backward(ctx, layer, dy, dx, dw, (x_dtype, w_dtype, b_dtype), ctx.step)
        return dx, dw, db, None, None
