#!/usr/bin/env python3
"""torch.compile of the FP4 quantizers (same math as src/kernels/fp4/quantize_mxfp4.cu, quantize_nvfp4.cu, quartet_*.cu) on
CodonFM-5B shapes, timed like benchmarks/gpu_quant_fp4_bench.cu: warm-up, CUDA events, median and
p10/p90 of >= 20 runs, two rotating inputs, effective bandwidth = (bytes read + written) / median
next to a device-to-device copy of the same input measured in the same run. --json FILE writes it.
The MXFP4 and NVFP4 functions equal nibble's CPU reference on finite inputs (tests/python/test_torch_baselines.py);
the Quartet ones do the same work with torch's own reductions and matmuls (not bit-exact).
The labels are the kernel names of gpu_quant_fp4_bench, so the two JSON files pair row for row.
"""
import torch

import torch_compile_common as common

# E2M1 round-to-nearest-even as threshold counts on |v| (ties go to the even code).
_UP = [0.25, 1.25, 2.5, 5.0]      # strictly greater rounds up
_UP_EQ = [0.75, 1.75, 3.5]        # greater or equal rounds up


def e2m1_codes(v):
    a = v.abs()
    code = sum((a > t).to(torch.uint8) for t in _UP) + sum((a >= t).to(torch.uint8) for t in _UP_EQ)
    return code | (torch.signbit(v).to(torch.uint8) << 3)


def pack(codes):
    c = codes.view(*codes.shape[:-1], -1, 2)
    return c[..., 0] | (c[..., 1] << 4)


def mxfp4_ocp(x):
    g = x.float().view(x.shape[0], -1, 32)
    amax = g.abs().amax(-1, keepdim=True)
    k = (torch.floor(torch.log2(amax)) - 2).clamp(-127, 127)
    k = torch.where(amax > 0, k, torch.full_like(k, -127))
    q = e2m1_codes(g * torch.exp2(-k))
    return pack(q.view(x.shape[0], -1)), (k + 127).to(torch.uint8)


# NVFP4 (docs/spec.md §2, Transformer Engine's recipe; docs/recipes.md), the same math as
# src/kernels/fp4/quantize_nvfp4.cu on finite inputs: per copy a global encode scale S_enc = min(6 * 448 / amax,
# FLT_MAX) (1 when amax is 0) and decode scale S_dec = 1 / S_enc, block scale UE4M3 = RN(amax_block * (S_enc *
# fl(1/6))), elements RN_E2M1(v * min(1 / (decode(block scale) * S_dec), FLT_MAX)); the column-wise copy (of x^T)
# with the 16-point random Hadamard transform (signs applied first, then H16 / 4), its output rounded to BF16.
_NVFP4_SIGN_MASK = 0xD7E8  # quant::kNvfp4RhtSignMask (TE's wgrad sign vector): bit j set -> element j negated
_FLT_MAX = torch.finfo(torch.float32).max
_E4M3_MAX, _E2M1_MAX = 448.0, 6.0


def nvfp4_rht_matrix(device):
    """(x * signs) @ H16 / 4 as one matrix: row j of the Sylvester H16 negated where sign bit j is set."""
    h = torch.tensor([[(-1.0) ** bin(i & j).count("1") for j in range(16)] for i in range(16)], device=device)
    signs = torch.tensor([-1.0 if (_NVFP4_SIGN_MASK >> j) & 1 else 1.0 for j in range(16)], device=device)
    return signs[:, None] * h * 0.25


def ue4m3_rn(y):
    """Non-negative float32 -> (UE4M3 code as uint8, its value): round to nearest even, saturating at 448."""
    y = y.clamp(max=_E4M3_MAX)
    if hasattr(torch, "float8_e4m3fn"):
        f8 = y.to(torch.float8_e4m3fn)
        return f8.view(torch.uint8), f8.float()
    # torch < 2.1 (Debian's 1.13 on the CPU machines): the same rounding by hand. floor(log2 y) may come
    # out one too high within an ulp below a power of two, where y rounds up to that power either way.
    e = torch.floor(torch.log2(y)).clamp(min=-6.0)   # -6: E4M3's smallest normal exponent (subnormals below)
    v = torch.round(y * torch.exp2(3.0 - e)) * torch.exp2(e - 3.0)  # torch.round: half to even
    ev = torch.floor(torch.log2(v)).clamp(min=-6.0)
    normal = v >= 2.0 ** -6
    code = torch.where(normal, (ev + 7) * 8 + (v * torch.exp2(3.0 - ev) - 8), v * 2.0 ** 9)
    return code.to(torch.uint8), v


