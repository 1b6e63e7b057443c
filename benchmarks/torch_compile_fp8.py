#!/usr/bin/env python3
"""torch.compile of the FP8-family quantizers (same math as src/kernels/fp8/) on CodonFM-5B shapes.

Times each compiled function like benchmarks/gpu_quant_fp8_bench.cu does (warm-up, CUDA events, median
and p10/p90 of >= 20 runs, two rotating inputs so L2 does not hold them), reports effective
bandwidth = (bytes read + bytes written) / median next to a device-to-device copy of the same input
measured in the same run, and writes JSON with --json FILE.
"""
import torch

import torch_compile_common as common

E4M3_MAX, E5M2_MAX = 448.0, 57344.0


def cast_transpose_amax(x, scale):
    amax = x.abs().amax().float()
    y = x.float() * scale
    q = y.clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    qt = y.t().clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn).contiguous()
    return q, qt, amax


def current_scaling(x):
    amax = x.abs().amax().float()
    scale = torch.where((amax > 0) & torch.isfinite(amax), E5M2_MAX / amax, torch.ones_like(amax))
    y = x.float() * scale
    q = y.clamp(-E5M2_MAX, E5M2_MAX).to(torch.float8_e5m2)
    qt = y.t().clamp(-E5M2_MAX, E5M2_MAX).to(torch.float8_e5m2).contiguous()
    return q, qt, 1.0 / scale


def _block_pow2_scale(amax):
    k = torch.floor(torch.log2(E4M3_MAX / amax))
    k = torch.where((amax > 0) & torch.isfinite(amax), k, torch.zeros_like(k)).clamp(-127, 127)
    return torch.exp2(k)


def block_1x128_rowwise(x):
    r, c = x.shape
    g = x.float().view(r, c // 128, 128)
    s = _block_pow2_scale(g.abs().amax(-1, keepdim=True))
    return (g * s).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn).view(r, c), (1.0 / s).squeeze(-1)


def block_1x128_both(x):
    q, s = block_1x128_rowwise(x)
    qt, st = block_1x128_rowwise(x.t())
    return q, s, qt.contiguous(), st


def mxfp8_rowwise(x):
    r, c = x.shape
    g = x.float().view(r, c // 32, 32)
    amax = g.abs().amax(-1, keepdim=True)
    k = (torch.floor(torch.log2(amax)) - 8).clamp(-127, 127)
    k = torch.where(amax > 0, k, torch.full_like(k, -127))
    q = (g * torch.exp2(-k)).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn).view(r, c)
    return q, (k + 127).to(torch.uint8).squeeze(-1)


def mxfp8_both(x):
    q, s = mxfp8_rowwise(x)
    qt, st = mxfp8_rowwise(x.t())
    return q, s, qt.contiguous(), st


def main():
    scale = torch.tensor(1.0, device="cuda")
    common.run(lambda n: [
        ("fp8 cast+transpose+amax (e4m3)", lambda x, f=torch.compile(cast_transpose_amax): f(x, scale), 4.0 * n),
        ("fp8 current scaling (e5m2)", torch.compile(current_scaling), 4.0 * n),
        ("fp8-block 1x128 rowwise", torch.compile(block_1x128_rowwise), 3.0 * n + n / 32),
        ("fp8-block 1x128 row+col", torch.compile(block_1x128_both), 4.0 * n + n / 16),
        ("mxfp8 ocp rowwise", torch.compile(mxfp8_rowwise), 3.0 * n + n / 32),
        ("mxfp8 ocp row+col", torch.compile(mxfp8_both), 4.0 * n + n / 16),
    ])


if __name__ == "__main__":
    main()
