"""The loss study's plan runner (docs/training.md, "Loss study"): Llama-style decoders (train/model.py) at
four sizes x 10/25/50 tokens per non-embedding parameter x seven recipes, two seeds at the smallest
size, one run after another in this process, cheapest first:

    python3 train/plan.py --dry-run                  # the plan, tokens and (once rows exist) estimated seconds
    python3 train/plan.py --max-seconds 540          # on a GPU: runs until the next run would not fit
    python3 train/study_table.py data/law/loss-study/runs.csv   # losses, gaps to bf16 over the seed spread
    build/nibble law fit data/law/loss-study/runs.csv --base-scheme bf16 --confidence 0.9

Resumable: every finished run appends one row to --csv (columns scheme,n,d,loss for `nibble law fit`,
then the run's metadata); a run whose key is already there is skipped, so the same command continues
the plan. A run stopped by --max-seconds writes nothing (no partial row) and starts over next time.
A diverged run (NaN/inf) goes to failed.csv beside --csv, skipped afterwards unless --retry-failed.
Quantized recipes must run on nibble's CUDA kernels: a run whose layers report an emulated path is
refused (no row) unless --allow-emulation, and every row names the path its layers reported.

Every run: same hyperparameters for every recipe (per-size learning rate, AdamW (0.9, 0.95), weight
decay 0.1 on matrices, cosine schedule to 10% with linear warm-up, gradient clipping 1.0), same initial
weights and data order for a given seed. BF16 autocast (CUDA) for everything outside the recipe GEMMs;
the nibble layers run outside autocast, as the recipe decides their precision. The bf16 scheme is
torch's own nn.Linear under that autocast. The validation loss is measured on one fixed slice of the
validation split (the same windows for every run).
"""
import argparse
import contextlib
import csv
import json
import math
import os
import shutil
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, HERE)
import nibble.torch as nt  # noqa: E402
from corpus import batch_order, load_named, windows  # noqa: E402
from model import Decoder  # noqa: E402

# name -> (layers, hidden, heads, peak learning rate); head size 64; every width a multiple of 32
# (the block of quartet's and mxfp4's inner dimension) and every FFN width a multiple of 128.
SIZES = {"xs": (4, 256, 4, 3e-3), "s": (6, 320, 5, 2.5e-3), "m": (6, 448, 7, 2e-3), "l": (8, 512, 8, 1.5e-3)}
# label (the `scheme` of `nibble law fit`) -> (nibble recipe or None for torch's BF16, recipe options)
SCHEMES = {
    "bf16": (None, {}),
    "fp8-current": ("fp8-current", {}),
    "mxfp8": ("mxfp8", {}),
    "nvfp4": ("nvfp4", {}),
    "mxfp4": ("mxfp4", {}),
    "quartet": ("quartet", {"backward_rounding": "nearest"}),
    "quartet-sr": ("quartet", {"backward_rounding": "stochastic"}),
}
RATIOS = (10, 25, 50)
SEEDS_SMALLEST = (0, 1)
DEFAULT_CSV = os.path.join(HERE, "..", "data", "law", "loss-study", "runs.csv")
COLUMNS = ["run", "scheme", "n", "d", "loss", "recipe", "options", "seed", "size", "layers", "hidden", "heads",
           "n_params", "n_total_params", "tokens", "tokens_per_param", "val_loss", "train_loss", "steps", "batch",
           "seq_len", "lr", "tokens_per_s", "wall_s", "train_s", "eval_s", "compile", "path_kind", "path",
           "backward_path", "gpu", "torch", "corpus", "finished_utc"]
# The settings every row of one CSV must share (a different corpus or batch shape is another study).
STUDY_FIELDS = ("batch", "seq_len", "corpus")


def non_embedding_params(layers, hidden):
    """As Decoder.non_embedding_params counts them: per block QKV + out (4 h^2), SwiGLU (3 h f), 2 norms; final norm."""
    ffn = int(math.ceil(hidden * 8 / 3 / 128) * 128)
    return layers * (4 * hidden * hidden + 3 * hidden * ffn + 2 * hidden) + hidden