def _nvfp4_groups(g, block_amax):
    amax = g.abs().amax()
    s_enc = (torch.full_like(amax, _E4M3_MAX * _E2M1_MAX) / amax).clamp(max=_FLT_MAX)
    s_enc = torch.where((amax == 0) | (s_enc == 0), torch.ones_like(s_enc), s_enc)
    s_dec = torch.ones_like(s_enc) / s_enc
    code, dec = ue4m3_rn(block_amax * (s_enc * torch.full_like(s_enc, 1.0 / _E2M1_MAX)))
    e = (torch.ones_like(dec) / (dec * s_dec)).clamp(max=_FLT_MAX)
    return e2m1_codes(g * e), code, s_dec


def nvfp4_1x16(t, rht_matrix=None):
    """One copy of a [rows, cols] tensor, 1x16 blocks along cols: (packed codes, scale codes, global scale)."""
    g = t.float().reshape(t.shape[0], -1, 16)
    if rht_matrix is not None:
        g = (g @ rht_matrix).to(torch.bfloat16).float()
    q, code, s = _nvfp4_groups(g, g.abs().amax(-1, keepdim=True))
    return pack(q.reshape(t.shape[0], -1)), code.reshape(t.shape[0], -1), s


def nvfp4_16x16(t):
    """Weights: one scale per 16x16 tile, elements still 1x16 groups along cols."""
    r, c = t.shape
    g = t.float().reshape(r // 16, 16, c // 16, 16)
    q, code, s = _nvfp4_groups(g, g.abs().amax(dim=(1, 3), keepdim=True))
    return pack(q.reshape(r, c)), code.reshape(r // 16, c // 16), s


def nvfp4_rowcol(x, rht_matrix):
    """What nibble's default NVFP4 kernel produces for X or dY: row-wise copy, and x^T with the RHT."""
    return nvfp4_1x16(x), nvfp4_1x16(x.t(), rht_matrix)


def nvfp4_16x16_rowcol(w):
    return nvfp4_16x16(w), nvfp4_16x16(w.t())


def quartet_forward(x, h):
    g = (x.float().view(x.shape[0], -1, 32) @ h)
    sigma = g.std(-1, unbiased=False, keepdim=True)
    k = torch.floor(torch.log2(0.48707976 * sigma + 1e-8)).clamp(-127, 127)
    v = g * torch.exp2(-k)
    mask = v.abs() < 6
    q = e2m1_codes(v.clamp(-6, 6))
    bits = mask.view(x.shape[0], -1, 8).to(torch.uint8) << torch.arange(8, device=x.device, dtype=torch.uint8)
    return pack(q.view(x.shape[0], -1)), (k + 127).to(torch.uint8), bits.sum(-1, dtype=torch.uint8)


def _backward_one(t, h):
    g = t.float().view(t.shape[0], -1, 32) @ h
    amax = g.abs().amax(-1, keepdim=True)
    k = (torch.floor(torch.log2(amax)) - 2).clamp(-127, 127)
    q = e2m1_codes(0.75 * g * torch.exp2(-k))
    return pack(q.view(t.shape[0], -1)), (k + 127).to(torch.uint8)


def quartet_backward_both(x, h):
    return _backward_one(x, h), _backward_one(x.t(), h)


def main():
    h = torch.tensor([[(-1) ** bin(i & j).count("1") for j in range(32)] for i in range(32)],
                     dtype=torch.float32, device="cuda") / 32 ** 0.5
    signs = torch.where(torch.rand(32, device="cuda") < 0.5, -1.0, 1.0)
    hs = signs[:, None] * h  # (x * s) H
    rht = nvfp4_rht_matrix("cuda")

    def cases(n):
        mx_out, nv_out = n / 2 + n / 32, n / 2 + n / 16
        return [
            ("mxfp4 ocp", torch.compile(mxfp4_ocp), 2.0 * n + mx_out),
            # Two reads, as nibble's kernel counts them: the global amax needs the whole tensor first.
            ("nvfp4 1x16 row+col (rht col)", lambda x, f=torch.compile(nvfp4_rowcol): f(x, rht), 4.0 * n + 2 * nv_out),
            ("nvfp4 1x16 rowwise only", torch.compile(nvfp4_1x16), 4.0 * n + nv_out),
            ("nvfp4 16x16 row+col", torch.compile(nvfp4_16x16_rowcol), 4.0 * n + 2 * (n / 2 + n / 256)),
            ("quartet fwd h32+quest (+mask)", lambda x, f=torch.compile(quartet_forward): f(x, h), 2.0 * n + mx_out + n / 8),
            ("quartet bwd row+col rn", lambda x, f=torch.compile(quartet_backward_both): f(x, hs), 2.0 * n + 2 * mx_out),
        ]
    common.run(cases)


if __name__ == "__main__":
    main()
