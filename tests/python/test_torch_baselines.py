"""The torch.compile baselines of the kernel benchmark (benchmarks/torch_compile_fp4.py) must do the same math
as nibble's kernels, or "never slower than torch.compile" compares different work. Their MXFP4 and NVFP4
functions, run eagerly on CPU, must give exactly the values of nibble's CPU reference (which the CUDA
kernels equal bit for bit, GPU tests). Inputs are multiples of 1/64 below 8 in magnitude with a
power-of-two spread per row, so every Hadamard sum is exact in FP32 whatever order torch's matmul adds
in, and every step after it is one rounding both sides define the same way."""
import importlib.util
import os
import sys

import numpy as np
import pytest
import torch

_BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks")
sys.path.insert(0, _BENCH)  # torch_compile_fp4 imports its sibling torch_compile_common
_spec = importlib.util.spec_from_file_location("torch_compile_fp4", os.path.join(_BENCH, "torch_compile_fp4.py"))
tc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tc)

_E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def exact_sum_input(g, rows, cols):
    k = torch.randint(-511, 512, (rows, cols), generator=g).float() / 64
    spread = torch.exp2(torch.randint(-6, 7, (rows, 1), generator=g).float())
    x = k * spread
    x[0, :16] = 0.0                     # an all-zero block
    x[1, :32] = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0] * 4)  # E2M1 ties at scale 1
    return x.to(torch.bfloat16)


def unpack(packed, rows, cols):
    p = packed.reshape(rows, cols // 2)
    codes = torch.stack([p & 0xF, p >> 4], dim=-1).reshape(rows, cols).long()
    mag = _E2M1[codes & 7]
    return torch.where(codes >= 8, -mag, mag)


def ue4m3_value(code):
    c = code.long()
    e, m = c >> 3, (c & 7).float()
    return torch.where(e > 0, (1 + m / 8) * torch.exp2(e.float() - 7), m * 2.0 ** -9)


def assert_values(got, want):
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=0)  # neighbouring codes differ >= 1/8


def test_ue4m3_rounding_matches_the_reference_on_every_code_and_tie(ext):
    # Every finite UE4M3 value, the midpoints between neighbours (ties to even) and the floats next to them.
    vals = ue4m3_value(torch.arange(0, 127))
    mids = (vals[1:] + vals[:-1]) / 2
    y = torch.cat([vals, mids, torch.nextafter(mids, torch.zeros_like(mids)),
                   torch.nextafter(mids, torch.full_like(mids, 1e9)), torch.tensor([1e-30])])
    code, value = tc.ue4m3_rn(y)
    assert torch.equal(ue4m3_value(code), value)
    # The reference's block scale of one block per row whose amax is 6 y, with the tensor amax 6 * 448 in
    # another block so that the global scale is exactly 1: d = RN_UE4M3(RN(6 y) / 6), and the block's
    # largest element decodes to RN_E2M1(6 y / d) d (6 d for normal scales; less among the subnormal ones,
    # where neighbouring scales are up to 2x apart).
    a = 6 * y
    xs = torch.zeros(len(y), 32)
    xs[:, 0] = a
    xs[:, 16] = 6 * 448
    ref = ext.quantize(xs.numpy(), "nvfp4", role="x", nvfp4_rht=False)
    assert ref["tensor_scale"] == 1.0
    _, d = tc.ue4m3_rn(a / 6)
    safe = torch.where(d > 0, d, torch.ones_like(d))
    want = torch.where(d > 0, _E2M1[tc.e2m1_codes(a / safe).long()] * d, torch.zeros_like(d))
    np.testing.assert_array_equal(ref["values"][:, 0], want.numpy())


@pytest.mark.parametrize("rht", [False, True])
def test_nvfp4_1x16_equals_the_reference(ext, rng, rht):
    x = exact_sum_input(rng, 64, 256)
    rm = tc.nvfp4_rht_matrix("cpu") if rht else None
    packed, scales, s = tc.nvfp4_1x16(x, rm)
    ref = ext.quantize(x.float().numpy(), "nvfp4", role="x", nvfp4_rht=rht)
    assert s.item() == ref["tensor_scale"]
    got = unpack(packed, 64, 256) * ue4m3_value(scales).repeat_interleave(16, dim=1) * s
    assert_values(got, ref["values"])


def test_nvfp4_column_copy_with_rht_equals_the_reference_of_the_transpose(ext, rng):
    x = exact_sum_input(rng, 128, 64)
    (_, _, _), (packed, scales, s) = tc.nvfp4_rowcol(x, tc.nvfp4_rht_matrix("cpu"))
    ref = ext.quantize(x.float().t().contiguous().numpy(), "nvfp4", role="x", nvfp4_rht=True)
    got = unpack(packed, 64, 128) * ue4m3_value(scales).repeat_interleave(16, dim=1) * s
    assert_values(got, ref["values"])


def test_nvfp4_16x16_equals_the_reference(ext, rng):
    w = exact_sum_input(rng, 64, 128)
    packed, scales, s = tc.nvfp4_16x16(w)
    ref = ext.quantize(w.float().numpy(), "nvfp4", role="w")
    d = ue4m3_value(scales).repeat_interleave(16, dim=0).repeat_interleave(16, dim=1)
    assert_values(unpack(packed, 64, 128) * d * s, ref["values"])


def test_mxfp4_equals_the_reference(ext, rng):
    x = exact_sum_input(rng, 32, 256)
    packed, k = tc.mxfp4_ocp(x)
    ref = ext.quantize(x.float().numpy(), "mxfp4", role="x")
    scale = torch.exp2(k.float() - 127).reshape(32, -1).repeat_interleave(32, dim=1)
    assert_values(unpack(packed, 32, 256) * scale, ref["values"])
