"""A stand-in for the CUDA entry points of nibble._C, built on the CPU reference, so the Python side of
the CUDA backend (nibble.quartet_cuda: which planes feed which GEMM, seeds, masks, violation counts,
the re-encode / decode fallbacks) is tested on machines without a GPU.

It is NOT a model of the kernels' bits: a plane's values live in a side table keyed by its codes
tensor (the uint8 bytes themselves stay unwritten), the trust mask is packed for real (so passing the
wrong mask to an epilogue shows), GEMMs run in float64, and block exponents come from each 32-group's
amax (exact enough for the test inputs, whose spreads are far from the 14-binade limit).
"""
import numpy as np
import torch

QUARTET_RESCALE = 16.0 / 9.0


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


class FakeCudaExt:
    has_cuda = True

    def __init__(self, ext):
        self.ref = ext  # the real extension (its CPU reference)
        self.values = {}  # data_ptr of a codes / e4m3 / bf16 tensor -> float32 values it stands for
        self.calls = []
        self.refuse_fp32_output = False  # act like a cuBLASLt without FP32-output FP8 algorithms

    def _put(self, t, v):
        self.values[t.data_ptr()] = v

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

    def gemm_cuda(self, a, a_scale, b, b_scale, out, *, a_dtype="e4m3", b_dtype="e4m3", a_scale_mode="outer_vec",
                  b_scale_mode="outer_vec", alpha=1.0, pass_="fprop", accumulation="split",
                  operands="emulated-exact (fp8)", stream=0):
        self.calls.append(f"gemm {pass_} {a_scale_mode}x{b_scale_mode}")
        assert a_scale_mode == b_scale_mode, "cuBLASLt needs matching scale modes"
        if self.refuse_fp32_output and out.dtype == torch.float32 and a_dtype != "bf16":
            raise RuntimeError("gemm: cuBLASLt (version 0) has no algorithm for this problem (fake)")
        if a_dtype == "bf16":
            va, vb = a.float(), b.float()
        else:
            va, vb = self._get(a, "GEMM A"), self._get(b, "GEMM B")
            assert a_scale.numel() == self.reencode_scale_count("row" if a_scale_mode == "outer_vec" else "group128",
                                                                a.shape[0], a.shape[1])
        assert tuple(out.shape) == (a.shape[0], b.shape[0])
        out.copy_((alpha * (va.double() @ vb.double().t())).to(out.dtype))
        return operands, f"fake {a_dtype} {a_scale_mode}"


class CheckedFakeExt(FakeCudaExt):
    """The stand-in, but every call first goes to the real CUDA entry point with the same (CPU) arrays:
    it must get through the binding's argument parsing and its dtype/shape/contiguity/alignment checks
    and stop only at the device check. So the arrays nibble.quartet_cuda passes match the bindings."""

    def __init__(self, ext):
        assert ext.has_cuda, "needs the CUDA build of nibble._C"
        super().__init__(ext)

    def __getattribute__(self, name):
        fake = super().__getattribute__(name)
        if not name.endswith("_cuda") and name != "reencode_scale_count":
            return fake
        real = getattr(super().__getattribute__("ref"), name)

        def checked(*args, **kwargs):
            if name == "reencode_scale_count":
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
