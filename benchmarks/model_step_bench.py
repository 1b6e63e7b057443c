"""Whole training step of a Llama-style model per recipe, on the GPU: BF16 eager and torch.compile, every nibble.torch
recipe eager and compiled, torchao float8 (tensorwise, rowwise) compiled, all in one process on the same data.

    python3 benchmarks/model_step_bench.py --preset llama-3-8b --blocks 4 --json out/model-step.json
    python3 benchmarks/model_step_bench.py --preset codonfm-5b --grad-accum 4 --bench-json out/bench.json

The model (benchmarks/step_model.py): token embedding, --blocks blocks of (RMSNorm, fused QKV, rotary
positions, scaled_dot_product_attention with grouped-query heads, output projection, RMSNorm, SwiGLU or GELU
MLP), final RMSNorm, LM head, cross-entropy in float32; BF16 weights and activations; AdamW (fused=True on the
GPU). A step: --grad-accum micro-batches of forward + backward, optimizer step, zero_grad; CUDA events around
each step, --warmup steps first, median and range of --reps. Only the four linear layers of each block are
converted (nibble.torch.convert, torchao's convert_to_float8_training with a module filter); embedding, norms,
attention, LM head and loss stay BF16 for every row. Each nibble row records the layers' last_path: rows on the
torch emulation time the emulation, not nibble's kernels. With --grad-accum K > 1 every nibble recipe also
gets an eager row inside nibble.torch.weight_cache(model), which quantizes each weight once per step instead
of once per micro-batch; its per-micro-batch time beside the uncached row's is the weight quantization cost
the cache saves. A row that fails says why ("compile failed: ...", "out of memory ...", "torchao not
installed") and the run goes on. With --bench-json, each nibble row also gets the step speedup that
`nibble bench`'s GEMM-only speedup projects to (Amdahl: 1 / (1 - f + f / g), f = the fraction of the BF16
step in the converted layers' GEMMs, measured here with BF16 torch.mm on the same shapes).
"""
import argparse
import contextlib
import gc
import json
import os
import shlex
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PRESETS = os.path.join(HERE, "..", "data", "presets")
NIBBLE_RECIPES = ("fp8-current", "fp8-delayed", "fp8-block", "mxfp4", "quartet", "mxfp8", "nvfp4")
TORCHAO_RECIPES = ("tensorwise", "rowwise")
ENCODERS = ("codonfm-5b", "esm2-15b")  # bidirectional attention; the other presets are causal decoders
CONVERTED = ("qkv", "proj", "up", "down")  # the linear layers of a block (step_model.Block)


def build_parser():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="llama-3-8b",
                    help="model shape from data/presets (llama-3-8b, codonfm-5b, ...)")
    ap.add_argument("--blocks", type=int, default=4,
                    help="transformer blocks (default 4: llama-3-8b shapes with AdamW state fit an 80 GB GPU)")
    for name in ("hidden", "ffn", "heads", "kv-heads", "vocab", "micro-batch", "seq-len"):
        ap.add_argument(f"--{name}", type=int, help=f"override the preset's {name.replace('-', '_')}")
    ap.add_argument("--mlp", choices=("swiglu", "gelu"), help="override the preset's MLP (gated SwiGLU or plain GELU)")
    ap.add_argument("--attention", choices=("causal", "bidirectional"),
                    help="default: bidirectional for encoder presets (codonfm-5b, esm2-15b), else causal")
    ap.add_argument("--grad-accum", type=int, default=1, help="micro-batches per optimizer step")
    ap.add_argument("--recipes", default=",".join(NIBBLE_RECIPES), help="nibble recipes ('' for none)")
    ap.add_argument("--torchao", default=",".join(TORCHAO_RECIPES),
                    help="torchao float8 recipes, run under torch.compile ('' for none)")
    ap.add_argument("--no-compile", action="store_true", help="skip every torch.compile row")
    ap.add_argument("--backend", default="auto", choices=("auto", "emulated", "cuda", "reference"),
                    help="nibble.torch backend of the nibble rows; each row's path says which ran")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first (torch.compile compiles in the first)")
    ap.add_argument("--bench-json", help="`nibble bench --json` output for the same shapes: GEMM-only speedups")
    ap.add_argument("--bench-mode", default="step", choices=("step", "pre-quantized"),
                    help="which `nibble bench` speedups to project with (step: quantization included)")
    ap.add_argument("--json", help="write results here")
    ap.add_argument("--device", default="cuda", help="cuda; cpu only smoke-tests the script (no timing worth reading)")
    return ap


