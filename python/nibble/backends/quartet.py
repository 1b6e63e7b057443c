"""Quartet on CUDA tensors through nibble's own kernels and cuBLASLt (the CUDA build of nibble._C).

The GPU half of nibble.torch.Linear(recipe="quartet"); the same calls as src/recipes/quartet_layer.cu:
  fprop: X, W -> fused Hadamard + QuEST + exact E4M3 row re-encoding (one pass each; the MXFP4 planes
         and trust masks are kept for backward); Y = FP8 GEMM with OUTER_VEC row scales
  dY:    one launch of the backward quantizer writes the row-wise copy dYq (dgrad, inner dim O) and
         the column-wise copy dYq^T (wgrad, inner dim T) from one read (the fused row+column tile);
         a pass whose gradient is not needed gets no copy
  dgrad: Wq^T = backward quantizer of the forward Wq, transposed; dX = epilogue(GEMM(dYq, Wq^T) * 16/9, Mx)
  wgrad: Xq^T from the forward Xq; dW = epilogue(GEMM(dYq^T, Xq^T) * 16/9, Mw)
  forward_quantizer="absmax" (upstream's ablation): the planes hold 3/4 of Xq and Wq (prescale 0.75, all
         mask bits 1), so Y's GEMM is x16/9 and dgrad's and wgrad's are x64/27 (gemm_alphas)
One sign seed per layer per step (nibble.seeds.quartet_backward_seed) serves both rotations, and the
quantizers use the CPU reference's keys, so every quantized operand equals the reference backend's bit
for bit; results differ from it only by the GEMMs' FP32 accumulation (and BF16 rounding of outputs
when the inputs are BF16).

Exactness (docs/spec.md §4): an operand pair runs the row-scaled FP8 GEMM while every row's block exponents
spread over <= 14 binades. Otherwise both are re-encoded per 1x128 group (VEC128), and when even that
is inexact (or K % 128 != 0) both are decoded to BF16 (exact) for a BF16 GEMM. Nothing is flushed
silently: the layer's last_path / last_backward_path say which GEMM ran and why.
Cost of that choice: with gemm_check="sync", one host sync per forward and one per backward (reading the
violation counters before the GEMMs). With gemm_check="deferred" (the default) no host sync: the row
FP8 GEMMs run, the counters are added to the layer's device flags (Linear.record_inexact) and read
back after the pass; a pass that had violations is reported and the layer switches to "sync".
Streams: everything runs on torch's current stream of the tensors' device, and the output tensors
come from torch's caching allocator, so the extension never links libtorch.
"""
import torch

from .._ext import (KERNEL_INPUT_DTYPES, extension, extension_error, extension_lacks, kernel_input, on_device,
                    out_dtype, stream_handle)
from ..seeds import quartet_backward_seed
from ..weight_cache import cached
from .common import finish_backward, finish_forward, gemm_into

QUARTET_RESCALE = 16.0 / 9.0
ABSMAX_PRESCALE = 0.75  # forward_quantizer="absmax": the planes decode to 3/4 of the rotated values


def gemm_alphas(options):
    """(fprop, dgrad/wgrad) GEMM alphas. quest: 1 and 16/9 (the backward quantizer's 3/4 prescale on both
    operands). absmax: its planes hold 3/4 of Xq and Wq, so fprop is x16/9, and Wq^T / Xq^T requantized
    from them are 3/4 smaller once more: x16/9 x4/3 = 64/27 (the reference backend: 4/3 before its epilogue)."""
    if options["forward_quantizer"] == "absmax":
        return 1.0 / (ABSMAX_PRESCALE * ABSMAX_PRESCALE), QUARTET_RESCALE / ABSMAX_PRESCALE
    return 1.0, QUARTET_RESCALE


def unavailable(options):
    """Why Linear(recipe="quartet", **options) cannot run this path here (None when it can)."""
    ext = extension()
    return extension_error() if ext is None else unsupported_reason(ext, options)


def unavailable_for(layer, x):
    """Why this call of Linear(recipe="quartet") cannot run on the kernels (None when it can)."""
    return unavailable(layer.options)


def apply(layer, x):
    """y = x W^T (+ b) for x [tokens, in_features] on a CUDA device (x's dtype kept into the kernels)."""
    return QuartetCudaFunction.apply(x, layer.weight, layer.bias, layer)


def deferred_check(layer, step=None):
    """The layer's sink for violation counters under gemm_check="deferred" (None under "sync")."""
    if layer.options["gemm_check"] != "deferred":
        return None
    step = layer.host_step() if step is None else step
    return lambda counts, passes: layer.record_inexact(counts, passes, step)


