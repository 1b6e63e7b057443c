"""A stand-in for the CUDA entry points of nibble._C, built on the CPU reference, so the Python side of
the CUDA backends (nibble.backends.quartet: which planes feed which GEMM, seeds, masks, violation counts,
the re-encode / decode fallbacks; nibble.backends.mxfp4: which MXFP4 copies feed which GEMM, the same
fallbacks; nibble.backends.decoded: which mxfp8 / nvfp4 copies, seeds, Hadamard flags and global scales feed
which BF16 GEMM; nibble.backends.fp8: which copies, formats, scales and amax histories feed which GEMM) is tested
on machines without a GPU.

It is NOT a model of the kernels' bits: a plane's or an FP8 copy's values live in a side table keyed by
its codes tensor (the uint8 bytes themselves stay unwritten), GEMMs run in float64. What is real: the
trust mask is packed (so passing the wrong mask to an epilogue shows); FP8 copies hold their unscaled
codes while the scales (per-tensor s_enc / s_dec / amax, fp8-block scales in cuBLASLt's VEC128 and
BLK128x128 layouts) and the amax history are written into the caller's tensors, and the GEMM multiplies
the scales it is given back in, so a wrong scale, layout, format or copy changes the result. The
MXFP4 planes (quartet, mxfp4) hold the reference's quantized values (mxfp4's column-wise copy: those of
x^T); their block exponents come from each 32-group's amax (exact enough for the test inputs, whose
spreads are far from the 14-binade limit). The mxfp8 / nvfp4 planes hold the reference's values of the
copy (nvfp4: without the global scale, which goes into the caller's float, so the layer must multiply
it back in); their decodes write those values as BF16.
"""
import numpy as np
import torch

from nibble.backends import emulate
from nibble.backends.reference import amax_for_scale


QUARTET_RESCALE = 16.0 / 9.0
MX_SEED = 0x6E6962626C65  # the CPU reference's default seed (QuantOptions), as the binding's


def _np(t):
    return t.detach().to(torch.float32).contiguous().numpy()


def pack_mask(m):
    return torch.from_numpy(np.packbits(np.asarray(m, dtype=np.uint8).reshape(-1), bitorder="little"))


def unpack_mask(packed, rows, cols):
    return np.unpackbits(packed.numpy(), bitorder="little")[: rows * cols].reshape(rows, cols)


def _exponents(v):
    """floor(log2 amax) per 32-group, NaN where the group is all zero."""
    g = v.reshape(v.shape[0], -1, 32).abs().amax(dim=2).double()
    return torch.where(g > 0, torch.floor(torch.log2(torch.where(g > 0, g, torch.ones_like(g)))),
                       torch.full_like(g, float("nan")))


def _violations(v, sets_of):
    """Number of sets (rows, or 1x128 groups when sets_of = 4 groups) whose exponents spread over > 14."""
    k = _exponents(v)
    k = k.reshape(-1, sets_of) if sets_of else k
    hi = torch.where(torch.isnan(k), torch.full_like(k, -1e9), k).amax(dim=1)
    lo = torch.where(torch.isnan(k), torch.full_like(k, 1e9), k).amin(dim=1)
    return int(((hi - lo) > 14).sum())


FP8_MAX = {"e4m3": 448.0, "e5m2": 57344.0}
FP8_ROLE = {"e4m3": "x", "e5m2": "dy"}  # the reference's hybrid rule picks the format by role
BLOCK_MODES = ("vec128", "blk128x128")


def same(a, b):
    """Equal element by element, NaN matching NaN."""
    return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())