def resolve_model(a, ap):
    """The model configuration from the preset and the overrides, checked before anything is built."""
    p = os.path.join(PRESETS, a.preset + ".json")
    if not os.path.exists(p):
        ap.error(f"--preset {a.preset!r} not found in {PRESETS}; use one of "
                 + ", ".join(sorted(f[:-5] for f in os.listdir(PRESETS) if f.endswith(".json"))))
    with open(p) as f:
        cfg = json.load(f)
    pick = lambda flag, key, default=None: flag if flag is not None else cfg.get(key, default)  # noqa: E731
    m = dict(preset=a.preset, hidden=pick(a.hidden, "hidden"), ffn=pick(a.ffn, "ffn"), heads=pick(a.heads, "heads"),
             vocab=pick(a.vocab, "vocab"), micro_batch=pick(a.micro_batch, "micro_batch", 1),
             seq_len=pick(a.seq_len, "seq_len", 2048), blocks=a.blocks, grad_accum=a.grad_accum)
    m["kv_heads"] = pick(a.kv_heads, "kv_heads", m["heads"])
    m["gated"] = a.mlp == "swiglu" if a.mlp else bool(cfg.get("gated", False))
    m["causal"] = a.attention == "causal" if a.attention else a.preset not in ENCODERS
    for k in ("hidden", "ffn", "heads", "kv_heads", "vocab", "micro_batch", "seq_len", "blocks", "grad_accum"):
        if not isinstance(m[k], int) or m[k] < 1:
            ap.error(f"{k} is {m[k]!r}; it must be a positive integer (preset {a.preset} or --{k.replace('_', '-')})")
    if m["hidden"] % m["heads"] or m["heads"] % m["kv_heads"] or (m["hidden"] // m["heads"]) % 2:
        ap.error(f"hidden {m['hidden']} / heads {m['heads']} / kv_heads {m['kv_heads']}: hidden must be a multiple "
                 "of heads with an even head size, and heads a multiple of kv_heads")
    m["tokens_per_micro_batch"] = m["micro_batch"] * m["seq_len"]
    return m


def parameter_count(m):
    """Parameters of step_model.LanguageModel with configuration m (AdamW keeps two more copies)."""
    h, hd = m["hidden"], m["hidden"] // m["heads"]
    block = (h * (m["heads"] + 2 * m["kv_heads"]) * hd + m["heads"] * hd * h
             + h * (2 if m["gated"] else 1) * m["ffn"] + m["ffn"] * h + 2 * h)
    return m["blocks"] * block + 2 * m["vocab"] * h + h


def _first_line(e, limit=300):
    text = f"{type(e).__name__}: {e}".strip().splitlines()
    line = text[0] if text else type(e).__name__
    return line if len(line) <= limit else line[:limit] + " ..."


def _is_oom(e):
    import torch
    oom = getattr(torch.cuda, "OutOfMemoryError", None)
    return (oom is not None and isinstance(e, oom)) or "out of memory" in str(e).lower()


def time_steps(step, reps, warmup, device):
    """Per-step milliseconds of `reps` steps after `warmup` untimed ones: CUDA events on the GPU."""
    import torch
    times = []
    for i in range(warmup + reps):
        if device == "cuda":
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            step()
            e.record()
            torch.cuda.synchronize()
            ms = s.elapsed_time(e)
        else:  # --device cpu: a smoke test of the script, not a measurement
            t0 = time.perf_counter()
            step()
            ms = 1e3 * (time.perf_counter() - t0)
        if i >= warmup:
            times.append(ms)
    return times


def make_data(m, device):
    """grad_accum micro-batches of (tokens, targets), the same for every row."""
    import torch
    g = torch.Generator().manual_seed(1234)
    shape = (m["grad_accum"], m["micro_batch"], m["seq_len"])
    tok = torch.randint(0, m["vocab"], shape, generator=g)
    tgt = torch.randint(0, m["vocab"], shape, generator=g)
    return [(tok[i].to(device), tgt[i].to(device)) for i in range(m["grad_accum"])]


def build_model(m, device):
    import torch
    import step_model
    torch.manual_seed(0)
    with step_model.on_device(device):
        model = step_model.LanguageModel(m["vocab"], m["hidden"], m["ffn"], m["heads"], m["kv_heads"], m["gated"],
                                         m["blocks"], m["seq_len"], m["causal"])
    return model.to(device).to(torch.bfloat16)


def _block_linear(mod, fqn):
    """torchao's module_filter_fn: only the linear layers inside the blocks."""
    return fqn.startswith("blocks.") and fqn.rsplit(".", 1)[-1] in CONVERTED


def convert(model, spec, backend):
    """Swap the blocks' linear layers for the row's kind; returns how many were swapped."""
    if spec["kind"] == "nibble":
        import nibble.torch as nt
        nt.convert(model, spec["recipe"], check_finite=False, backend=backend)
        return sum(isinstance(mod, nt.Linear) for mod in model.modules())
    if spec["kind"] == "torchao":
        from torchao.float8 import Float8LinearConfig, convert_to_float8_training
        convert_to_float8_training(model, config=Float8LinearConfig.from_recipe_name(spec["recipe"]),
                                   module_filter_fn=_block_linear)
        return sum(type(mod).__name__ == "Float8Linear" for mod in model.modules())
    return 0


def make_optimizer(model, device):
    """AdamW, fused into one kernel per parameter group on the GPU (torch.optim.AdamW(fused=True));
    the CPU smoke test's torch has no fused AdamW."""
    import torch
    kw = dict(fused=True) if device == "cuda" else {}
    return torch.optim.AdamW(model.parameters(), lr=1e-5, **kw), "AdamW(fused=True)" if kw else "AdamW"


def layer_paths(model):
    """The distinct last_path / last_backward_path of the nibble layers, or None when none recorded one."""
    seen = []
    for mod in model.modules():
        for attr in ("last_path", "last_backward_path"):
            p = getattr(mod, attr, None) if hasattr(mod, "_weight_copies") else None
            if p and str(p) not in seen:
                seen.append(str(p))
    return "; ".join(seen) or None


def run_row(spec, m, data, a):
    """One row: a fresh model (same seed and data as every row), converted and compiled as `spec` says,
    timed over whole steps. Failures become the row's note."""
    import torch
    import nibble.torch as nt
    row = dict(name=spec["name"], kind=spec["kind"], recipe=spec["recipe"], compiled=spec["compiled"],
               weight_cache=spec.get("weight_cache", False), grad_accum=m["grad_accum"], median_ms=None)
    model = opt = fn = None
    try:
        if spec["kind"] == "torchao":
            try:
                import torchao.float8  # noqa: F401
            except ImportError as e:
                row["note"] = f"torchao not installed ({_first_line(e)})"
                return row
        if spec["compiled"] and not hasattr(torch, "compile"):
            row["note"] = f"compile failed: torch {torch.__version__} has no torch.compile"
            return row
        model = build_model(m, a.device)
        row["converted_layers"] = convert(model, spec, a.backend)
        opt, row["optimizer"] = make_optimizer(model, a.device)
        fn = torch.compile(model) if spec["compiled"] else model
        cache = nt.weight_cache if spec.get("weight_cache") else None
        k = m["grad_accum"]

        def step():
            with cache(model) if cache else contextlib.nullcontext():
                for tokens, targets in data:
                    (fn(tokens, targets) / k).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        times = time_steps(step, a.reps, a.warmup, a.device)
        med = statistics.median(times)
        tokens = m["tokens_per_micro_batch"] * k
        row.update(median_ms=med, min_ms=min(times), max_ms=max(times), spread=(max(times) - min(times)) / med,
                   per_micro_batch_ms=med / k, tokens_per_s=tokens / (med / 1e3), times_ms=times)
        if spec["kind"] == "nibble":
            row["path"] = layer_paths(model) or "not recorded (no nibble layer set last_path)"
        elif spec["kind"] == "torchao":
            row["path"] = f"torchao float8 {spec['recipe']} (Float8Linear)"
        else:
            row["path"] = "native bf16 (torch)"
    except Exception as e:  # noqa: BLE001 (one row's failure must not end the run)
        if _is_oom(e):
            row["note"] = (f"out of memory ({_first_line(e, 160)}); lower --blocks, --micro-batch or --seq-len")
        elif spec["compiled"]:
            row["note"] = f"compile failed: {_first_line(e)}"
        else:
            row["note"] = f"failed: {_first_line(e)}"
    finally:
        del model, opt, fn
        gc.collect()
        if spec["compiled"] and hasattr(torch, "_dynamo"):
            torch._dynamo.reset()  # drop the compiled graphs and the weights they hold
        if a.device == "cuda":
            torch.cuda.empty_cache()
    return row


def row_specs(a):
    nib = [r.strip() for r in a.recipes.split(",") if r.strip()]
    tao = [r.strip() for r in a.torchao.split(",") if r.strip()]
    compiled = [False] if a.no_compile else [False, True]
    specs = [dict(name="bf16" + (" compiled" if c else " eager"), kind="bf16", recipe="bf16", compiled=c)
             for c in compiled]
    for r in nib:
        specs.append(dict(name=f"nibble {r} eager", kind="nibble", recipe=r, compiled=False))
        if a.grad_accum > 1:
            specs.append(dict(name=f"nibble {r} eager weight_cache", kind="nibble", recipe=r, compiled=False,
                              weight_cache=True))
        if not a.no_compile:
            specs.append(dict(name=f"nibble {r} compiled", kind="nibble", recipe=r, compiled=True))
    if not a.no_compile:
        specs += [dict(name=f"torchao {r} compiled", kind="torchao", recipe=r, compiled=True) for r in tao]
    return specs


def converted_gemm_ms(m, reps, warmup, device):
    """BF16 torch.mm time of the converted layers' GEMMs in one step (fprop, dgrad, wgrad of the four
    linear layers, per block and micro-batch): the part of the BF16 step a recipe's GEMMs replace."""
    import torch
    hd = m["hidden"] // m["heads"]
    shapes = [(m["hidden"], (m["heads"] + 2 * m["kv_heads"]) * hd), (m["heads"] * hd, m["hidden"]),
              (m["hidden"], (2 if m["gated"] else 1) * m["ffn"]), (m["ffn"], m["hidden"])]
    t, ops = m["tokens_per_micro_batch"], []
    for i, o in shapes:
        x = torch.randn(t, i, device=device, dtype=torch.bfloat16)
        w = torch.randn(o, i, device=device, dtype=torch.bfloat16)
        dy = torch.randn(t, o, device=device, dtype=torch.bfloat16)
        ops += [(x, w.t()), (dy, w), (dy.t(), x)]

    def block_gemms():
        for x, y in ops:
            torch.mm(x, y)
    times = time_steps(block_gemms, reps, warmup, device)
    return statistics.median(times) * m["blocks"] * m["grad_accum"]


def add_speedups(rows, gemm_ms, bench):
    base = {c: next((r["median_ms"] for r in rows if r["kind"] == "bf16" and r["compiled"] == c
                     and r["median_ms"]), None) for c in (False, True)}
    for r in rows:
        if not r["median_ms"]:
            continue
        r["speedup_vs_bf16_eager"] = base[False] / r["median_ms"] if base[False] else None
        r["speedup_vs_bf16_compiled"] = base[True] / r["median_ms"] if base[True] else None
        if r.get("weight_cache"):  # the row pair: the same recipe eager without the cache
            plain = next((p for p in rows if p["kind"] == "nibble" and p["recipe"] == r["recipe"]
                          and not p["compiled"] and not p.get("weight_cache") and p["median_ms"]), None)
            if plain:
                r["uncached_per_micro_batch_ms"] = plain["per_micro_batch_ms"]
                r["weight_cache_saves_ms_per_micro_batch"] = plain["per_micro_batch_ms"] - r["per_micro_batch_ms"]
        g = bench["speedups"].get(r["recipe"]) if bench and r["kind"] == "nibble" else None
        b = base[r["compiled"]]
        if g and b and gemm_ms:
            f = min(gemm_ms / b, 1.0)  # GEMM fraction of the BF16 step of the same mode (eager or compiled)
            r.update(gemm_speedup=g, gemm_fraction_of_bf16_step=f, projected_speedup=1.0 / (1.0 - f + f / g),
                     projected_against="bf16 compiled" if r["compiled"] else "bf16 eager")


def _x(v):
    return "-" if v is None else f"{v:.3f}x"


def print_row(r):
    if not r["median_ms"]:
        print(f"{r['name']:36s} {r.get('note')}", flush=True)
        return
    print(f"{r['name']:36s} {r['median_ms']:9.2f} ms [{r['min_ms']:.2f}, {r['max_ms']:.2f}] "
          f"{r['per_micro_batch_ms']:8.2f} ms/micro-batch {r['tokens_per_s']:11.0f} tok/s  "
          f"vs bf16 eager {_x(r.get('speedup_vs_bf16_eager'))}, compiled {_x(r.get('speedup_vs_bf16_compiled'))}"
          + (f", projected {r['projected_speedup']:.2f}x" if r.get("projected_speedup") else "")
          + (f"  {r['path']}" if r["kind"] == "nibble" else ""), flush=True)


def main(argv=None):
    ap = build_parser()
    a = ap.parse_args(argv)
    folder = os.path.dirname(os.path.abspath(a.json)) if a.json else None
    if folder and not (os.path.isdir(folder) and os.access(folder, os.W_OK)):
        ap.error(f"--json {a.json}: folder {folder} does not exist or is not writable; create it first")
    for r in (x.strip() for x in a.recipes.split(",")):
        if r and r not in NIBBLE_RECIPES:
            ap.error(f"--recipes: {r!r} is not one of {', '.join(NIBBLE_RECIPES)}")
    for r in (x.strip() for x in a.torchao.split(",")):
        if r and r not in TORCHAO_RECIPES:
            ap.error(f"--torchao: {r!r} is not one of {', '.join(TORCHAO_RECIPES)}")
    if a.reps < 1 or a.warmup < 0:
        ap.error("--reps must be >= 1 and --warmup >= 0")
    m = resolve_model(a, ap)
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(HERE, "..", "python"))
    import torch
    from step_bench import gemm_speedups
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit("model_step_bench needs a CUDA GPU (timing with CUDA events); none is visible. "
                 "--device cpu smoke-tests the script")
    bench = gemm_speedups(a.bench_json, a.bench_mode) if a.bench_json else None
    if bench and bench["tokens"] not in (None, m["tokens_per_micro_batch"]):
        print(f"WARNING: {bench['file']} is for {bench['tokens']} tokens, a micro-batch here has "
              f"{m['tokens_per_micro_batch']}")
    try:
        import torchao
        tao_version = getattr(torchao, "__version__", "unknown")
    except ImportError:
        tao_version = None
    gpu = torch.cuda.get_device_name() if a.device == "cuda" else "cpu (smoke test)"
    print(f"model: {m['preset']} shapes, {m['blocks']} blocks, hidden {m['hidden']}, ffn {m['ffn']} "
          f"({'SwiGLU' if m['gated'] else 'GELU'}), heads {m['heads']}/{m['kv_heads']}, vocab {m['vocab']}, "
          f"{m['micro_batch']} x {m['seq_len']} tokens x {m['grad_accum']} micro-batches, "
          f"{'causal' if m['causal'] else 'bidirectional'}; {gpu}, torch {torch.__version__}, "
          f"torchao {tao_version or 'not installed'}", flush=True)
    data = make_data(m, a.device)
    try:
        gemm_ms = converted_gemm_ms(m, a.reps, a.warmup, a.device)
    except Exception as e:  # noqa: BLE001 (the projection is optional; the rows are not)
        print(f"converted-layer GEMM timing failed: {_first_line(e)}; no projection", flush=True)
        gemm_ms = None
    rows = []
    for spec in row_specs(a):
        rows.append(run_row(spec, m, data, a))
        add_speedups(rows, gemm_ms, bench)
        print_row(rows[-1])
    result = dict(benchmark="model step", gpu=gpu, torch=torch.__version__, torchao=tao_version,
                  command=shlex.join([os.path.basename(sys.executable)] + sys.argv if argv is None
                                     else ["model_step_bench.py"] + list(argv)),
                  model=dict(m, parameters=parameter_count(m),
                             tokens_per_step=m["tokens_per_micro_batch"] * m["grad_accum"]),
                  nibble_backend=a.backend, reps=a.reps, warmup=a.warmup, converted_gemm_ms_per_step=gemm_ms,
                  gemm_bench=bench, rows=rows,
                  note="median_ms: one optimizer step (grad_accum micro-batches of forward + backward, AdamW step, "
                       "zero_grad); speedups are BF16 median / row median; a nibble row whose path says "
                       "torch-emulated or cpu-reference times that emulation, not nibble's kernels; "
                       "projected_speedup = 1 / (1 - f + f / gemm_speedup), f = converted_gemm_ms_per_step / the "
                       "BF16 step of the same mode")
    if a.json:
        import step_report
        step_report.write_atomically(a.json, json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