def make_plan(sizes=tuple(SIZES), ratios=RATIOS, schemes=tuple(SCHEMES), batch=128, seq_len=512,
              seeds_smallest=SEEDS_SMALLEST, max_steps=None, table=None):
    """The runs, cheapest first (compute N x tokens), then seed, then scheme in SCHEMES order. max_steps
    (testing) caps every run's steps; its row then records the tokens it really trained on."""
    table = table or SIZES
    smallest = min(sizes, key=lambda s: non_embedding_params(*table[s][:2]))
    runs = []
    for size in sizes:
        layers, hidden, heads, lr = table[size]
        n = non_embedding_params(layers, hidden)
        for ratio in ratios:
            steps = max(1, math.ceil(ratio * n / (batch * seq_len)))
            steps = min(steps, max_steps) if max_steps else steps
            for seed in (seeds_smallest if size == smallest else seeds_smallest[:1]):
                for scheme in schemes:
                    runs.append(dict(run=f"{scheme}-{size}-{ratio}tpp-s{seed}", scheme=scheme, size=size,
                                     layers=layers, hidden=hidden, heads=heads, lr=lr, n=n, ratio=ratio, seed=seed,
                                     steps=steps, tokens=steps * batch * seq_len))
    order = {s: i for i, s in enumerate(SCHEMES)}
    return sorted(runs, key=lambda r: (r["n"] * r["tokens"], r["seed"], order.get(r["scheme"], 99)))


def read_rows(path):
    """The complete rows of a runs CSV ([] when absent). A last line without its newline (a write cut off
    by a kill) is not a row: it is dropped from the file with a message."""
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        text = f.read()
    if text and not text.endswith("\n"):
        keep = text[:text.rfind("\n") + 1]
        print(f"plan: {path}: dropping an incomplete last line ({len(text) - len(keep)} bytes)", flush=True)
        with open(path, "w", newline="") as f:
            f.write(keep)
        text = keep
    return list(csv.DictReader(text.splitlines()))


def append_row(path, row, columns):
    """One complete line per run, written in a single write and flushed to disk; header when the file is new."""
    import io
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    if new:
        w.writeheader()
    w.writerow({k: row.get(k, "") for k in columns})
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "a", newline="") as f:
        f.write(buf.getvalue())
        f.flush()
        os.fsync(f.fileno())


def check_study(rows, settings, path):
    """Existing rows must come from the same study settings (batch, seq_len, corpus)."""
    for r in rows:
        for k in STUDY_FIELDS:
            if k in r and str(r[k]) != str(settings[k]):
                raise SystemExit(f"plan: {path} row {r.get('run')!r} has {k}={r[k]}, this call {k}={settings[k]}: "
                                 f"one CSV holds one study; pass --csv with another file or the same --{k.replace('_', '-')}")


def estimate_seconds(run, rates, table=None):
    """Seconds for `run` from measured tokens/s {(scheme, size): rate}: the same scheme and size, else the
    same scheme at another size scaled by N (per-token work grows with N), else None (unknown)."""
    r = rates.get((run["scheme"], run["size"]))
    if r:
        return run["tokens"] / r
    table = table or SIZES
    other = [(s, v) for (sch, s), v in rates.items() if sch == run["scheme"] and v and s in table]
    if not other:
        return None
    s, v = min(other, key=lambda sv: abs(math.log(non_embedding_params(*table[sv[0]][:2]) / run["n"])))
    return run["tokens"] / (v * non_embedding_params(*table[s][:2]) / run["n"])


def lr_at(step, steps, peak, warmup):
    if step < warmup:
        return peak * (step + 1) / warmup
    p = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))


