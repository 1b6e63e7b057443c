"""Train the same small Llama-style decoder once per recipe and compare validation losses.

    python3 train/train.py --max-minutes 20 --out out/train          # all recipes, one budget
    python3 train/train.py --recipes bf16,quartet --steps 200 --hidden 256 --layers 2   # quick

Same seed, same initial weights and same data order for every recipe. Linear layers inside the blocks
run the recipe (nibble.torch.convert); embeddings, LM head, norms, attention and AdamW (FP32 master
weights) stay in FP32. Outputs in --out: results.json, runs.csv (scheme,n,d,loss for `nibble law fit`),
val_loss.svg, log.txt. A NaN/inf stops the run with the step and the layer (nibble.torch.NonFiniteError).
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nibble.torch as nt  # noqa: E402
from corpus import batch_order, default_root, load_corpus, windows  # noqa: E402
from model import Decoder  # noqa: E402
from plot_svg import loss_curves_svg  # noqa: E402

# label -> (nibble recipe, options); the label is the scheme name in runs.csv.
SCHEMES = {
    "bf16": ("bf16", {}),
    "fp8-delayed": ("fp8-delayed", {}),
    "fp8-current": ("fp8-current", {}),
    "mxfp4-rtn": ("mxfp4", {}),
    "quartet": ("quartet", {"backward_rounding": "nearest"}),
    "quartet-sr": ("quartet", {"backward_rounding": "stochastic"}),
    "nvfp4": ("nvfp4", {}),
}


def lr_at(step, steps, peak, warmup):
    if step < warmup:
        return peak * (step + 1) / warmup
    p = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))  # cosine down to 10% of peak


@torch.no_grad()
def evaluate(model, val, starts, seq_len, batch):
    model.eval()
    total, n = 0.0, 0
    for i in range(0, len(starts), batch):
        x, y = windows(val, starts[i:i + batch], seq_len)
        x, y = x.to(DEVICE), y.to(DEVICE)
        total += float(F.cross_entropy(model(x).flatten(0, 1).float(), y.flatten(), reduction="sum"))
        n += y.numel()
    model.train()
    return total / n


def sync():
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()


def train_one(label, args, train, val, order, val_starts, log):
    recipe, opts = SCHEMES[label]
    torch.manual_seed(args.seed)  # identical initial weights for every recipe
    model = Decoder(hidden=args.hidden, layers=args.layers, heads=args.heads, seq_len=args.seq_len).to(DEVICE)
    nt.convert(model, recipe, backend=args.backend, **opts)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    rest = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95))
    curve, t_train, tokens = [], 0.0, 0
    steps = order.shape[0]
    for step in range(steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step, steps, args.lr, args.warmup)
        x, y = windows(train, order[step], args.seq_len)
        x, y = x.to(DEVICE), y.to(DEVICE)
        sync()
        t0 = time.perf_counter()
        loss = F.cross_entropy(model(x).flatten(0, 1).float(), y.flatten())
        if not torch.isfinite(loss):
            raise nt.NonFiniteError(f"{label}: step {step}: training loss is {float(loss)} (no layer reported "
                                    "non-finite values first: look at the head, norms or attention)")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sync()
        t_train += time.perf_counter() - t0
        tokens += x.numel()
        if step % args.eval_every == 0 or step == steps - 1:
            v = evaluate(model, val, val_starts, args.seq_len, args.batch)
            curve.append((step, v))
            log(f"{label:12s} step {step:5d}  train {float(loss):.4f}  val {v:.4f}  {tokens / t_train:,.0f} tok/s")
    path = next((m.last_path for m in model.modules() if isinstance(m, nt.Linear)), "fp32 (no nibble layers)")
    return dict(scheme=label, recipe=recipe, options=opts, final_val_loss=curve[-1][1], curve=curve,
                tokens=tokens, tokens_per_s=tokens / t_train, train_seconds=t_train, path=path,
                non_embedding_params=model.non_embedding_params())


def calibrate_steps(args, train, budget_s, n_schemes):
    """Time a few steps of the slowest recipe (quartet) to fit every scheme into the budget."""
    order = batch_order(len(train), args.seq_len, args.batch, 4, args.seed + 1)
    a = argparse.Namespace(**{**vars(args), "eval_every": 10 ** 9, "warmup": 1})
    t0 = time.perf_counter()
    train_one("quartet-sr", a, train, train[:args.seq_len * 4], order, torch.zeros(1, dtype=torch.long),
              lambda s: None)
    per_step = (time.perf_counter() - t0) / 4
    # 0.8: leave room for evaluation, start-up and the faster recipes' noise.
    return max(10, int(0.8 * budget_s / n_schemes / per_step)), per_step


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--recipes", default=",".join(SCHEMES), help="comma list of: " + ", ".join(SCHEMES))
    ap.add_argument("--max-minutes", type=float, default=None, help="total budget; sets --steps per recipe")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--hidden", type=int, default=640)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=10)
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1.5e-3)
    ap.add_argument("--warmup", type=int, default=None, help="default: 5%% of steps")
    ap.add_argument("--eval-every", type=int, default=None, help="default: steps / 20")
    ap.add_argument("--val-batches", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--corpus", default=None, help="folder of .py files (default: Python's stdlib)")
    ap.add_argument("--backend", default="auto", help="nibble.torch backend: auto | emulated | reference")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--out", default="out/train")
    args = ap.parse_args()
    global DEVICE
    DEVICE = torch.device(args.device)
    labels = [s.strip() for s in args.recipes.split(",") if s.strip()]
    bad = [s for s in labels if s not in SCHEMES]
    if bad:
        ap.error(f"unknown recipe(s) {bad}; valid: {', '.join(SCHEMES)}")
    os.makedirs(args.out, exist_ok=True)
    logf = open(os.path.join(args.out, "log.txt"), "w")

    def log(s):
        print(s, flush=True)
        logf.write(s + "\n")
        logf.flush()

    train, val, desc = load_corpus(args.corpus or default_root())
    log(f"corpus: {desc}")
    if args.max_minutes:
        args.steps, per_step = calibrate_steps(args, train, args.max_minutes * 60, len(labels))
        log(f"budget {args.max_minutes} min: {per_step:.3f} s per quartet step -> {args.steps} steps per recipe")
    args.warmup = args.warmup or max(1, args.steps // 20)
    args.eval_every = args.eval_every or max(1, args.steps // 20)
    order = batch_order(len(train), args.seq_len, args.batch, args.steps, args.seed)
    val_starts = batch_order(len(val), args.seq_len, args.batch, args.val_batches, args.seed + 2).flatten()
    results = []
    for label in labels:
        try:
            results.append(train_one(label, args, train, val, order, val_starts, log))
        except nt.NonFiniteError as e:
            log(f"{label}: STOPPED: {e}")
            results.append(dict(scheme=label, diverged=str(e)))
    ok = [r for r in results if "final_val_loss" in r]
    base = next((r["final_val_loss"] for r in ok if r["scheme"] == "bf16"), None)
    log(f"\n{'scheme':12s} {'val loss':>9s} {'gap vs bf16':>11s} {'tok/s':>10s}  path")
    for r in results:
        if "diverged" in r:
            log(f"{r['scheme']:12s} diverged: {r['diverged']}")
            continue
        gap = f"{r['final_val_loss'] - base:+.4f}" if base is not None else "-"
        log(f"{r['scheme']:12s} {r['final_val_loss']:9.4f} {gap:>11s} {r['tokens_per_s']:10,.0f}  {r['path']}")
    meta = dict(config=vars(args), corpus=desc, device=str(DEVICE),
                gpu=torch.cuda.get_device_name() if DEVICE.type == "cuda" else None, torch=torch.__version__)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(dict(meta=meta, runs=results), f, indent=1)
    with open(os.path.join(args.out, "runs.csv"), "w") as f:
        f.write("scheme,n,d,loss,tokens_per_s,steps,corpus\n")
        for r in ok:
            f.write(f"{r['scheme']},{r['non_embedding_params']},{r['tokens']},{r['final_val_loss']:.6f},"
                    f"{r['tokens_per_s']:.0f},{args.steps},python-stdlib-bytes\n")
    title = f"{args.layers}x{args.hidden} decoder, {args.steps} steps x {args.batch}x{args.seq_len} bytes"
    with open(os.path.join(args.out, "val_loss.svg"), "w") as f:
        f.write(loss_curves_svg({r["scheme"]: r["curve"] for r in ok}, title))
    return 0 if len(ok) == len(results) else 1


DEVICE = torch.device("cpu")
if __name__ == "__main__":
    sys.exit(main())
