"""Forward+backward time of one transformer block per recipe on the GPU, next to the GEMM-only speedup.

    python3 bench/step_bench.py --preset codonfm-5b --bench-json out/bench.json --json out/step.json
    python3 bench/step_bench.py --hidden 4096 --ffn 14336 --heads 32 --kv-heads 8 --gated --tokens 8192

The block: RMSNorm, fused QKV, torch scaled_dot_product_attention (causal), output projection, RMSNorm,
MLP (gated SwiGLU or plain GELU), with the four linear layers swapped by nibble.torch.convert. Timing:
CUDA events around forward + backward, warm-up first, median of --reps. The recipe layers run
nibble.torch's torch-emulated path on CUDA tensors (quantize -> dequantize -> FP32 GEMM) until the
device kernels are bound, so step times measure that emulation, not nibble's fused kernels: the JSON
says so in "path".
"""
import argparse
import json
import os
import statistics
import sys

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import nibble.torch as nt  # noqa: E402

PRESETS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "presets")


class Block(nn.Module):
    def __init__(self, hidden, ffn, heads, kv_heads, gated):
        super().__init__()
        self.heads, self.kv_heads, self.hd, self.gated = heads, kv_heads, hidden // heads, gated
        self.n1, self.n2 = nn.RMSNorm(hidden), nn.RMSNorm(hidden)
        self.qkv = nn.Linear(hidden, (heads + 2 * kv_heads) * self.hd, bias=False)
        self.proj = nn.Linear(heads * self.hd, hidden, bias=False)
        self.up = nn.Linear(hidden, (2 if gated else 1) * ffn, bias=False)
        self.down = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x):
        b, t, h = x.shape
        q, k, v = self.qkv(self.n1(x)).split([self.heads * self.hd, self.kv_heads * self.hd,
                                             self.kv_heads * self.hd], dim=-1)
        q = q.view(b, t, self.heads, self.hd).transpose(1, 2)
        k = k.view(b, t, self.kv_heads, self.hd).transpose(1, 2)
        v = v.view(b, t, self.kv_heads, self.hd).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.kv_heads != self.heads)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, -1))
        u = self.up(self.n2(x))
        u = F.silu(u.chunk(2, -1)[0]) * u.chunk(2, -1)[1] if self.gated else F.gelu(u)
        return x + self.down(u)


def time_block(block, x, reps, warmup):
    times = []
    for i in range(warmup + reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        xi = x.detach().requires_grad_(True)
        s.record()
        block(xi).float().square().mean().backward()
        e.record()
        torch.cuda.synchronize()
        if i >= warmup:
            times.append(s.elapsed_time(e))
    return statistics.median(times), min(times), max(times)


def gemm_speedups(path):
    """recipe -> GEMM-only speedup over bf16 from a `nibble bench` JSON (best effort on its layout)."""
    with open(path) as f:
        doc = json.load(f)
    out = {}

    def walk(o):
        if isinstance(o, dict):
            r, sp = o.get("recipe"), o.get("speedup_vs_bf16", o.get("speedup"))
            if isinstance(r, str) and isinstance(sp, (int, float)) and r not in out:
                out[r] = float(sp)
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)
    walk(doc)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", help="name in data/presets (codonfm-5b, llama-3-8b, ...)")
    ap.add_argument("--hidden", type=int)
    ap.add_argument("--ffn", type=int)
    ap.add_argument("--heads", type=int)
    ap.add_argument("--kv-heads", type=int)
    ap.add_argument("--gated", action="store_true")
    ap.add_argument("--tokens", type=int, help="micro_batch x seq_len (default: the preset's)")
    ap.add_argument("--seq-len", type=int)
    ap.add_argument("--recipes", default="bf16,fp8-delayed,fp8-current,mxfp4,quartet,nvfp4")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--bench-json", help="`nibble bench --json` output for the same model: GEMM-only speedups")
    ap.add_argument("--json", help="write results here")
    a = ap.parse_args()
    cfg = {}
    if a.preset:
        p = os.path.join(PRESETS, a.preset + ".json")
        if not os.path.exists(p):
            ap.error(f"preset {a.preset!r} not found in {PRESETS}; use one of "
                     + ", ".join(sorted(f[:-5] for f in os.listdir(PRESETS))))
        cfg = json.load(open(p))
    hidden, ffn, heads = a.hidden or cfg.get("hidden"), a.ffn or cfg.get("ffn"), a.heads or cfg.get("heads")
    if not (hidden and ffn and heads):
        ap.error("give --preset or all of --hidden, --ffn, --heads")
    kv = a.kv_heads or cfg.get("kv_heads") or heads
    gated = a.gated or bool(cfg.get("gated", False))
    seq = a.seq_len or cfg.get("seq_len", 2048)
    tokens = a.tokens or cfg.get("micro_batch", 1) * seq
    if tokens % seq:
        ap.error(f"tokens {tokens} is not a multiple of seq_len {seq}")
    if not torch.cuda.is_available():
        sys.exit("step_bench needs a CUDA GPU (timing with CUDA events); none is visible")
    speed = gemm_speedups(a.bench_json) if a.bench_json else {}
    x = torch.randn(tokens // seq, seq, hidden, device="cuda", dtype=torch.bfloat16)
    rows, base = [], None
    for recipe in [r.strip() for r in a.recipes.split(",") if r.strip()]:
        torch.manual_seed(0)
        block = Block(hidden, ffn, heads, kv, gated).cuda()
        if recipe == "bf16":
            block = block.to(torch.bfloat16)  # the real baseline: native BF16 GEMMs, not an emulation
            path = "native bf16 (torch)"
        else:
            nt.convert(block, recipe, check_finite=False)
            path = "torch-emulated (quantize-dequantize + FP32 GEMM)"
        try:
            med, lo, hi = time_block(block, x, a.reps, a.warmup)
        except torch.cuda.OutOfMemoryError:
            print(f"{recipe}: out of memory at {tokens} tokens; lower --tokens")
            continue
        base = med if recipe == "bf16" else base
        row = dict(recipe=recipe, median_ms=med, min_ms=lo, max_ms=hi, path=path,
                   step_speedup=(base / med) if base else None, gemm_speedup=speed.get(recipe))
        rows.append(row)
        line = f"{recipe:12s} {med:9.2f} ms  [{lo:.2f}, {hi:.2f}]  {path}"
        if row["step_speedup"] and row["gemm_speedup"]:
            g, s = row["gemm_speedup"], row["step_speedup"]
            # If GEMMs are fraction f of the bf16 step and speed up by g: s = 1 / (1 - f + f / g).
            f = (1 - 1 / s) / (1 - 1 / g) if g != 1 else float("nan")
            row["gemm_fraction_of_step"] = f
            line += f"\n{'':12s} GEMM speedup {g:.2f}x, step speedup {s:.2f}x: {100 * (1 - f):.0f}% of the step is outside the GEMMs"
        print(line, flush=True)
    if a.json:
        with open(a.json, "w") as fo:
            json.dump(dict(model=dict(hidden=hidden, ffn=ffn, heads=heads, kv_heads=kv, gated=gated, tokens=tokens,
                                      seq_len=seq, preset=a.preset), gpu=torch.cuda.get_device_name(),
                           torch=torch.__version__, results=rows), fo, indent=1)


if __name__ == "__main__":
    main()
