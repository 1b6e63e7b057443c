"""Forward+backward time of one transformer block per recipe on the GPU, next to the GEMM-only speedup.

    python3 benchmarks/step_bench.py --preset codonfm-5b --bench-json out/bench.json --json out/step.json
    python3 benchmarks/step_bench.py --hidden 4096 --ffn 14336 --heads 32 --kv-heads 8 --gated --tokens 8192

The block: RMSNorm, fused QKV, torch scaled_dot_product_attention (causal), output projection, RMSNorm,
MLP (gated SwiGLU or plain GELU), with the four linear layers swapped by nibble.torch.convert. Timing:
CUDA events around forward + backward, warm-up first, median of --reps. Norms, attention and
activations run in BF16 for every recipe. The recipe layers run nibble.torch's backend (--backend auto:
quartet, mxfp4, fp8-current, fp8-delayed and fp8-block on nibble's CUDA kernels and cuBLASLt FP8 GEMMs when
nibble._C was built with them; mxfp8 and nvfp4 on nibble's quantizers, exact BF16 decodes and BF16 GEMMs;
otherwise the torch emulation, quantize -> dequantize -> FP32 GEMM); each row's "path" says which ran,
and an emulated row's step time measures the emulation, not nibble's kernels. What is measured
for the question "does the GEMM speedup survive a step": the bf16 step, its 12 linear GEMMs alone (so
the fraction of the step outside the GEMMs), and, with --bench-json, the step speedup that nibble
bench's GEMM-only speedup projects to (Amdahl: 1 / (1 - f + f / g)).
The whole training step of a Llama-style model (embedding, N blocks, LM head, loss, AdamW), next to
torch.compile and torchao: benchmarks/model_step_bench.py.
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import step_report  # noqa: E402

PRESETS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "presets")
torch = nt = step_model = None  # imported by _import_torch() once the arguments parse: --help needs no torch


def _import_torch():
    global torch, nt, step_model
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import nibble.torch as nt
    import step_model


DEVICE = "cuda"


def _events_ms(fn, reps, warmup):
    times = []
    for i in range(warmup + reps):
        if DEVICE == "cpu":  # --device cpu: a smoke test of the script, not a measurement
            t0 = time.perf_counter()
            fn()
            ms = 1e3 * (time.perf_counter() - t0)
        else:
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            torch.cuda.synchronize()
            ms = s.elapsed_time(e)
        if i >= warmup:
            times.append(ms)
    return statistics.median(times), min(times), max(times)


def make_block(hidden, ffn, heads, kv, gated):
    """The BF16 block, initialised on the device itself where torch allows it (torch >= 2.0: a 5B-class
    block has ~200 M parameters, slow to initialise on the host)."""
    with step_model.on_device(DEVICE):
        return step_model.Block(hidden, ffn, heads, kv, gated).to(DEVICE).to(torch.bfloat16)


def _device_name():
    return torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu (smoke test)"


def time_block(block, x, reps, warmup):
    """Forward + backward of the block (input gradient and all weight gradients), CUDA events."""
    def step():
        block.zero_grad(set_to_none=True)
        block(x.detach().requires_grad_(True)).float().square().mean().backward()
    return _events_ms(step, reps, warmup)


def time_gemms(block, tokens, reps, warmup):
    """The block's 12 linear-layer GEMMs alone (fprop, dgrad, wgrad of its four nn.Linear), native BF16
    torch.mm on the same shapes: the GEMM part of the bf16 step."""
    ops = []
    for lin in (block.qkv, block.proj, block.up, block.down):
        o, i = lin.weight.shape
        x = torch.randn(tokens, i, device=DEVICE, dtype=torch.bfloat16)
        w = torch.randn(o, i, device=DEVICE, dtype=torch.bfloat16)
        dy = torch.randn(tokens, o, device=DEVICE, dtype=torch.bfloat16)
        ops += [(x, w.t()), (dy, w), (dy.t(), x)]  # fprop X W^T, dgrad dY W, wgrad dY^T X

    def run():
        for a, b in ops:
            torch.mm(a, b)
    return _events_ms(run, reps, warmup)


def gemm_speedups(path, mode):
    """recipe -> GEMM-only speedup over bf16 from a `nibble bench --json` file (its `summary`, in `mode`:
    step = quantization included, pre-quantized = GEMMs alone), plus whether the file is a prediction, its
    token count and its bf16 layer_ms."""
    with open(path) as f:
        doc = json.load(f)
    by_mode, bf16_ms = {}, None
    for row in doc.get("summary", []):
        if isinstance(row.get("speedup_vs_bf16"), (int, float)):
            by_mode.setdefault(row.get("mode"), {})[row["recipe"]] = float(row["speedup_vs_bf16"])
        if row.get("recipe") == "bf16" and row.get("mode") == mode:
            bf16_ms = row.get("layer_ms")
    return dict(speedups=by_mode.get(mode, {}), speedups_by_mode=by_mode, predicted=bool(doc.get("predicted")), tokens=doc.get("tokens"), mode=mode,
                gpu=doc.get("gpu"), bf16_layer_ms=bf16_ms, file=os.path.basename(path))


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
    ap.add_argument("--bench-mode", default="step", choices=("step", "pre-quantized"),
                    help="which `nibble bench` speedups to project with (step: quantization included)")
    ap.add_argument("--backend", default="auto", choices=("auto", "emulated", "cuda"),
                    help="nibble.torch backend: auto = nibble's CUDA kernels where they exist (quartet, mxfp4, "
                         "fp8-current, fp8-delayed, fp8-block, mxfp8, nvfp4), else the "
                         "torch emulation; each row's path says which ran")
    ap.add_argument("--json", help="write results here")
    ap.add_argument("--html", help="write a self-contained HTML report here (benchmarks/step_report.py)")
    ap.add_argument("--device", default="cuda", help="cuda; cpu only smoke-tests the script (no timing worth reading)")
    a = ap.parse_args()
    _import_torch()
    for flag, path in (("--json", a.json), ("--html", a.html)):  # before the long run, not after it
        folder = os.path.dirname(os.path.abspath(path)) if path else None
        if folder and not (os.path.isdir(folder) and os.access(folder, os.W_OK)):
            ap.error(f"{flag} {path}: folder {folder} does not exist or is not writable; create it first")
    global DEVICE
    DEVICE = a.device
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
    if DEVICE == "cuda" and not torch.cuda.is_available():
        sys.exit("step_bench needs a CUDA GPU (timing with CUDA events); none is visible")
    bench = gemm_speedups(a.bench_json, a.bench_mode) if a.bench_json else None
    speed = bench["speedups"] if bench else {}
    if bench and bench["tokens"] not in (None, tokens):
        print(f"WARNING: {bench['file']} is for {bench['tokens']} tokens, this run uses {tokens}")
    print(f"block: hidden {hidden}, ffn {ffn}{' (gated)' if gated else ''}, heads {heads}/{kv}, {tokens} tokens "
          f"({tokens // seq} x {seq}), {_device_name()}, torch {torch.__version__}", flush=True)
    x = torch.randn(tokens // seq, seq, hidden, device=DEVICE, dtype=torch.bfloat16)
    torch.manual_seed(0)
    ref = make_block(hidden, ffn, heads, kv, gated)
    g_med, g_lo, g_hi = time_gemms(ref, tokens, a.reps, a.warmup)
    del ref
    rows, base = [], None
    for recipe in [r.strip() for r in a.recipes.split(",") if r.strip()]:
        torch.manual_seed(0)
        # Norms, attention and activations run in BF16 for every recipe; only the four linear layers differ.
        block = make_block(hidden, ffn, heads, kv, gated)
        if recipe == "bf16":
            path = "native bf16 (torch)"  # the real baseline: native BF16 GEMMs, not an emulation
        else:
            nt.convert(block, recipe, check_finite=False, backend=a.backend)
            path = None  # read from the layers after the timed runs: which backend really ran
        try:
            med, lo, hi = time_block(block, x, a.reps, a.warmup)
        except torch.cuda.OutOfMemoryError if hasattr(torch.cuda, "OutOfMemoryError") else MemoryError:
            print(f"{recipe}: out of memory at {tokens} tokens; lower --tokens", flush=True)
            del block
            torch.cuda.empty_cache()
            continue
        if path is None:
            paths = sorted({str(getattr(m, "last_path", "")) for m in block.modules() if hasattr(m, "last_path")})
            path = "; ".join(p for p in paths if p) or "unknown"
        del block
        torch.cuda.empty_cache()
        row = dict(recipe=recipe, median_ms=med, min_ms=lo, max_ms=hi, path=path,
                   gemm_speedup=speed.get(recipe),
                   gemm_speedup_pre_quantized=bench["speedups_by_mode"].get("pre-quantized", {}).get(recipe)
                   if bench else None)
        line = f"{recipe:12s} {med:9.2f} ms  [{lo:.2f}, {hi:.2f}]  {path}"
        if recipe == "bf16":
            base = med
            f = g_med / med
            row.update(gemm_ms=g_med, gemm_fraction_of_step=f)
            line += (f"\n{'':12s} its 12 linear GEMMs alone: {g_med:.2f} ms = {100 * f:.0f}% of the step; "
                     f"{100 * (1 - f):.0f}% is outside the GEMMs (attention, norms, activations, launch gaps)")
            if bench and bench["bf16_layer_ms"]:
                line += f"\n{'':12s} ({bench['file']} bf16 layer_ms {bench['bf16_layer_ms']:.2f} for the same GEMMs)"
        else:
            key = "emulated_step_vs_bf16" if ("torch-emulated" in path or "cpu-reference" in path) else "step_speedup_vs_bf16"
            row[key] = base / med if base else None
            if base and row["gemm_speedup"]:
                # GEMMs are fraction f of the bf16 step; if they alone speed up by g: s = 1 / (1 - f + f / g).
                f, g = g_med / base, row["gemm_speedup"]
                s_proj = 1.0 / (1.0 - f + f / g)
                row["projected_step_speedup"] = s_proj
                src = f"nibble bench, {'PREDICTED' if bench['predicted'] else 'measured'}, {bench['mode']} mode"
                pre = row["gemm_speedup_pre_quantized"]
                line += (f"\n{'':12s} GEMM speedup {g:.2f}x ({src}"
                         + (f"; {pre:.2f}x without quantization" if pre and bench["mode"] == "step" else "")
                         + f"), projected step speedup {s_proj:.2f}x: {100 * (1 - f):.0f}% of the bf16 step is "
                         "outside the GEMMs")
        rows.append(row)
        print(line, flush=True)
    result = dict(model=dict(hidden=hidden, ffn=ffn, heads=heads, kv_heads=kv, gated=gated, tokens=tokens,
                             seq_len=seq, preset=a.preset, causal=True),
                  gpu=_device_name(), torch=torch.__version__, reps=a.reps, warmup=a.warmup,
                  bf16_gemm_ms=dict(median=g_med, min=g_lo, max=g_hi), gemm_bench=bench, results=rows,
                  note="each row's path says which backend ran: nibble's CUDA kernels, or nibble.torch's torch "
                       "emulation (quantize-dequantize + FP32 GEMM), whose step time measures that emulation; "
                       "projected_step_speedup = 1 / (1 - f + f / gemm_speedup) with f the measured GEMM "
                       "fraction of the native bf16 step")
    if a.json:
        step_report.write_atomically(a.json, json.dumps(result, indent=1))
    if a.html:
        step_report.write_atomically(a.html, step_report.render_html(result))

if __name__ == "__main__":
    main()