def unsupported_reason(ext, options):
    """Why this extension/options pair cannot run the CUDA path (None when it can)."""
    lacks = extension_lacks(ext)
    if lacks:
        return lacks
    if options["rotate"] and options["hadamard_size"] not in (16, 32):
        return (f"hadamard_size {options['hadamard_size']}: the CUDA kernels rotate in 16- or 32-blocks "
                "(sizes 64 and 128 run in the torch emulation)")
    return None


class Planes:
    """One MXFP4 tensor [rows, cols] on the device: codes [rows, cols/2] (two E2M1 per byte), E8M0
    scales [rows, cols/32] and, for forward operands, the packed trust mask [rows*cols/8]."""

    def __init__(self, rows, cols, device, mask=False, tensors=None):
        self.rows, self.cols = rows, cols
        if tensors is not None:
            self.codes, self.scales, self.mask = tensors
            return
        self.codes = torch.empty(rows, cols // 2, dtype=torch.uint8, device=device)
        self.scales = torch.empty(rows, cols // 32, dtype=torch.uint8, device=device)
        self.mask = torch.empty(rows * cols // 8, dtype=torch.uint8, device=device) if mask else None


class Operand:
    """A GEMM operand made from MXFP4 planes: its E4M3 re-encoding (per row or per 1x128 group) or its
    exact BF16 decode, and the violation counts (rows, 1x128 groups; -1 = not counted) that decide."""

    def __init__(self, planes, what, counts):
        self.p, self.what, self.counts = planes, what, counts  # counts: int32[2] device view
        self.e4m3 = self.set_scales = self.bf16 = None
        self.mode = None
        self.rows_violating = self.groups_violating = -1

    def fused_forward(self, ext, x, options, stream):
        p = self.p
        self.e4m3 = torch.empty(p.rows, p.cols, dtype=torch.uint8, device=x.device)
        self.set_scales = torch.empty(p.rows, dtype=torch.float32, device=x.device)
        self.mode = "outer_vec"
        return ext.quartet_forward_e4m3_cuda(x, self.e4m3, self.set_scales, p.codes, p.scales, p.mask,
                                             self.counts[0:1], hadamard_size=options["hadamard_size"],
                                             rotate=options["rotate"], forward_quantizer=options["forward_quantizer"],
                                             stream=stream)

    def reencode(self, ext, granularity, stream):
        p = self.p
        # A fresh tensor every time: the one in hand may be weight_cache's row re-encoding, which stays as it is.
        self.e4m3 = torch.empty(p.rows, p.cols, dtype=torch.uint8, device=p.codes.device)
        self.set_scales = torch.empty(ext.reencode_scale_count(granularity, p.rows, p.cols), dtype=torch.float32,
                                      device=p.codes.device)
        self.mode = "outer_vec" if granularity == "row" else "vec128"
        return ext.reencode_mxfp4_e4m3_cuda(p.codes, p.scales, self.e4m3, self.set_scales, self.counts,
                                            granularity=granularity, stream=stream)

    def decode_bf16(self, ext, stream):
        p = self.p
        self.bf16 = torch.empty(p.rows, p.cols, dtype=torch.bfloat16, device=p.codes.device)
        self.mode = "none"
        return ext.decode_mxfp4_bf16_cuda(p.codes, p.scales, self.bf16, stream=stream)

    def take_counts(self, host):
        self.rows_violating, self.groups_violating = host


def read_counts(counts, operands):
    for op, host in zip(operands, counts.tolist()):  # the one host sync of the pass
        op.take_counts(host)


def gemm_pair(ext, a, b, out, alpha, pass_, stream):
    """out = alpha * A * B^T on the coarsest exact path for this pair; returns a label for last_path.
    a and b hold row re-encodings with counts read (a violating pair is re-encoded or decoded here), or
    with counts left on the device (rows_violating -1: gemm_check="deferred", the row GEMM runs)."""
    why = ""
    if a.rows_violating < 0 and b.rows_violating < 0:
        why = " (rows' exactness counted on the device, read back after the pass: gemm_check='deferred')"
    elif a.rows_violating > 0 or b.rows_violating > 0:
        bad = ", ".join(f"{o.rows_violating} rows of {o.what}" for o in (a, b) if o.rows_violating)
        why = f" ({bad} spread over more than 14 binades)"
        k = a.p.cols
        if k % 128 == 0 and (a.groups_violating < 0 or b.groups_violating < 0):
            # The fused forward counts rows only: count the 1x128 groups with the re-encoding itself.
            for o in (a, b):
                o.reencode(ext, "group128", stream)
            counts = torch.stack([a.counts, b.counts])
            read_counts(counts, (a, b))
        if k % 128 == 0 and a.groups_violating == 0 and b.groups_violating == 0:
            for o in (a, b):
                if o.mode != "vec128":
                    o.reencode(ext, "group128", stream)
            why += ": re-encoded per 1x128 group (VEC128)"
        else:
            for o in (a, b):
                o.decode_bf16(ext, stream)
            why += (": K % 128 != 0" if k % 128 else ": 1x128 groups are not exact either") + \
                "; decoded to BF16 (exact) for a BF16 GEMM"
    if a.mode == "none":
        args = (a.bf16, None, b.bf16, None)
        kw = dict(a_dtype="bf16", b_dtype="bf16", a_scale_mode="none", b_scale_mode="none",
                  operands="emulated-exact (bf16)")
    else:
        args = (a.e4m3, a.set_scales, b.e4m3, b.set_scales)
        kw = dict(a_scale_mode=a.mode, b_scale_mode=b.mode, operands="emulated-exact (fp8)")
    kw.update(alpha=alpha, pass_=pass_, accumulation="split", stream=stream)
    return f"{pass_} GEMM {gemm_into(ext, args, out, kw, a.mode)}{why}"


def settle(counts, operands, passes, deferred):
    """Read the violation counters into the operands (one host sync), or, deferred (a function of
    (counts, passes)), hand them to it and leave the operands' counts unread."""
    if deferred is None:
        read_counts(counts, operands)
    else:
        deferred(counts, passes)


def _fused_weight(ext, w, options, stream):
    """W's fused forward into fresh planes: (planes, E4M3 row re-encoding, its row scales, its violation counts
    int32[2], kernel path); what weight_cache keeps."""
    o, i = w.shape
    wo = Operand(Planes(o, i, w.device, mask=True), "W", torch.full((2,), -1, dtype=torch.int32, device=w.device))
    kernel = wo.fused_forward(ext, w, options, stream)
    return wo.p, wo.e4m3, wo.set_scales, wo.counts, kernel


def forward(ext, x, w, options, stream, deferred=None, layer=None):
    """Y = Xq Wq^T for x [T, I], w [O, I] (float32 or bfloat16, contiguous, on one CUDA device).
    Returns (y, x planes, w planes, path); y is bfloat16 when x is, else float32. deferred: see settle.
    layer: whose weight_cache keeps W's fused forward (w may be a function returning the kernel's input,
    then called only when W is quantized)."""
    (t, i), dev = x.shape, x.device
    xp = Planes(t, i, dev, mask=True)
    counts = torch.full((2, 2), -1, dtype=torch.int32, device=dev)
    xo, wo = Operand(xp, "X", counts[0]), None
    kernel = xo.fused_forward(ext, x, options, stream)
    key = ("quartet", options["hadamard_size"], options["rotate"], options["forward_quantizer"])
    (wp, we4m3, wscales, wcounts, _), hit = cached(
        layer, key, lambda: _fused_weight(ext, w() if callable(w) else w, options, stream))
    counts[1].copy_(wcounts)  # on the device: the pass's counters hold W's as if it had been quantized now
    wo = Operand(wp, "W", counts[1])
    wo.e4m3, wo.set_scales, wo.mode = we4m3, wscales, "outer_vec"
    settle(counts, (xo, wo), ("fprop",), deferred)
    y = torch.empty(t, wp.rows, dtype=out_dtype(x.dtype), device=dev)
    g = gemm_pair(ext, xo, wo, y, gemm_alphas(options)[0], "fprop", stream)
    w_path = "; W cached (weight_cache)" if hit else ""
    return y, xp, wp, f"cuda quartet forward: {kernel}{w_path}; {g}"


def backward(ext, dy, xp, wp, options, seed, dx_dtype, dw_dtype, stream, need_dx=True, need_dw=True,
             deferred=None):
    """dX [T, I] and dW [O, I] (None where not needed) from dy [T, O] and the forward planes; `seed` is
    the layer's backward seed of this step (both rotations)."""
    (t, o), i, dev = dy.shape, xp.cols, dy.device
    kw = dict(seed=seed, stochastic=options["backward_rounding"] == "stochastic",
              hadamard_size=options["hadamard_size"], rotate=options["rotate"], stream=stream)
    dyq = Planes(t, o, dev) if need_dx else None      # row-wise copy, dgrad
    dytq = Planes(o, t, dev) if need_dw else None     # column-wise copy, wgrad
    kernels = [ext.quartet_backward_cuda(dy, *((dyq.codes, dyq.scales) if need_dx else (None, None)),
                                         *((dytq.codes, dytq.scales) if need_dw else (None, None)), **kw)]
    pairs = []  # (pass, A planes, B planes, forward mask, output dtype)
    if need_dx:
        wtq = Planes(i, o, dev)
        ext.quartet_backward_mxfp4_transposed_cuda(wp.codes, wp.scales, wtq.codes, wtq.scales, **kw)
        pairs.append(("dgrad", (dyq, "dY"), (wtq, "Wq^T"), xp.mask, dx_dtype))
    if need_dw:
        xtq = Planes(i, t, dev)
        ext.quartet_backward_mxfp4_transposed_cuda(xp.codes, xp.scales, xtq.codes, xtq.scales, **kw)
        pairs.append(("wgrad", (dytq, "dY^T"), (xtq, "Xq^T"), wp.mask, dw_dtype))
    counts = torch.full((2 * len(pairs), 2), -1, dtype=torch.int32, device=dev)
    ops = [Operand(p, what, counts[j]) for j, (p, what) in enumerate(x for pr in pairs for x in pr[1:3])]
    for op in ops:
        op.reencode(ext, "row", stream)  # also counts the 1x128 groups when cols % 128 == 0
    settle(counts, ops, [pr[0] for pr in pairs], deferred)
    epi = dict(scale=1.0, hadamard_size=options["hadamard_size"], rotate=options["rotate"], stream=stream)
    grads, paths = [], []
    for j, (pass_, _, _, mask, dtype) in enumerate(pairs):
        a, b = ops[2 * j], ops[2 * j + 1]
        g = torch.empty(a.p.rows, b.p.rows, dtype=out_dtype(dtype), device=dev)
        paths.append(gemm_pair(ext, a, b, g, gemm_alphas(options)[1], pass_, stream))
        out = torch.empty_like(g)
        ext.quartet_epilogue_cuda(g, mask, out, **epi)  # 16/9 (absmax: 64/27) is folded into the GEMM's alpha
        grads.append(out)
    dx = grads.pop(0) if need_dx else None
    dw = grads.pop(0) if need_dw else None
    return dx, dw, "cuda quartet backward: " + "; ".join(kernels + paths)


class QuartetCudaFunction(torch.autograd.Function):
    """y = x W^T (+ b) with Quartet's three GEMMs on nibble's CUDA kernels. x: [T, I] on a CUDA device;
    dX comes back in x's dtype, dW in the weight's, dB in the bias's."""

    @staticmethod
    def forward(ctx, x, weight, bias, layer):
        ext = extension()
        with on_device(x):
            y, xp, wp, path = forward(ext, kernel_input(x), lambda: kernel_input(weight), layer.options,
                                      stream_handle(x), deferred_check(layer), layer)
        ctx.save_for_backward(xp.codes, xp.scales, xp.mask, wp.codes, wp.scales, wp.mask)
        ctx.layer, ctx.step, ctx.shapes = layer, layer.host_step(), (x.shape[0], x.shape[1], weight.shape[0])
        ctx.dtypes = (x.dtype, weight.dtype, None if bias is None else bias.dtype)
        return finish_forward(layer, x, weight, bias, y, path, keep_dtype=x.dtype in KERNEL_INPUT_DTYPES)

    @staticmethod
    def backward(ctx, dy):
        layer, step = ctx.layer, ctx.step
        (t, i, o), (x_dtype, w_dtype, b_dtype) = ctx.shapes, ctx.dtypes
        xc, xs, xm, wc, ws, wm = ctx.saved_tensors
        xp, wp = Planes(t, i, None, tensors=(xc, xs, xm)), Planes(o, i, None, tensors=(wc, ws, wm))
        need_dx, need_dw = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        dyk = kernel_input(dy)
        dx = dw = None
        if need_dx or need_dw:
            with on_device(dy):
                seed = quartet_backward_seed(layer.seed, step)
                dx, dw, path = backward(extension(), dyk, xp, wp, layer.options, seed, x_dtype, w_dtype,
                                        stream_handle(dy), need_dx, need_dw, deferred_check(layer, step))
            layer.last_backward_path = path
        dx, dw, db = finish_backward(ctx, layer, dy, dx, dw, (x_dtype, w_dtype, b_dtype), step)
        return dx, dw, db, None
