"""Training speed of the loss study's step, per scheme and model size, next to plain PyTorch:

    python3 train/speed.py --sizes xs,s --json speed.json      # on a GPU

Rows: `peer` is the same decoder (train/model.py) with torch's own modules (nn.RMSNorm, nn.Linear,
scaled_dot_product_attention) under BF16 autocast, torch.compile'd, trained by a plain loop with fused AdamW
and no nibble code: the ceiling of the bf16 scheme. Every other row trains through train/loop.py's Trainer,
the loop of the loss study (bf16 = torch's nn.Linear under autocast; the others nibble's recipes on its CUDA
kernels; each row names the path its layers ran).

Each configuration runs in its own process: all processes of a wave build, compile and warm up at the same
time (--warmup steps), then, one after another while the others wait idle, each times --steps steps
(torch.cuda.synchronize before and after, batch 128 x 512 tokens of random bytes). So compiling overlaps,
and no timing shares the GPU or the CPU with another configuration's work. tokens/s = steps x batch x
seq_len / seconds. Targets (printed with the table): bf16 >= 0.9 of the peer; every quantized scheme >= 0.6
of bf16's tokens/s at xs and >= 0.75 at s.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TARGETS = {"bf16_of_peer": 0.9, "quantized_of_bf16": {"xs": 0.6, "s": 0.75}}


def peer_trainer(layers, hidden, heads, lr, seq_len, device):
    """The plain-PyTorch step: train/model.py's decoder with nn.RMSNorm, compiled, fused AdamW; no nibble.
    (On CPU, a smoke test only: eager, FP32, and the model's own RMSNorm where torch has no nn.RMSNorm.)"""
    import contextlib
    import torch
    import torch.nn.functional as F
    from torch import nn
    sys.path.insert(0, HERE)
    from model import Decoder
    torch.manual_seed(0)
    model = Decoder(hidden=hidden, layers=layers, heads=heads, seq_len=seq_len)
    norm = "nn.RMSNorm" if hasattr(nn, "RMSNorm") else "train/model.py's RMSNorm (torch has no nn.RMSNorm)"
    if hasattr(nn, "RMSNorm"):
        for blk in model.blocks:
            blk.attn_norm, blk.mlp_norm = nn.RMSNorm(hidden, eps=1e-6), nn.RMSNorm(hidden, eps=1e-6)
        model.norm = nn.RMSNorm(hidden, eps=1e-6)
    model = model.to(device)
    cuda = device.type == "cuda"
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                            lr=lr, betas=(0.9, 0.95), **({"fused": True} if cuda else {}))
    fwd = torch.compile(model) if cuda else model
    autocast = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if cuda else contextlib.nullcontext

    def step(_i, x, y):
        with autocast():
            loss = F.cross_entropy(fwd(x).flatten(0, 1).float(), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.detach()
    path = f"torch nn.Linear + {norm}" + (" under bf16 autocast (no nibble)" if cuda else ", float32 (no nibble)")
    return step, ("torch", path, ""), "compiled" if cuda else "eager"


def child(scheme, size, a):
    """One configuration: build, compile, warm up, say READY, wait for GO, time, print the result as JSON."""
    import torch
    sys.path.insert(0, HERE)
    import loop
    layers, hidden, heads, lr = sizes_table(a)[size]
    device = torch.device(a.device)
    gen = torch.Generator(device=device).manual_seed(1)
    data = torch.randint(0, 256, (a.batch * 4, a.seq_len + 1), device=device, generator=gen)
    batches = [(data[i * a.batch:(i + 1) * a.batch, :-1], data[i * a.batch:(i + 1) * a.batch, 1:]) for i in range(4)]
    t0 = time.perf_counter()
    if scheme == "peer":
        step, paths, compile_note = peer_trainer(layers, hidden, heads, lr, a.seq_len, device)
    else:
        tr = loop.Trainer(scheme, layers, hidden, heads, lr, steps=10 ** 6, seq_len=a.seq_len, device=device,
                          backend=a.backend, log=lambda s: print(s, file=sys.stderr, flush=True))
        step = tr.step
    for i in range(a.warmup):
        step(i, *batches[i % 4])
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    if scheme != "peer":
        paths, compile_note = tr.paths(), tr.compile_note
    warm_s = time.perf_counter() - t0
    print("READY", flush=True)
    if sys.stdin.readline().strip() != "GO":
        return 1
    sync()
    t1 = time.perf_counter()
    for i in range(a.steps):
        loss = step(a.warmup + i, *batches[i % 4])
    sync()
    secs = time.perf_counter() - t1
    print(json.dumps(dict(scheme=scheme, size=size, n=loop.non_embedding_params(layers, hidden),
                          tokens_per_s=a.steps * a.batch * a.seq_len / secs, step_ms=1e3 * secs / a.steps,
                          steps=a.steps, warmup_s=round(warm_s, 1), final_loss=float(loss),
                          path_kind=paths[0], path=paths[1], backward_path=paths[2], compile=compile_note)),
          flush=True)
    return 0


def read_until(p, want):
    """The first line of p's output that `want` accepts (others are echoed to stderr), None at its end."""
    for line in p.stdout:
        if want(line):
            return line
        print(line, end="", file=sys.stderr)
    return None


def run_wave(configs, a):
    """Start every configuration of the wave, wait until all are warm, then time them one at a time."""
    procs = {}
    for scheme, size in configs:
        procs[(scheme, size)] = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--child", f"{scheme}:{size}", "--steps", str(a.steps),
             "--warmup", str(a.warmup), "--batch", str(a.batch), "--seq-len", str(a.seq_len), "--device", a.device,
             "--backend", a.backend] + [x for spec in a.size for x in ("--size", spec)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    ready = {}
    for key, p in procs.items():
        ready[key] = read_until(p, lambda line: line.strip() == "READY") is not None
        if not ready[key]:
            print(f"speed: {key[0]} at {key[1]}: did not start (exit {p.wait()})", flush=True)
    results = []
    for key, p in procs.items():
        if not ready[key]:
            results.append(dict(scheme=key[0], size=key[1], error=f"exit {p.returncode} before timing"))
            continue
        p.stdin.write("GO\n")
        p.stdin.flush()
        line = read_until(p, lambda line: line.startswith("{"))
        code = p.wait()
        try:
            r = json.loads(line)
        except (TypeError, json.JSONDecodeError):
            r = dict(scheme=key[0], size=key[1], error=f"exit {code} while timing")
        results.append(r)
        if "error" not in r:
            print(f"speed: {r['scheme']:12s} {r['size']:4s} {r['tokens_per_s'] / 1e3:9.0f}k tokens/s "
                  f"({r['step_ms']:.1f} ms/step, warm-up {r['warmup_s']} s, {r['compile']}, {r['path_kind']})",
                  flush=True)
    return results


def table(results):
    """Add fractions of the peer and of bf16, and whether each target is met; returns (rows, all_met)."""
    by = {(r["scheme"], r["size"]): r for r in results if "error" not in r}
    met = True
    for r in results:
        if "error" in r:
            met = False
            continue
        peer, bf16 = by.get(("peer", r["size"])), by.get(("bf16", r["size"]))
        r["of_peer"] = r["tokens_per_s"] / peer["tokens_per_s"] if peer else None
        r["of_bf16"] = r["tokens_per_s"] / bf16["tokens_per_s"] if bf16 else None
        target = None
        if r["scheme"] == "bf16":
            target, frac = TARGETS["bf16_of_peer"], r["of_peer"]
        elif r["scheme"] != "peer" and r["size"] in TARGETS["quantized_of_bf16"]:
            target, frac = TARGETS["quantized_of_bf16"][r["size"]], r["of_bf16"]
        if target is not None:
            r["target"] = target
            r["target_met"] = frac is not None and frac >= target
            met = met and r["target_met"]
    return results, met


def sizes_table(a):
    """loop.SIZES plus the --size NAME=L,H,HEADS,LR additions."""
    sys.path.insert(0, HERE)
    import loop
    return loop.sizes_with(a.size)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="xs,s")
    ap.add_argument("--schemes", default="peer,bf16,fp8-current,mxfp8,nvfp4,mxfp4,quartet")
    ap.add_argument("--steps", type=int, default=30, help="timed steps per configuration")
    ap.add_argument("--warmup", type=int, default=4, help="steps before timing (the first compiles)")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--json", default=None, help="write the table here")
    ap.add_argument("--device", default="cuda", help="cuda; cpu only smoke-tests the script (eager, emulated)")
    ap.add_argument("--backend", default="auto", help="nibble.torch backend of the recipe rows")
    ap.add_argument("--size", action="append", default=[], metavar="NAME=L,H,HEADS,LR", help="add a model size")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        scheme, size = a.child.split(":")
        return child(scheme, size, a)
    import torch
    t0 = time.perf_counter()
    bad = [s for s in a.sizes.split(",") if s not in sizes_table(a)]
    if bad:
        ap.error(f"unknown size(s) {bad}; valid: {', '.join(sizes_table(a))}")
    results = []
    for size in a.sizes.split(","):
        results += run_wave([(s, size) for s in a.schemes.split(",")], a)
        results, met = table(results)
        doc = dict(gpu=torch.cuda.get_device_name() if a.device == "cuda" else a.device, torch=torch.__version__, batch=a.batch, seq_len=a.seq_len,
                   steps=a.steps, warmup=a.warmup, date=time.strftime("%Y-%m-%d", time.gmtime()),
                   method="one process per configuration; timed one at a time with the others idle; random bytes",
                   targets=TARGETS, all_targets_met=met, rows=results)
        if a.json:  # after every wave, so a call cut short keeps the sizes measured
            with open(a.json, "w") as fh:
                json.dump(doc, fh, indent=1)
                fh.write("\n")
    print(f"\n{'scheme':12s} {'size':4s} {'tokens/s':>10s} {'of peer':>8s} {'of bf16':>8s}  target  path")
    for r in results:
        if "error" in r:
            print(f"{r['scheme']:12s} {r['size']:4s} {'-':>10s}  {r['error']}")
            continue
        tgt = "" if "target" not in r else f"{'met' if r['target_met'] else 'MISSED'} ({r['target']})"
        f = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
        print(f"{r['scheme']:12s} {r['size']:4s} {r['tokens_per_s']:10.0f} {f(r['of_peer']):>8s} "
              f"{f(r['of_bf16']):>8s}  {tgt:13s} {r['path_kind']}")
    if a.json:
        print(f"wrote {a.json}", file=sys.stderr)
    print(f"speed: {len(results)} configurations in {time.perf_counter() - t0:.0f} s; targets "
          f"{'all met' if met else 'NOT all met'}", flush=True)
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
