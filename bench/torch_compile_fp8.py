#!/usr/bin/env python3
"""torch.compile of the FP8-family quantizers (same math as src/cuda/*fp8*) on CodonFM-5B shapes.

Times each compiled function like bench/gpu_quant_fp8_bench.cu does (warm-up, CUDA events, median
and p10/p90 of >= 20 runs, two rotating inputs so L2 does not hold them), reports effective
bandwidth = (bytes read + bytes written) / median next to a device-to-device copy of the same input
measured in the same run, and writes JSON with --json FILE.
"""
import argparse
import json

import torch

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


def time_it(fn, inputs, reps):
    for i in range(3):
        fn(inputs[i % 2])
    torch.cuda.synchronize()
    ms = []
    for i in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn(inputs[i % 2])
        b.record()
        b.synchronize()
        ms.append(a.elapsed_time(b))
    ms.sort()
    q = lambda p: ms[int(p * (len(ms) - 1) + 0.5)]
    return q(0.5), q(0.1), q(0.9)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()
    reps = max(20, args.reps)
    shapes = [("act 15872x4096", 15872, 4096), ("act 15872x16384", 15872, 16384), ("weight 4096x16384", 4096, 16384)]
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "reps": reps, "results": []}
    scale = torch.tensor(1.0, device="cuda")
    print(f"{'shape':<20} {'function':<36} {'median_us':>9} {'p10_us':>9} {'p90_us':>9} {'TB/s':>7} {'vs_copy':>7}")
    for name, r, c in shapes:
        n = r * c
        xs = [torch.randn(r, c, device="cuda", dtype=torch.bfloat16) for _ in range(2)]
        dst = torch.empty_like(xs[0])
        copy = time_it(lambda x: dst.copy_(x), xs, reps)
        copy_tbs = 4.0 * n / (copy[0] * 1e-3) / 1e12
        cases = [
            ("fp8 cast+transpose+amax (e4m3)", lambda x, f=torch.compile(cast_transpose_amax): f(x, scale), 4.0 * n),
            ("fp8 current scaling (e5m2)", torch.compile(current_scaling), 4.0 * n),
            ("fp8-block 1x128 rowwise", torch.compile(block_1x128_rowwise), 3.0 * n + n / 32),
            ("fp8-block 1x128 row+col", torch.compile(block_1x128_both), 4.0 * n + n / 16),
            ("mxfp8 ocp rowwise", torch.compile(mxfp8_rowwise), 3.0 * n + n / 32),
            ("mxfp8 ocp row+col", torch.compile(mxfp8_both), 4.0 * n + n / 16),
        ]
        rows = [("d2d copy (reference)", copy, 4.0 * n)]
        for label, fn, nbytes in cases:
            rows.append((label, time_it(fn, xs, reps), nbytes))
        for label, (med, p10, p90), nbytes in rows:
            tbs = nbytes / (med * 1e-3) / 1e12
            print(f"{name:<20} {label:<36} {med*1e3:9.1f} {p10*1e3:9.1f} {p90*1e3:9.1f} {tbs:7.2f} {tbs/copy_tbs:7.2f}")
            out["results"].append({"shape": name, "rows": r, "cols": c, "function": label, "bytes": nbytes,
                                   "median_ms": med, "p10_ms": p10, "p90_ms": p90, "tb_per_s": tbs,
                                   "copy_tb_per_s": copy_tbs, "ratio_to_copy": tbs / copy_tbs})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
        print("wrote", args.json)


if __name__ == "__main__":
    main()
