#!/usr/bin/env python3
"""Triton tl.dot_scaled MXFP4 x MXFP4 on the 12 CodonFM-5B GEMMs (the popular Hopper emulation, which
upcasts to BF16), next to torch BF16 matmul in the same run.

    python benchmarks/triton_dot_scaled_mxfp4.py [--reps 20] [--warmup 5] [--json FILE]

Shapes follow docs/spec.md §5 (M x K x N; C[M, N] = A[M, K] * B[N, K]^T). Operands: E2M1 codes packed two
per byte along K (first element in the low nibble, as tl.dot_scaled documents), E8M0 scales per 32
along K; random, non-zero, prepared outside the timed region and rotated over 3 sets. A small
correctness check against a torch reference runs first and aborts on mismatch.
"""
import argparse
import json
import statistics
import sys

import torch
import triton
import triton.language as tl

T, H, F = 15872, 4096, 16384
SHAPES = [  # layer, pass, M, K, N
    ("qkv", "fprop", T, H, 3 * H), ("qkv", "dgrad", T, 3 * H, H), ("qkv", "wgrad", H, T, 3 * H),
    ("attn_out", "fprop", T, H, H), ("attn_out", "dgrad", T, H, H), ("attn_out", "wgrad", H, T, H),
    ("mlp_up", "fprop", T, H, F), ("mlp_up", "dgrad", T, F, H), ("mlp_up", "wgrad", H, T, F),
    ("mlp_down", "fprop", T, F, H), ("mlp_down", "dgrad", T, H, F), ("mlp_down", "wgrad", F, T, H),
]