class OutsideAutocast(nn.Module):
    """Runs a nibble layer with autocast off: its recipe, not autocast, decides its GEMMs' precision."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        with torch.autocast(x.device.type, enabled=False):
            return self.inner(x)


def build(run, args, device):
    torch.manual_seed(run["seed"])
    model = Decoder(hidden=run["hidden"], layers=run["layers"], heads=run["heads"], seq_len=args.seq_len).to(device)
    recipe, opts = SCHEMES[run["scheme"]]
    if recipe is not None:
        nt.convert(model, recipe, backend=args.backend, **opts)
        for name, m in list(model.named_modules()):
            if isinstance(m, nt.Linear):
                parent = model.get_submodule(name.rsplit(".", 1)[0]) if "." in name else model
                setattr(parent, name.rsplit(".", 1)[-1], OutsideAutocast(m))
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    extra = {"fused": True} if device.type == "cuda" else {}
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                            lr=run["lr"], betas=(0.9, 0.95), **extra)
    return model, opt


def layer_paths(model, run, autocast_on):
    """(kind, forward paths, backward paths): kind "cuda" when every nibble layer ran nibble's CUDA kernels,
    "emulated" when any ran the torch emulation or the CPU reference, "torch" for the bf16 scheme."""
    layers = [m for m in model.modules() if isinstance(m, nt.Linear)]
    if not layers:
        return "torch", "torch nn.Linear" + (" under bf16 autocast" if autocast_on else " (float32, no autocast)"), ""
    fwd = sorted({str(m.last_path) for m in layers})
    bwd = sorted({str(m.last_backward_path) for m in layers})
    kind = "cuda" if all(p.startswith("cuda") for p in fwd + bwd) else "emulated"
    return kind, " || ".join(fwd), " || ".join(bwd)


class Stop(Exception):
    """A run stopped before its end: no row."""


def train_run(run, args, data, device, deadline, log):
    """Train one run; returns its row. Raises Stop (deadline, refused emulation) or nt.NonFiniteError."""
    train, val, val_starts, corpus_name = data
    t_start = time.perf_counter()
    amp = device.type == "cuda" and args.amp == "bf16"
    autocast = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if amp else contextlib.nullcontext
    model, opt = build(run, args, device)
    fwd = model
    compile_note = "eager"
    if args.compile != "off" and hasattr(torch, "compile") and device.type == "cuda":
        fwd, compile_note = torch.compile(model), "compiled"
    steps, warmup = run["steps"], max(1, round(args.warmup_fraction * run["steps"]))
    order = batch_order(len(train), args.seq_len, args.batch, steps, 1000 + run["seed"]).to(device)
    eval_at = {steps - 1} | {round(steps * k / (args.evals + 1)) for k in range(1, args.evals + 1)}
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    def evaluate():
        model.eval()
        total = torch.zeros((), device=device, dtype=torch.float64)
        with torch.no_grad(), autocast():
            for i in range(0, len(val_starts), args.batch):
                x, y = windows(val, val_starts[i:i + args.batch], args.seq_len)
                total += F.cross_entropy(fwd(x).flatten(0, 1).float(), y.flatten(), reduction="sum").double()
        model.train()
        return float(total) / (len(val_starts) * args.seq_len)

    def step_fn(step):
        for g in opt.param_groups:
            g["lr"] = lr_at(step, steps, run["lr"], warmup)
        x, y = windows(train, order[step], args.seq_len)
        with autocast():
            loss = F.cross_entropy(fwd(x).flatten(0, 1).float(), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.detach()

    curve, eval_s, losses = [], 0.0, []
    try:
        loss = step_fn(0)
    except Exception as e:  # noqa: BLE001  a model the compiler cannot take trains eager, and says so
        if compile_note != "compiled" or isinstance(e, nt.NonFiniteError):
            raise
        log(f"  {run['run']}: torch.compile failed ({type(e).__name__}: {str(e).splitlines()[0][:160]}); eager")
        torch._dynamo.reset()
        model, opt = build(run, args, device)
        fwd, compile_note = model, f"eager (compile failed: {type(e).__name__})"
        loss = step_fn(0)
    sync()
    kind, path, bpath = layer_paths(model, run, amp)
    if kind == "emulated" and not args.allow_emulation:
        raise Stop(f"refused: its layers ran emulated ({path}); nibble's CUDA kernels are needed "
                   "(build nibble._C with CUDA, NIBBLE_BUILD_DIR), or pass --allow-emulation")
    first_s = time.perf_counter() - t_start
    losses.append(loss)
    t_steady, steady_from = time.perf_counter(), 1
    for step in range(1, steps):
        if step in eval_at and step != steps - 1:
            te = time.perf_counter()
            nt.check_finite(model)
            curve.append((step, evaluate()))
            eval_s += time.perf_counter() - te
            log(f"  {run['run']}: step {step}/{steps} val {curve[-1][1]:.4f}")
        if step % args.check_every == 0:
            sync()
            now = time.perf_counter()
            rate = (step - steady_from) / max(1e-9, now - t_steady - eval_s)
            end = now + (steps - step) / max(rate, 1e-9) + eval_s / max(1, len(curve)) + 1.0
            if deadline is not None and end > deadline:
                raise Stop(f"stopped at step {step}/{steps}: at {rate:.2f} steps/s it would end "
                           f"{end - deadline:.0f} s past the time limit (no row written)",
                           dict(tokens_per_s=rate * args.batch * args.seq_len))
        losses.append(step_fn(step))
    sync()
    train_s = time.perf_counter() - t_start - eval_s
    steady_s = time.perf_counter() - t_steady - eval_s
    te = time.perf_counter()
    nt.check_finite(model)
    val_loss = evaluate()
    eval_s += time.perf_counter() - te
    curve.append((steps, val_loss))
    if not math.isfinite(val_loss):
        raise nt.NonFiniteError(f"final validation loss is {val_loss}")
    kind, path, bpath = layer_paths(model, run, amp)
    tail = torch.stack(losses[-max(1, steps // 50):]).float().mean().item()
    tokens = steps * args.batch * args.seq_len
    n = model.non_embedding_params()
    assert n == run["n"], (n, run["n"])
    recipe, opts = SCHEMES[run["scheme"]]
    row = dict(run=run["run"], scheme=run["scheme"], n=n, d=tokens, loss=f"{val_loss:.6f}",
               recipe=recipe or "torch-bf16", options=json.dumps(opts, sort_keys=True) if opts else "",
               seed=run["seed"], size=run["size"], layers=run["layers"], hidden=run["hidden"], heads=run["heads"],
               n_params=n, n_total_params=sum(p.numel() for p in model.parameters()), tokens=tokens,
               tokens_per_param=f"{tokens / n:.3f}", val_loss=f"{val_loss:.6f}", train_loss=f"{tail:.6f}",
               steps=steps, batch=args.batch, seq_len=args.seq_len, lr=run["lr"],
               tokens_per_s=f"{(steps - steady_from) * args.batch * args.seq_len / max(steady_s, 1e-9):.0f}",
               wall_s=f"{time.perf_counter() - t_start:.1f}", train_s=f"{train_s:.1f}", eval_s=f"{eval_s:.1f}",
               compile=compile_note + f" (first step {first_s:.1f} s)", path_kind=kind, path=path,
               backward_path=bpath, gpu=torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
               torch=torch.__version__, corpus=corpus_name,
               finished_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    return row, curve


def main(argv=None):
    t0 = time.perf_counter()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--csv", default=DEFAULT_CSV)
    ap.add_argument("--max-seconds", type=float, default=None,
                    help="wall-clock limit of this call from start-up: no run starts that is estimated not to fit, "
                         "a run that turns out not to fit stops (no row)")
    ap.add_argument("--sizes", default=",".join(SIZES), help="comma list of " + ", ".join(SIZES))
    ap.add_argument("--ratios", default=",".join(map(str, RATIOS)), help="tokens per non-embedding parameter")
    ap.add_argument("--schemes", default=",".join(SCHEMES), help="comma list of " + ", ".join(SCHEMES))
    ap.add_argument("--seeds", default=",".join(map(str, SEEDS_SMALLEST)), help="seeds of the smallest size "
                    "(the others take the first)")
    ap.add_argument("--size", action="append", default=[], metavar="NAME=L,H,HEADS,LR",
                    help="add a model size (layers, hidden, heads, peak learning rate), e.g. for a quick test")
    ap.add_argument("--max-steps", type=int, default=None, help="testing: cap every run's steps")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--corpus", default="auto", help="linux (data/corpus, packed), stdlib (Python's), auto (linux "
                    "when packed), or a folder of .py files")
    ap.add_argument("--val-windows", type=int, default=256, help="windows of the fixed validation slice")
    ap.add_argument("--evals", type=int, default=3, help="validation points during a run (plus the final one)")
    ap.add_argument("--warmup-fraction", type=float, default=0.05)
    ap.add_argument("--check-every", type=int, default=50, help="steps between time checks (one host sync each)")
    ap.add_argument("--compile", choices=("auto", "off"), default="auto",
                    help="auto: torch.compile on CUDA, eager when compiling fails (the row says which ran)")
    ap.add_argument("--amp", choices=("bf16", "off"), default="bf16", help="autocast outside the recipe GEMMs (CUDA)")
    ap.add_argument("--backend", default="auto", help="nibble.torch backend (auto: CUDA kernels where they exist)")
    ap.add_argument("--allow-emulation", action="store_true",
                    help="accept quantized runs on the torch emulation / CPU reference (labelled in the row)")
    ap.add_argument("--retry-failed", action="store_true", help="rerun runs recorded in failed.csv")
    ap.add_argument("--limit", type=int, default=None, help="at most this many runs in this call")
    ap.add_argument("--copy-to", default=None, help="copy the CSVs into this folder after every run (e.g. $OUT)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dry-run", action="store_true", help="print the plan (tokens, estimates) and exit")
    a = ap.parse_args(argv)
    table = dict(SIZES)
    for spec in a.size:
        name, _, vals = spec.partition("=")
        try:
            l, h, hd, lr = vals.split(",")
            table[name] = (int(l), int(h), int(hd), float(lr))
        except ValueError:
            ap.error(f"--size {spec!r}: expected NAME=LAYERS,HIDDEN,HEADS,LR, e.g. tiny=1,64,2,1e-3")
    sizes = [s for s in a.sizes.split(",") if s]
    schemes = [s for s in a.schemes.split(",") if s]
    for bad, valid, what in ((set(sizes) - set(table), table, "size"), (set(schemes) - set(SCHEMES), SCHEMES, "scheme")):
        if bad:
            ap.error(f"unknown {what}(s) {sorted(bad)}; valid: {', '.join(valid)}")
    plan = make_plan(sizes, [int(r) for r in a.ratios.split(",")], schemes, a.batch, a.seq_len,
                     tuple(int(s) for s in a.seeds.split(",")), a.max_steps, table)
    rows = read_rows(a.csv)
    failed_csv = os.path.join(os.path.dirname(os.path.abspath(a.csv)), "failed.csv")
    curves_path = os.path.join(os.path.dirname(os.path.abspath(a.csv)), "curves.jsonl")
    failed = {r["run"] for r in read_rows(failed_csv)} if not a.retry_failed else set()
    done = {r["run"] for r in rows}
    rates = {}
    for r in rows:
        try:
            rates[(r["scheme"], r["size"])] = float(r["tokens_per_s"])
        except (KeyError, ValueError):
            pass
    todo = [r for r in plan if r["run"] not in done and r["run"] not in failed]
    total = sum(r["tokens"] for r in plan)
    print(f"plan: {len(plan)} runs, {total / 1e9:.2f} G tokens in all; {len(plan) - len(todo)} done or failed "
          f"({a.csv}); {len(todo)} to run, {sum(r['tokens'] for r in todo) / 1e9:.2f} G tokens", flush=True)
    if a.dry_run:
        print(f"{'run':26s} {'N':>10s} {'tokens':>13s} {'steps':>6s}  estimate")
        for r in plan:
            est = estimate_seconds(r, rates, table)
            state = "done" if r["run"] in done else "failed" if r["run"] in failed else \
                (f"~{est:.0f} s" if est else "unknown (no measured rate yet)")
            print(f"{r['run']:26s} {r['n']:10,d} {r['tokens']:13,d} {r['steps']:6d}  {state}")
        return 0
    device = torch.device(a.device)
    train, val, desc = load_named(a.corpus)
    corpus_name = desc["name"]
    settings = dict(batch=a.batch, seq_len=a.seq_len, corpus=corpus_name)
    check_study(rows, settings, a.csv)
    train, val = train.to(device), val.to(device)
    val_starts = batch_order(len(val), a.seq_len, a.val_windows, 1, 1234).flatten().to(device)
    print(f"corpus {desc}; device {device}" + (f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda"
          else "") + f", torch {torch.__version__}; loaded in {time.perf_counter() - t0:.1f} s", flush=True)
    deadline = t0 + a.max_seconds if a.max_seconds else None
    refused, ran = {}, 0
    for r in todo:
        if a.limit is not None and ran >= a.limit:
            break
        if r["scheme"] in refused:
            continue
        est = estimate_seconds(r, rates, table)
        left = None if deadline is None else deadline - time.perf_counter()
        if left is not None and est is not None and est * 1.1 + 15 > left:
            print(f"  {r['run']}: skipped in this call: estimated {est:.0f} s, {left:.0f} s left", flush=True)
            continue
        if left is not None and left < 20:
            print("plan: time limit reached", flush=True)
            break
        print(f"  {r['run']}: N {r['n']:,}, {r['tokens']:,} tokens ({r['steps']} steps)"
              + (f", estimated {est:.0f} s" if est else ""), flush=True)
        ran += 1
        try:
            row, curve = train_run(r, a, (train, val, val_starts, corpus_name), device, deadline,
                                   lambda s: print(s, flush=True))
        except Stop as e:
            print(f"  {r['run']}: {e.args[0]}", flush=True)
            if len(e.args) > 1:
                rates[(r["scheme"], r["size"])] = e.args[1]["tokens_per_s"]
            if e.args[0].startswith("refused"):
                refused[r["scheme"]] = e.args[0]
            continue
        except nt.NonFiniteError as e:
            print(f"  {r['run']}: FAILED: {e}", flush=True)
            append_row(failed_csv, dict(run=r["run"], scheme=r["scheme"], reason=str(e)[:500],
                                        finished_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())),
                       ["run", "scheme", "reason", "finished_utc"])
            copy_out(a.copy_to, a.csv, failed_csv, curves_path)
            continue
        except Exception as e:  # noqa: BLE001  e.g. a kernel's error: this scheme stops, the others go on
            msg = f"error: {type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
            print(f"  {r['run']}: {msg} (no row; the rest of this scheme is skipped in this call)", flush=True)
            refused[r["scheme"]] = msg
            continue
        finally:
            if device.type == "cuda":
                torch.cuda.empty_cache()
        append_row(a.csv, row, COLUMNS)
        with open(curves_path, "a") as f:
            f.write(json.dumps(dict(run=r["run"], curve=curve)) + "\n")
        rates[(r["scheme"], r["size"])] = float(row["tokens_per_s"])
        print(f"  {r['run']}: val loss {row['loss']}, {row['tokens_per_s']} tokens/s, {row['wall_s']} s, "
              f"{row['compile']}, path {row['path_kind']}", flush=True)
        copy_out(a.copy_to, a.csv, failed_csv, curves_path)
    for scheme, why in refused.items():
        print(f"plan: {scheme}: {why}", flush=True)
    print(f"plan: {ran} runs attempted in {time.perf_counter() - t0:.0f} s", flush=True)
    return 0


def copy_out(folder, *paths):
    if not folder:
        return
    os.makedirs(folder, exist_ok=True)
    for p in paths:
        if os.path.exists(p):
            shutil.copy(p, os.path.join(folder, os.path.basename(p)))


if __name__ == "__main__":
    sys.exit(main())