def scale_index(mode, rows, k):
    """[rows, k] index into the FP32 scale buffer of a GEMM operand [rows, k] (include/nibble/kernels/scale_layout.hpp)."""
    r = torch.arange(rows).reshape(rows, 1)
    kk = torch.arange(k).reshape(1, k)
    if mode == "per_tensor":
        return torch.zeros(rows, k, dtype=torch.long)
    if mode == "vec128":
        return (kk // 128) * ((rows + 3) // 4 * 4) + r
    assert mode == "blk128x128", mode
    return (r // 128) * (((k + 127) // 128 + 3) // 4 * 4) + kk // 128


def scale_count(mode, rows, k):
    return {"per_tensor": 1, "vec128": (k + 127) // 128 * ((rows + 3) // 4 * 4),
            "blk128x128": (rows + 127) // 128 * (((k + 127) // 128 + 3) // 4 * 4)}[mode]


class FakeCudaExt:
    has_cuda = True

    def __init__(self, ext):
        self.ref = ext  # the real extension (its CPU reference)
        self.values = {}  # data_ptr of a codes / e4m3 / bf16 tensor -> float32 values it stands for
        self.fp8 = {}  # data_ptr of an FP8 copy -> (its unscaled codes as float32, format)
        self.calls = []
        self.gemms = []  # keyword arguments of every gemm_cuda call
        self.refuse_fp32_output = False  # act like a cuBLASLt without FP32-output FP8 algorithms

    def _put(self, t, v):
        self.fp8.pop(t.data_ptr(), None)  # torch reuses freed addresses: one side table per address
        self.values[t.data_ptr()] = v

    def _put_fp8(self, t, codes, fmt):
        self.values.pop(t.data_ptr(), None)
        self.fp8[t.data_ptr()] = (codes, fmt)

    def _get(self, t, what):
        assert t.data_ptr() in self.values, f"{what} read before any kernel wrote it"
        return self.values[t.data_ptr()]

    def _quartet_forward(self, x, codes, scales, mask, hadamard_size, rotate, forward_quantizer):
        d = self.ref.quantize(_np(x), "quartet", "x", hadamard_size=hadamard_size, rotate=rotate,
                              forward_quantizer=forward_quantizer)
        v = torch.from_numpy(np.array(d["values"]))
        self._put(codes, v)
        if mask is not None:
            mask.copy_(pack_mask(np.array(d["mask"])))
        return v

    def quartet_forward_e4m3_cuda(self, x, e4m3, row_scales, codes, scales, mask, violating_rows, *, hadamard_size,
                                  rotate, forward_quantizer, stream):
        self.calls.append("forward_e4m3")
        v = self._quartet_forward(x, codes, scales, mask, hadamard_size, rotate, forward_quantizer)
        self._put(e4m3, v)
        violating_rows[0] = _violations(v, None)
        return "fake fused forward"

    def reencode_scale_count(self, granularity, rows, cols):
        return rows if granularity == "row" else (cols // 128) * ((rows + 3) // 4 * 4)

    def reencode_mxfp4_e4m3_cuda(self, codes, scales, e4m3, set_scales, violations, *, granularity, stream):
        self.calls.append("reencode " + granularity)
        assert set_scales.numel() == self.reencode_scale_count(granularity, codes.shape[0], 2 * codes.shape[1])
        v = self._get(codes, "reencode input")
        self._put(e4m3, v)
        cols = v.shape[1]
        rows_bad = _violations(v, None) if granularity == "row" else -1
        groups_bad = _violations(v, 4) if cols % 128 == 0 else -1
        violations.copy_(torch.tensor([rows_bad, groups_bad], dtype=torch.int32))
        return "fake reencode " + granularity

    def decode_mxfp4_bf16_cuda(self, codes, scales, out, *, stream):
        self.calls.append("decode bf16")
        v = self._get(codes, "decode input")
        assert torch.equal(v.bfloat16().float(), v), "MXFP4 values are exact in BF16"
        out.copy_(v.bfloat16())
        return "fake decode"

    def _backward_values(self, x, seed, stochastic, hadamard_size, rotate):
        d = self.ref.quantize(_np(x), "quartet", "dy", seed=seed, hadamard_size=hadamard_size, rotate=rotate,
                              rounding="stochastic" if stochastic else "nearest")
        return torch.from_numpy(np.array(d["values"]))

    def quartet_backward_cuda(self, x, rowwise_codes, rowwise_scales, colwise_codes, colwise_scales, *, seed,
                              stochastic, hadamard_size, rotate, stream):
        self.calls.append("backward dense " + "+".join(n for n, c in (("row", rowwise_codes), ("col", colwise_codes))
                                                 if c is not None))
        if rowwise_codes is not None:
            assert tuple(rowwise_codes.shape) == (x.shape[0], x.shape[1] // 2)
            self._put(rowwise_codes, self._backward_values(x, seed, stochastic, hadamard_size, rotate))
        if colwise_codes is not None:
            assert tuple(colwise_codes.shape) == (x.shape[1], x.shape[0] // 2)
            self._put(colwise_codes, self._backward_values(x.t(), seed, stochastic, hadamard_size, rotate))
        return "fake backward"

    def quartet_backward_mxfp4_transposed_cuda(self, codes, scales, colwise_codes, colwise_scales, *, seed, stochastic,
                                               hadamard_size, rotate, stream):
        self.calls.append("backward transposed")
        v = self._get(codes, "forward planes")
        assert tuple(colwise_codes.shape) == (v.shape[1], v.shape[0] // 2)
        self._put(colwise_codes, self._backward_values(v.t(), seed, stochastic, hadamard_size, rotate))
        return "fake backward transposed"

    def quartet_epilogue_cuda(self, g, mask, out, *, scale, hadamard_size, rotate, stream):
        self.calls.append("epilogue")
        rows, cols = g.shape
        m = unpack_mask(mask, rows, cols)
        # The reference epilogue multiplies by 16/9 itself; the CUDA path folds it into the GEMM's alpha.
        r = np.array(self.ref.quartet_epilogue(_np(g) * (scale / QUARTET_RESCALE), m, hadamard_size)) if rotate \
            else _np(g) * scale * m
        out.copy_(torch.from_numpy(r).to(out.dtype))
        return "fake epilogue"

    # ---- mxfp4 (bind_cuda_fp4.cpp) --------------------------------------------------------------------

    def _mx_values(self, x, scale_rule, stochastic, seed):
        assert x.dtype in (torch.float32, torch.bfloat16), "the MXFP4 kernels read float32 or bfloat16"
        d = self.ref.quantize(_np(x), "mxfp4", "x", seed=seed, rounding="stochastic" if stochastic else "nearest",
                              mx_scale_rule=scale_rule)
        return torch.from_numpy(np.array(d["values"]))

    def _mx_copy(self, x, codes, scales, scale_rule, stochastic, seed):
        rows, cols = x.shape
        assert tuple(codes.shape) == (rows, cols // 2) and tuple(scales.shape) == (rows, cols // 32)
        self._put(codes, self._mx_values(x, scale_rule, stochastic, seed))

    def quantize_mxfp4_cuda(self, x, codes, scales, *, scale_rule="ocp", stochastic=False, seed=MX_SEED, stream=0):
        self.calls.append(f"mxfp4 {scale_rule} row")
        self._mx_copy(x, codes, scales, scale_rule, stochastic, seed)
        return "fake mxfp4 thread per group"

    def quantize_mxfp4_rowcol_cuda(self, x, rowwise_codes=None, rowwise_scales=None, colwise_codes=None,
                                   colwise_scales=None, *, scale_rule="ocp", stochastic=False, seed=MX_SEED, stream=0):
        done = [n for n, c in (("row", rowwise_codes), ("col", colwise_codes)) if c is not None]
        assert done and x.shape[0] % 32 == 0, "the row+column tile needs a copy and rows % 32 == 0"
        self.calls.append(f"mxfp4 {scale_rule} " + "+".join(done))
        if rowwise_codes is not None:
            self._mx_copy(x, rowwise_codes, rowwise_scales, scale_rule, stochastic, seed)
        if colwise_codes is not None:  # quantize_mxfp4(x^T), as the kernel's colwise copy is
            self._mx_copy(x.t().contiguous(), colwise_codes, colwise_scales, scale_rule, stochastic, seed)
        return "fake mxfp4 row+col tile"

    # ---- mxfp8 and nvfp4 (bind_cuda_mx_nv.cpp) ---------------------------------------------------------

    def quantize_mxfp8_cuda(self, x, rowwise_codes=None, rowwise_scales=None, colwise_codes=None,
                            colwise_scales=None, *, scale_rule="default", stochastic=False, seed=MX_SEED, stream=0):
        assert x.dtype == torch.bfloat16, "the MXFP8 kernel reads BF16"
        assert x.shape[0] % 32 == 0 and x.shape[1] % 32 == 0, "the MXFP8 kernel's tiles need rows, cols % 32 == 0"
        done = [n for n, c in (("row", rowwise_codes), ("col", colwise_codes)) if c is not None]
        assert done, "ask for a copy"
        self.calls.append(f"mxfp8 {scale_rule} " + "+".join(done))
        rounding = "stochastic" if stochastic else "nearest"
        for codes, scales, src in ((rowwise_codes, rowwise_scales, x), (colwise_codes, colwise_scales, x.t())):
            if codes is None:
                continue
            src = src.contiguous()
            assert tuple(codes.shape) == tuple(src.shape) and tuple(scales.shape) == (src.shape[0], src.shape[1] // 32)
            d = self.ref.quantize(_np(src), "mxfp8", "x", seed=seed, rounding=rounding, mx_scale_rule=scale_rule)
            self._put(codes, torch.from_numpy(np.array(d["values"])))  # code * 2^k, exact in float32
        return "fake mxfp8 row+col tile"

    def decode_mxfp8_bf16_cuda(self, codes, scales, out, *, transpose_out=False, stream=0):
        self.calls.append("decode mxfp8")
        v = self._get(codes, "mxfp8 decode input")
        v = v.t() if transpose_out else v
        assert same(v.bfloat16().float(), v), "MXFP8 values of the test inputs are exact in BF16"
        out.copy_(v.bfloat16())
        return "fake decode mxfp8"

    def quantize_nvfp4_cuda(self, x, rowwise_codes=None, rowwise_scales=None, rowwise_global_scale=None,
                            colwise_codes=None, colwise_scales=None, colwise_global_scale=None, *, block_rows=1,
                            stochastic=False, seed=MX_SEED, colwise_seed=None, rowwise_rht=False, colwise_rht=True,
                            stream=0):
        """Each copy: the reference's quantization of x (or x^T) with these options; the planes hold its values
        WITHOUT the global scale (code * block scale, as the decode writes them), the global scale its own."""
        assert x.dtype in (torch.float32, torch.bfloat16), "the NVFP4 kernels read float32 or bfloat16"
        done = [n for n, c in (("row", rowwise_codes), ("col", colwise_codes)) if c is not None]
        assert done, "ask for a copy"
        rht = [f" rht-{n}" for n, c, r in (("row", rowwise_codes, rowwise_rht), ("col", colwise_codes, colwise_rht))
               if c is not None and r]
        col_seed = seed if colwise_seed is None else colwise_seed
        sr = (f" sr {seed}" + (f"/{col_seed}" if col_seed != seed else "")) if stochastic else ""
        self.calls.append(f"nvfp4 {block_rows}x16 " + "+".join(done) + sr + "".join(rht))
        copies = ((rowwise_codes, rowwise_scales, rowwise_global_scale, x, rowwise_rht, seed),
                  (colwise_codes, colwise_scales, colwise_global_scale, x.t(), colwise_rht, col_seed))
        for codes, scales, glob, src, rht, seed in copies:
            if codes is None:
                continue
            src = src.contiguous()
            r, c = src.shape
            assert tuple(codes.shape) == (r, c // 2) and tuple(scales.shape) == (r // block_rows, c // 16)
            assert glob.dtype == torch.float32 and glob.numel() == 1
            d = self.ref.quantize(_np(src), "nvfp4", "w" if block_rows == 16 else "x", seed=seed,
                                  rounding="stochastic" if stochastic else "nearest", nvfp4_rht=rht)
            values, s = torch.from_numpy(np.array(d["values"])), torch.tensor(d["tensor_scale"], dtype=torch.float32)
            unscaled = (values.double() / float(s)).to(torch.bfloat16).float()  # code * UE4M3: 6 significant bits
            assert same(unscaled * s, values), "unscaled NVFP4 values not recovered"
            self._put(codes, unscaled)
            glob.fill_(float(s))
        return "fake nvfp4 amax pass + tile"

    def decode_nvfp4_bf16_cuda(self, codes, scales, out, *, block_rows=1, stream=0):
        self.calls.append("decode nvfp4")
        v = self._get(codes, "nvfp4 decode input")
        assert tuple(scales.shape) == (v.shape[0] // block_rows, v.shape[1] // 16), "block_rows of another copy"
        out.copy_(v.bfloat16())  # exact (checked when stored)
        return "fake decode nvfp4"

    # ---- FP8 recipes (bind_cuda_fp8.cpp) -------------------------------------------------------------

    def _copies(self, codes, fmt, rowwise, colwise):
        if rowwise is not None:
            assert tuple(rowwise.shape) == tuple(codes.shape) and rowwise.dtype == torch.uint8
            self._put_fp8(rowwise, codes, fmt)
        if colwise is not None:
            assert tuple(colwise.shape) == tuple(codes.shape[::-1]) and colwise.dtype == torch.uint8
            self._put_fp8(colwise, codes.t().contiguous(), fmt)
        return "+".join(n for n, c in (("row", rowwise), ("col", colwise)) if c is not None)

    def _per_tensor(self, x, recipe, fmt, rowwise, colwise, **kw):
        """The reference's quantization of x; its unscaled codes into the copies. Returns the reference dict."""
        assert x.dtype == torch.bfloat16, "the FP8 kernels read BF16"
        d = self.ref.quantize(_np(x), recipe, FP8_ROLE[fmt], **kw)
        values, s_dec = torch.from_numpy(np.array(d["values"])), torch.tensor(d["tensor_scale"], dtype=torch.float32)
        codes = emulate.round_minifloat((values.double() / float(s_dec)).float(), fmt)
        assert same(codes * s_dec, values), "unscaled codes not recovered"
        self.calls[-1] += " " + self._copies(codes, fmt, rowwise, colwise)
        return d

    def amax_bf16_cuda(self, x, amax, *, stream):
        self.calls.append("amax")
        amax[0] = self.ref.quantize(_np(x), "fp8-current", "x")["amax"]
        return "fake amax"

    def quantize_fp8_current_cuda(self, x, rowwise, colwise, amax, scale, scale_inv, *, format, single_launch=False,
                                  stream=0):
        self.calls.append(f"fp8-current {format}")
        d = self._per_tensor(x, "fp8-current", format, rowwise, colwise)
        amax[0] = d["amax"]
        scale[0] = emulate.per_tensor_encode_scale(FP8_MAX[format], d["amax"])
        scale_inv[0] = d["tensor_scale"]
        return "fake fp8-current two launches"

    def update_fp8_delayed_scale_cuda(self, amax_history, scale, scale_inv, *, step, format, margin=0, stream=0):
        # The kernel's rule (quant::AmaxHistory): a history max that is 0 or non-finite (NaN above inf) keeps
        # the previous scale pair.
        self.calls.append(f"update window {amax_history.numel()}")
        m = amax_history.abs().max()
        if bool(torch.isfinite(m)) and float(m) > 0:
            scale[0] = s = emulate.per_tensor_encode_scale(FP8_MAX[format], m, margin)
            scale_inv[0] = 1.0 / s
        amax_history[(step + 1) % amax_history.numel()] = 0.0
        return "fake update"

    def _cast_with(self, x, scale, scale_inv, rowwise, colwise, fmt):
        # The reference quantizes with exactly the device's s_enc (a one-slot history that gives it).
        s = float(scale[0])
        hist = np.array([amax_for_scale(FP8_MAX[fmt], s)], dtype=np.float32)
        d = self._per_tensor(x, "fp8-delayed", fmt, rowwise, colwise, amax_history=hist, window=1)
        if scale_inv is not None:  # s_dec is the decode of the s_enc the cast used
            assert float(scale_inv[0]) == float(d["tensor_scale"]), (float(scale_inv[0]), d["tensor_scale"])
        return d

    def quantize_fp8_delayed_cuda(self, x, amax_history, scale, scale_inv, rowwise=None, colwise=None, *, step, format,
                                  stream=0):
        self.calls.append(f"fp8-delayed {format}")
        d = self._cast_with(x, scale, scale_inv, rowwise, colwise, format)
        slot = step % amax_history.numel()
        # The kernel's atomic max (NaN above inf, so a non-finite amax stays in its slot).
        amax_history[slot] = torch.maximum(amax_history[slot], torch.tensor(d["amax"], dtype=torch.float32))
        return "fake fp8-delayed single pass"

    def cast_transpose_fp8_cuda(self, x, scale, rowwise=None, colwise=None, amax_record=None, *, format, stream=0):
        self.calls.append(f"cast {format}")
        d = self._cast_with(x, scale, None, rowwise, colwise, format)
        if amax_record is not None:
            amax_record[0] = max(float(amax_record[0]), d["amax"])
        return "fake cast_transpose"

    def fp8_block_scale_count(self, block, rows, cols, copy="rowwise", layout="cublaslt"):
        assert layout == "cublaslt"
        r, k = (cols, rows) if copy == "colwise" else (rows, cols)
        return scale_count("blk128x128" if block == "128x128" else "vec128", r, k)

    def _block(self, x, block, rowwise, colwise, srow, scol, layout):
        assert x.dtype == torch.bfloat16 and layout == "cublaslt"
        self.calls.append(f"fp8-block {block}")
        mode, role, br = ("blk128x128", "w", 128) if block == "128x128" else ("vec128", "x", 1)
        done = []
        for name, copy, scales, src in (("row", rowwise, srow, x.float()), ("col", colwise, scol, x.float().t())):
            if copy is None:
                continue
            src = src.contiguous()
            rows, k = src.shape
            values = torch.from_numpy(np.array(self.ref.quantize(src.numpy(), "fp8-block", role)["values"]))
            amax = src.reshape(rows // br, br, k // 128, 128).abs().amax(dim=(1, 3))
            e = emulate.fp8_block_scale_exponent(amax).repeat_interleave(br, 0).repeat_interleave(128, 1)
            codes = values * torch.pow(2.0, e)  # exact: powers of two
            assert same(emulate.round_minifloat(codes, "e4m3"), codes), "block exponents differ from the reference's"
            assert scales.numel() == scale_count(mode, rows, k)
            scales[scale_index(mode, rows, k).reshape(-1)] = torch.pow(2.0, -e).reshape(-1)
            self._put_fp8(copy, codes, "e4m3")
            done.append(name)
        self.calls[-1] += " " + "+".join(done)
        return f"fake fp8-block {block}"

    def quantize_fp8_block_1x128_cuda(self, x, rowwise, colwise, scale_inv_rowwise, scale_inv_colwise, *,
                                      layout="cublaslt", stream=0):
        return self._block(x, "1x128", rowwise, colwise, scale_inv_rowwise, scale_inv_colwise, layout)

    def quantize_fp8_block_128x128_cuda(self, x, rowwise, colwise, scale_inv_rowwise, scale_inv_colwise, *,
                                        layout="cublaslt", stream=0):
        return self._block(x, "128x128", rowwise, colwise, scale_inv_rowwise, scale_inv_colwise, layout)

    def _fp8_operand(self, t, scale, dtype, mode, what):
        codes, fmt = self.fp8[t.data_ptr()]
        assert fmt == dtype, f"{what} is passed as {dtype} but holds {fmt} codes"
        assert tuple(codes.shape) == tuple(t.shape), what
        rows, k = t.shape
        assert scale.numel() == scale_count(mode, rows, k), f"{what}: {scale.numel()} scales for mode {mode}"
        return codes * scale.reshape(-1)[scale_index(mode, rows, k)]  # float32, as the reference decodes

    # ---- GEMM ------------------------------------------------------------------------------------------

    def gemm_cuda(self, a, a_scale, b, b_scale, out, *, a_dtype="e4m3", b_dtype="e4m3", a_scale_mode="outer_vec",
                  b_scale_mode="outer_vec", alpha=1.0, pass_="fprop", accumulation="split",
                  operands="emulated-exact (fp8)", stream=0):
        self.calls.append(f"gemm {pass_} {a_scale_mode}x{b_scale_mode}")
        self.gemms.append(dict(pass_=pass_, a_dtype=a_dtype, b_dtype=b_dtype, a_scale_mode=a_scale_mode,
                               b_scale_mode=b_scale_mode, accumulation=accumulation, operands=operands,
                               out_dtype=out.dtype, alpha=alpha))
        # cuBLASLt's rules (src/kernels/gemm/gemm_validate.cpp).
        if a_scale_mode in BLOCK_MODES or b_scale_mode in BLOCK_MODES:
            assert a_scale_mode in BLOCK_MODES and b_scale_mode in BLOCK_MODES, "a block mode needs a block partner"
            assert (a_scale_mode, b_scale_mode) != ("blk128x128",) * 2, "no 128x128 x 128x128 on Hopper"
            assert accumulation != "fast", "block-scaled modes always accumulate split"
        else:
            assert a_scale_mode == b_scale_mode, "cuBLASLt needs matching scale modes"
        assert (a_dtype, b_dtype) != ("e5m2", "e5m2"), "no E5M2 x E5M2 GEMM"
        assert tuple(a.shape)[1] == tuple(b.shape)[1], "A and B need the same K"
        if self.refuse_fp32_output and out.dtype == torch.float32 and a_dtype != "bf16":
            raise RuntimeError("gemm: cuBLASLt (version 0) has no algorithm for this problem (fake)")
        if a_dtype == "bf16":
            va, vb = a.float(), b.float()
        elif a.data_ptr() in self.fp8:
            va = self._fp8_operand(a, a_scale, a_dtype, a_scale_mode, "GEMM A")
            vb = self._fp8_operand(b, b_scale, b_dtype, b_scale_mode, "GEMM B")
        else:
            va, vb = self._get(a, "GEMM A"), self._get(b, "GEMM B")
            assert a_scale.numel() == self.reencode_scale_count("row" if a_scale_mode == "outer_vec" else "group128",
                                                                a.shape[0], a.shape[1])
        assert tuple(out.shape) == (a.shape[0], b.shape[0])
        out.copy_((alpha * (va.double() @ vb.double().t())).to(out.dtype))
        return operands, f"fake {a_dtype} {a_scale_mode}"


COUNTS = ("reencode_scale_count", "fp8_block_scale_count")  # host-only helpers: the real ones answer too


class CheckedFakeExt(FakeCudaExt):
    """The stand-in, but every call first goes to the real CUDA entry point with the same (CPU) arrays:
    it must get through the binding's argument parsing and its dtype/shape/contiguity/alignment checks
    and stop only at the device check. So the arrays nibble.backends.quartet passes match the bindings."""

    def __init__(self, ext):
        assert ext.has_cuda, "needs the CUDA build of nibble._C"
        super().__init__(ext)

    def __getattribute__(self, name):
        fake = super().__getattribute__(name)
        if not name.endswith("_cuda") and name not in COUNTS:
            return fake
        real = getattr(super().__getattribute__("ref"), name)

        def checked(*args, **kwargs):
            if name in COUNTS:
                assert real(*args, **kwargs) == fake(*args, **kwargs)
                return fake(*args, **kwargs)
            try:
                real(*args, **kwargs)
            except ValueError as e:
                assert " is on the CPU" in str(e), f"{name}: the binding refused the arguments: {e}"
            return fake(*args, **kwargs)
        return checked


def standin(ext):
    return CheckedFakeExt(ext) if ext.has_cuda else FakeCudaExt(ext)


def install_standin(ext, monkeypatch, route=None):
    """Makes the stand-in nibble's extension for one test (monkeypatch undoes it) and returns it. `route`
    maps recipe names to the nibble.backends module that runs them: backend-cuda layers of those recipes
    then run that module on CPU tensors (reference-backend layers, and other recipes, stay where they were)."""
    import nibble.torch as nt
    from nibble import _ext
    from nibble.backends import common

    f = standin(ext)
    monkeypatch.setattr(_ext, "_loaded", f)
    monkeypatch.setattr(common, "_NO_FP32_OUTPUT", set())
    if route is not None:
        monkeypatch.setattr(nt.Linear, "_cuda_kernels",
                            lambda self, x: route.get(self.recipe) if self.options["backend"] == "cuda" else None)
    return f