@triton.autotune(
    configs=[
        triton.Config({"BM": 128, "BN": 128, "BK": 128}, num_warps=8, num_stages=3),
        triton.Config({"BM": 128, "BN": 256, "BK": 128}, num_warps=8, num_stages=3),
        triton.Config({"BM": 256, "BN": 128, "BK": 128}, num_warps=8, num_stages=3),
        triton.Config({"BM": 128, "BN": 128, "BK": 256}, num_warps=8, num_stages=2),
    ],
    key=["M", "N", "K"],
)
@triton.jit
def mxfp4_gemm_kernel(a_ptr, b_ptr, as_ptr, bs_ptr, c_ptr, M, N, K,
                      BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # a: [M, K/2] uint8, b: [N, K/2] uint8 (both contiguous along K), scales [rows, K/32] uint8.
    pid = tl.program_id(0)
    num_n = tl.cdiv(N, BN)
    pid_m = pid // num_n
    pid_n = pid % num_n
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_kp = tl.arange(0, BK // 2)
    offs_ks = tl.arange(0, BK // 32)
    kh = K // 2
    ks = K // 32
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(a_ptr + offs_m[:, None] * kh + (k0 // 2 + offs_kp)[None, :], mask=offs_m[:, None] < M, other=0)
        b = tl.load(b_ptr + offs_n[None, :] * kh + (k0 // 2 + offs_kp)[:, None], mask=offs_n[None, :] < N, other=0)
        sa = tl.load(as_ptr + offs_m[:, None] * ks + (k0 // 32 + offs_ks)[None, :], mask=offs_m[:, None] < M, other=127)
        sb = tl.load(bs_ptr + offs_n[:, None] * ks + (k0 // 32 + offs_ks)[None, :], mask=offs_n[:, None] < N, other=127)
        acc = tl.dot_scaled(a, sa, "e2m1", b, sb, "e2m1", acc)
    c = acc.to(tl.bfloat16)
    tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], c, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def mxfp4_gemm(a, b, sa, sb, m, n, k, c):
    grid = lambda meta: (triton.cdiv(m, meta["BM"]) * triton.cdiv(n, meta["BN"]),)
    mxfp4_gemm_kernel[grid](a, b, sa, sb, c, m, n, k)


E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def random_operand(rows, k, gen):
    """Packed E2M1 codes (no zero nibble: magnitudes 1..7) and E8M0 scales in 2^[-3, 3]."""
    lo = torch.randint(1, 8, (rows, k // 2), generator=gen, device="cuda", dtype=torch.uint8)
    hi = torch.randint(1, 8, (rows, k // 2), generator=gen, device="cuda", dtype=torch.uint8)
    sign = torch.randint(0, 2, (rows, k // 2, 2), generator=gen, device="cuda", dtype=torch.uint8) * 8
    packed = (lo | sign[..., 0]) | ((hi | sign[..., 1]) << 4)
    scales = torch.randint(124, 131, (rows, k // 32), generator=gen, device="cuda", dtype=torch.uint8)
    return packed, scales


def decode(packed, scales):
    table = torch.tensor(E2M1 + [-v for v in E2M1], device=packed.device, dtype=torch.float32)
    lo = table[(packed & 0xF).long()]
    hi = table[(packed >> 4).long()]
    vals = torch.stack([lo, hi], dim=-1).reshape(packed.shape[0], -1)  # first element in the low nibble
    s = torch.exp2(scales.float() - 127.0).repeat_interleave(32, dim=1)
    return vals * s


def check_correctness(gen):
    m, n, k = 256, 384, 512
    a, sa = random_operand(m, k, gen)
    b, sb = random_operand(n, k, gen)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    mxfp4_gemm(a, b, sa, sb, m, n, k, c)
    ref = decode(a, sa).double() @ decode(b, sb).double().T
    err = ((c.double() - ref).norm() / ref.norm()).item()
    if not (err < 1e-2):
        raise RuntimeError(f"tl.dot_scaled MXFP4 GEMM disagrees with the torch reference: rel error {err:.3e}")
    return err


def time_ms(fn, sets, warmup, reps):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(warmup + reps):
        args = sets[i % len(sets)]
        start.record()
        fn(*args)
        stop.record()
        stop.synchronize()
        if i >= warmup:
            times.append(start.elapsed_time(stop))
    times.sort()
    q = lambda p: times[min(len(times) - 1, int(p * (len(times) - 1) + 0.5))]
    return statistics.median(times), q(0.1), q(0.9)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--sets", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("triton_dot_scaled_mxfp4: error: no CUDA device")
    gen = torch.Generator(device="cuda")
    gen.seed()
    err = check_correctness(gen)
    dev = torch.cuda.get_device_name()
    print(f"triton_dot_scaled_mxfp4: {dev}, torch {torch.__version__}, triton {triton.__version__}, "
          f"correctness rel error {err:.2e}")
    rows = []
    totals = {"triton_mxfp4": 0.0, "torch_bf16": 0.0}
    for layer, pas, m, k, n in SHAPES:
        flops = 2.0 * m * n * k
        c = torch.empty((m, n), device="cuda", dtype=torch.bfloat16)
        sets = []
        for _ in range(args.sets):
            a, sa = random_operand(m, k, gen)
            b, sb = random_operand(n, k, gen)
            sets.append((a, b, sa, sb, m, n, k, c))
        mxfp4_gemm(*sets[0])  # autotune outside the timed region
        torch.cuda.synchronize()
        med, p10, p90 = time_ms(mxfp4_gemm, sets, args.warmup, args.reps)
        del sets
        bsets = [(torch.randn(m, k, device="cuda", dtype=torch.bfloat16),
                  torch.randn(n, k, device="cuda", dtype=torch.bfloat16)) for _ in range(args.sets)]
        bmed, bp10, bp90 = time_ms(lambda x, w: torch.matmul(x, w.T, out=c), bsets, args.warmup, args.reps)
        del bsets
        totals["triton_mxfp4"] += med
        totals["torch_bf16"] += bmed
        row = {"layer": layer, "pass": pas, "m": m, "k": k, "n": n,
               "triton_mxfp4": {"median_ms": med, "p10_ms": p10, "p90_ms": p90, "tflops": flops / med / 1e9},
               "torch_bf16": {"median_ms": bmed, "p10_ms": bp10, "p90_ms": bp90, "tflops": flops / bmed / 1e9}}
        rows.append(row)
        print(f"  {layer:9s} {pas:6s} {m:6d}x{k:6d}x{n:6d}  tl.dot_scaled {med:8.3f} ms "
              f"{row['triton_mxfp4']['tflops']:7.1f} TFLOP/s   torch bf16 {bmed:8.3f} ms "
              f"{row['torch_bf16']['tflops']:7.1f} TFLOP/s")
    ratio = totals["torch_bf16"] / totals["triton_mxfp4"]
    print(f"layer: tl.dot_scaled MXFP4 {totals['triton_mxfp4']:.2f} ms, torch BF16 {totals['torch_bf16']:.2f} ms "
          f"({ratio:.2f}x BF16); path: emulated (Triton upcasts MXFP4 to BF16 on sm_90)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": dev, "torch": torch.__version__, "triton": triton.__version__,
                       "reps": args.reps, "warmup": args.warmup, "correctness_rel_error": err,
                       "gemms": rows, "layer_ms": totals, "speedup_vs_bf16": ratio}, f, indent=2)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
