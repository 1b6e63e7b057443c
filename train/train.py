"""Train the same small Llama-style decoder once per recipe and compare validation losses.

    python3 train/train.py --max-minutes 20 --out out/train          # all schemes, one budget
    python3 train/train.py --recipes bf16,quartet --steps 200 --hidden 256 --layers 2   # quick

Every recipe trains through train/loop.py's Trainer, the loss study's step (BF16 autocast outside the
recipe GEMMs, torch.compile on CUDA, fused AdamW; bf16 is torch's nn.Linear under autocast), with the same
seed, initial weights and data order. This script adds the checks of a comparison run between the step's
parts: a NaN/inf, or a training loss that climbs --diverge-margin above the first step's after warm-up,
stops that recipe's run naming the step and the layer (nibble.torch.NonFiniteError; the layers check with
check_finite="sync", and the loss is read every step); the other recipes still run and the exit status is 1.
Outputs in --out: results.json, runs.csv (scheme,n,d,loss for `nibble law fit`), val_loss.svg, log.txt,
rewritten after every recipe.

Data-parallel (torch DistributedDataParallel), one process per GPU, when launched by torchrun (WORLD_SIZE
> 1, or --ddp):

    torchrun --standalone --nproc_per_node=8 train/train.py --recipes bf16,quartet --steps 600 --out out/ddp8
    python3 train/compare_runs.py out/single/results.json out/ddp8/results.json

Each global batch of --batch windows (the single-process run's, same order) is split evenly across the
ranks; DDP (the Trainer's `wrap`) averages the gradients, nibble.distributed gives every rank its own
backward seeds and all-reduces fp8-delayed's amax histories after each step. Rank 0 evaluates and writes
the outputs.
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import loop  # noqa: E402
import nibble.distributed as nd  # noqa: E402
import nibble.torch as nt  # noqa: E402
from corpus import batch_order, load_named, windows  # noqa: E402
from plot_svg import loss_curves_svg  # noqa: E402

# label -> (nibble recipe or None for torch's BF16, options): the loss study's schemes; the label is the
# scheme name in runs.csv.
SCHEMES = loop.SCHEMES


def evaluate_on_rank0(tr, val, starts, seq_len, batch):
    """The Trainer's evaluation on rank 0; under DDP the other ranks receive its value (so every rank keeps
    the same curve and takes the same decisions) instead of evaluating."""
    if not DDP:
        return tr.evaluate(val, starts, seq_len, batch)
    t = torch.tensor([tr.evaluate(val, starts, seq_len, batch) if RANK == 0 else 0.0], dtype=torch.float64,
                     device=DEVICE)
    dist.broadcast(t, 0)
    return float(t.item())


def agree(flag):
    """Under DDP, True on every rank when any rank says True (a collective: every rank calls it at the same
    point); single-process, the flag itself."""
    return nd.any_rank(flag) if DDP else flag


def agree_on_loss(label, lv, err):
    """DDP: (mean training loss over the ranks, error message or None), the same on every rank. The mean of
    the ranks' means equals the global batch's mean (equal shards). When any rank failed its forward or got
    a non-finite loss, every rank returns the first failing rank's message, so all stop together instead of
    the healthy ranks waiting forever in the gradient all-reduce."""
    t = torch.tensor([0.0 if err else lv, 1.0 if err else 0.0], dtype=torch.float64, device=DEVICE)
    dist.all_reduce(t)
    if t[1].item() == 0:
        return float(t[0].item()) / WORLD, None
    msgs = [None] * WORLD
    dist.all_gather_object(msgs, err)
    bad = [r for r, m in enumerate(msgs) if m]
    first = msgs[bad[0]]
    body = first[len(label) + 2:] if first.startswith(label + ": ") else first
    also = f" (ranks {bad} failed)" if len(bad) > 1 else ""
    return float("nan"), f"{label}: rank {bad[0]}{also}: {body}"


def backward(tr, loss):
    """The Trainer's backward. Under DDP with the nibble layers' finite checks off during backward: a layer
    raising in the middle of backward on one rank would leave the other ranks waiting forever in DDP's
    gradient all-reduce. A NaN/inf made in backward still reaches every rank (the averaged gradients hold
    it), so the gradient-norm check after it stops all ranks together, naming the parameters."""
    if not DDP:
        return tr.backward(loss)
    quiet = [m for m in tr.model.modules() if isinstance(m, nt.Linear) and m.options["check_finite"]]
    for m in quiet:
        m.options["check_finite"] = False
    try:
        tr.backward(loss)
    finally:
        for m in quiet:
            m.options["check_finite"] = True


def dump_rank_state(folder, label, net):
    """Testing (--dump-rank-state): this rank's nibble layer seeds and checksums of its amax histories and
    weights, in folder/rank<R>-<label>.json (the one file a rank other than 0 writes)."""
    import hashlib
    layers = nd.nibble_layers(net)
    digest = lambda ts: hashlib.sha1(repr([t.detach().cpu().tolist() for t in ts]).encode()).hexdigest()
    state = dict(rank=RANK, world_size=WORLD, seeds={n: m.seed for n, m in layers},
                 steps={n: int(m.step) for n, m in layers},
                 amax_history=digest([m.amax_history for _, m in layers] + [m.amax_filled for _, m in layers]),
                 amax_sum=float(sum(float(m.amax_history.double().sum()) for _, m in layers)),
                 weights=digest([p for p in net.parameters()]))
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"rank{RANK}-{label}.json"), "w") as f:
        json.dump(state, f, indent=1)


def sync():
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()


@torch.no_grad()
def locate_non_finite(model, x, layers_quiet=False):
    """Rerun the forward with hooks and name the first module (in execution order) whose output holds
    NaN/inf; a nibble layer raises NonFiniteError itself, which names it too (unless layers_quiet)."""
    found = []
    quiet = [m for m in model.modules() if isinstance(m, nt.Linear) and m.options["check_finite"]] \
        if layers_quiet else []
    for m in quiet:
        m.options["check_finite"] = False

    def hook(mod, inp, out):
        if not found and torch.is_tensor(out) and not bool(torch.isfinite(out).all()):
            found.append(mod._nibble_name)
    handles = []
    for name, mod in model.named_modules():
        mod._nibble_name = name or "(model)"
        handles.append(mod.register_forward_hook(hook))
    try:
        model(x)
    except nt.NonFiniteError as e:
        return str(e)
    finally:
        for h in handles:
            h.remove()
        for m in quiet:
            m.options["check_finite"] = True
    bad = [n for n, p in model.named_parameters() if not bool(torch.isfinite(p).all())]
    where = f"module '{found[0]}'" if found else "no module (the loss function)"
    return f"first non-finite output in {where}" + (f"; non-finite parameters: {bad[:5]}" if bad else "")


def grad_report(model, finite_only=False):
    """(name, norm) of parameter gradients, largest first; with finite_only False, the non-finite ones."""
    rows = []
    for n, p in model.named_parameters():
        if p.grad is None:
            continue
        g = float(p.grad.detach().float().norm())
        if finite_only == math.isfinite(g):
            rows.append((n, g))
    return sorted(rows, key=lambda r: -r[1] if math.isfinite(r[1]) else 0.0)


def train_one(label, args, train, val, order, val_starts, log, deadline=None, eval_estimate=0.0):
    """Train one recipe on `order` ([steps, batch] window starts) through train/loop.py's Trainer (the loss
    study's step), checking between its parts. Stops early (truncated) when the wall clock would pass
    `deadline` before the final evaluation; raises NonFiniteError on NaN/inf or divergence."""
    recipe = SCHEMES[label][0] or "torch-bf16"
    t_setup = time.perf_counter()
    steps = order.shape[0]

    def wrap(net):
        # broadcast_buffers=False: rank 0's buffers must not overwrite the per-rank seeds before every
        # forward (nibble/distributed.py says why). Seeds AFTER wrapping: the constructor copies rank 0's.
        ddp = DistributedDataParallel(net, device_ids=[DEVICE.index] if DEVICE.type == "cuda" else None,
                                      broadcast_buffers=False)
        nd.seed_per_rank(net, RANK)
        return ddp
    # check_finite="sync": a NaN is reported inside the pass of the layer where it first appears
    tr = loop.Trainer(label, args.layers, args.hidden, args.heads, args.lr, steps, seed=args.seed,
                      seq_len=args.seq_len, device=DEVICE, amp=args.amp, compile=args.compile, backend=args.backend,
                      warmup_steps=args.warmup, wrap=wrap if DDP else None, layer_options={"check_finite": "sync"},
                      log=log)
    net = tr.model  # the Decoder itself: parameters, evaluation, checks
    sync()
    setup_s = time.perf_counter() - t_setup
    curve, step_times, eval_times, tokens = [], [], [], 0
    first_loss, truncated = None, None
    for step in range(steps):
        if deadline is not None and step > 0 and agree(time.perf_counter() + eval_estimate + (
                step_times[-1] if step_times else 0.0) > deadline):
            truncated = step
            log(f"{label}: time budget reached: stopping after {step} of {steps} steps (truncated run)")
            break
        tr.set_lr(step)
        # Under DDP each rank takes its contiguous 1/WORLD of the global batch.
        x, y = windows(train, order[step].reshape(WORLD, -1)[RANK] if DDP else order[step], args.seq_len)
        if step == args.inject_nan_step and args.inject_nan_rank in (None, RANK):
            with torch.no_grad():  # test hook: poison one weight, the run must stop naming it
                net.get_parameter(args.inject_nan_param).view(-1)[0] = float("nan")
        sync()
        t0 = time.perf_counter()
        err = None
        try:
            loss = tr.loss(x, y)
        except nt.NonFiniteError as e:
            # A nibble layer saw it; when it came from upstream, name the module that made it.
            err = f"{label}: {e}" + ("; " + locate_non_finite(net, x, layers_quiet=True) if "input (" in str(e) else "")
        lv = float("nan") if err else float(loss)
        if not err and not math.isfinite(lv):
            err = f"{label}: step {step}: training loss is {lv}: " + locate_non_finite(net, x)
        if DDP:
            lv, err = agree_on_loss(label, lv, err)
        if err:
            raise nt.NonFiniteError(err)
        first_loss = lv if first_loss is None else first_loss
        if step >= max(tr.warmup, 10) and lv > first_loss + args.diverge_margin:
            backward(tr, loss)
            top = grad_report(net, finite_only=True)[:3]
            raise nt.NonFiniteError(
                f"{label}: step {step}: DIVERGED: training loss {lv:.4f} is above the initial loss {first_loss:.4f} "
                f"+ {args.diverge_margin}; largest gradients at this step: "
                + ", ".join(f"{n} {g:.3g}" for n, g in top))
        try:
            backward(tr, loss)
        except nt.NonFiniteError as e:
            bad = [n for n, _ in grad_report(net)]
            raise nt.NonFiniteError(f"{label}: {e}" + (f"; parameters whose gradients are already NaN/inf: "
                                                         f"{bad[:5]}" if bad else "")) from None
        # Under DDP the gradients are the same on every rank after the all-reduce, so is this norm, and
        # all ranks take this stop together.
        gnorm = float(tr.clip())
        if not math.isfinite(gnorm):
            bad = grad_report(net)
            raise nt.NonFiniteError(f"{label}: step {step}: non-finite gradient norm ({gnorm}); parameters with "
                                    f"NaN/inf gradients: {[n for n, _ in bad[:5]]} ({len(bad)} in all)")
        tr.update()
        if DDP:
            nd.sync_amax(net)  # the next step's delayed scales from every rank's amaxes
        sync()
        step_times.append(time.perf_counter() - t0)
        tokens += x.numel() * WORLD  # the global batch's tokens
        if step % args.eval_every == 0 or step == steps - 1:
            te = time.perf_counter()
            v = evaluate_on_rank0(tr, val, val_starts, args.seq_len, args.batch)
            eval_times.append(time.perf_counter() - te)
            curve.append((step, v))
            log(f"{label:12s} step {step:5d}  train {lv:.4f}  val {v:.4f}  "
                f"{tokens / sum(step_times):,.0f} tok/s")
    if truncated is not None and (not curve or curve[-1][0] != truncated - 1):
        te = time.perf_counter()
        curve.append((truncated - 1, evaluate_on_rank0(tr, val, val_starts, args.seq_len, args.batch)))
        eval_times.append(time.perf_counter() - te)
    kind, path, bpath = tr.paths()
    if args.dump_rank_state:
        dump_rank_state(args.dump_rank_state, label, net)
    t_train = sum(step_times)
    return dict(scheme=label, recipe=recipe, options=SCHEMES[label][1], final_val_loss=curve[-1][1], curve=curve,
                steps_run=len(step_times), truncated=truncated is not None, tokens=tokens,
                tokens_per_s=tokens / t_train, train_seconds=t_train, eval_seconds=sum(eval_times),
                setup_seconds=setup_s, step_seconds=step_times, path=path, path_kind=kind, backward_path=bpath,
                compile=tr.compile_note, non_embedding_params=net.non_embedding_params(),
                tokens_per_param=tokens / net.non_embedding_params())


# Expected cost order of the emulated recipes (slowest first): calibration measures these first, so a
# calibration cut short by its time cap extrapolates the rest from slower recipes, never faster ones.
_COST_ORDER = ("quartet-sr", "quartet", "nvfp4", "mxfp8", "mxfp4", "fp8-delayed", "fp8-current", "bf16")


def calibrate_steps(args, labels, train, val, val_starts, deadline, log):
    """Run a few steps of every recipe (the first one is warm-up), time one evaluation each, and pick the
    step count that fits all recipes, their evaluations and set-up into the time left until `deadline`.
    Calibration itself may use --calib-fraction of that time; recipes not reached by then take the
    largest times measured so far."""
    n = max(1, args.calib_steps) + 1
    order = batch_order(len(train), args.seq_len, args.batch, n, args.seed + 1).to(DEVICE)
    a = argparse.Namespace(**{**vars(args), "eval_every": 10 ** 9, "warmup": 1, "inject_nan_step": -1})
    per_step, fixed, eval_s = {}, {}, {}
    t_cal = time.perf_counter()
    cap = t_cal + args.calib_fraction * (deadline - t_cal)
    for label in sorted(labels, key=lambda l: _COST_ORDER.index(l) if l in _COST_ORDER else -1):
        if per_step and agree(time.perf_counter() > cap):
            log(f"calibration {label:12s} not run (calibration time cap): taking the largest times measured")
            per_step[label], eval_s[label], fixed[label] = (max(d.values()) for d in (per_step, eval_s, fixed))
            continue
        t0 = time.perf_counter()
        try:
            r = train_one(label, a, train, val, order, val_starts, lambda s: None)
        except nt.NonFiniteError as e:  # the real run will stop on it too; time it as the slowest so far
            log(f"calibration {label:12s} stopped: {e}")
            continue
        wall = time.perf_counter() - t0
        st = sorted(r["step_seconds"][1:])
        per_step[label] = st[len(st) // 2]
        eval_s[label] = r["eval_seconds"]
        fixed[label] = max(0.0, wall - r["eval_seconds"] - n * per_step[label])  # set-up + first-step warm-up
        log(f"calibration {label:12s} {per_step[label]:.3f} s/step (first step {r['step_seconds'][0]:.2f} s), "
            f"eval {r['eval_seconds']:.2f} s, set-up {r['setup_seconds']:.2f} s")
        del r
        if DEVICE.type == "cuda":
            torch.cuda.empty_cache()
    for label in labels:  # recipes whose calibration stopped
        if label not in per_step and per_step:
            per_step[label], eval_s[label], fixed[label] = (max(d.values()) for d in (per_step, eval_s, fixed))
    if not per_step:
        return 10, {l: 0.0 for l in labels}, {l: 0.0 for l in labels}
    n_evals = 11 + 1  # --eval-every defaults to steps / 10: 11 evaluations, plus slack for one more
    avail = args.budget_fill * (deadline - time.perf_counter() - sum(fixed.values()) - n_evals * sum(eval_s.values()))
    steps = int(avail / sum(per_step.values()))
    if DDP:  # rank 0's timings decide: every rank must run the same number of steps
        t = torch.tensor([steps], dtype=torch.long, device=DEVICE)
        dist.broadcast(t, 0)
        steps = int(t.item())
    log(f"calibration took {time.perf_counter() - t_cal:.1f} s; one step of every recipe {sum(per_step.values()):.3f} s"
        f", evaluations {n_evals} x {sum(eval_s.values()):.2f} s, set-up {sum(fixed.values()):.1f} s")
    if steps < 10:
        log(f"WARNING: only {steps} steps per recipe fit the budget; running 10 (the time limit may truncate "
            "or skip the last recipes)")
    return max(10, steps), per_step, eval_s


def write_outputs(out, args, meta, results, corpus_name="python-stdlib-bytes"):
    """results.json, runs.csv and val_loss.svg; rewritten after every recipe so a cut-off run keeps its
    finished recipes. Under DDP only rank 0 writes."""
    ok = [r for r in results if "final_val_loss" in r]
    if RANK != 0:
        return ok
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(dict(meta=meta, runs=[{k: v for k, v in r.items() if k != "step_seconds"} for r in results]),
                  f, indent=1)
    with open(os.path.join(out, "runs.csv"), "w") as f:
        f.write("scheme,n,d,loss,tokens_per_s,steps,corpus\n")
        for r in ok:
            f.write(f"{r['scheme']},{r['non_embedding_params']},{r['tokens']},{r['final_val_loss']:.6f},"
                    f"{r['tokens_per_s']:.0f},{r['steps_run']},{corpus_name}\n")
    title = f"{args.layers}x{args.hidden} decoder, {args.steps} steps x {args.batch}x{args.seq_len} bytes"
    with open(os.path.join(out, "val_loss.svg"), "w") as f:
        f.write(loss_curves_svg({r["scheme"] + (" (truncated)" if r.get("truncated") else ""): r["curve"]
                                 for r in ok}, title))
    return ok


def main(argv=None):
    t_start = time.perf_counter()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--recipes", default=",".join(SCHEMES), help="comma list of: " + ", ".join(SCHEMES))
    ap.add_argument("--max-minutes", type=float, default=None,
                    help="wall-clock budget of the whole run (from start-up, calibration included); sets --steps "
                         "per recipe and cuts a recipe short (marked truncated) rather than overrun")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--hidden", type=int, default=640)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=10)
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1.5e-3)
    ap.add_argument("--warmup", type=int, default=None, help="default: 5%% of steps")
    ap.add_argument("--eval-every", type=int, default=None, help="default: steps / 10")
    ap.add_argument("--val-batches", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--corpus", default="auto", help="linux (the packed corpus, data/corpus), stdlib (Python's "
                    "standard library), auto (linux when packed, else stdlib), or a folder of .py files")
    ap.add_argument("--backend", default="auto", help="nibble.torch backend: auto | emulated | reference")
    ap.add_argument("--compile", choices=("auto", "off"), default="auto",
                    help="auto: torch.compile on CUDA, eager when compiling fails (results.json says which ran)")
    ap.add_argument("--amp", choices=("bf16", "off"), default="bf16", help="autocast outside the recipe GEMMs (CUDA)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--diverge-margin", type=float, default=1.0,
                    help="after warm-up, a training loss this far above the first step's loss stops the run")
    ap.add_argument("--calib-steps", type=int, default=3, help="timed steps per recipe when --max-minutes")
    ap.add_argument("--calib-fraction", type=float, default=0.15,
                    help="most of the --max-minutes budget calibration may use")
    ap.add_argument("--budget-fill", type=float, default=0.9, help=argparse.SUPPRESS)
    ap.add_argument("--inject-nan", default=None, metavar="STEP:PARAM",
                    help="testing: set one element of parameter PARAM to NaN before step STEP")
    ap.add_argument("--inject-nan-rank", type=int, default=None, help=argparse.SUPPRESS)  # testing: that rank only
    ap.add_argument("--dump-rank-state", default=None, help=argparse.SUPPRESS)  # testing: see dump_rank_state
    ap.add_argument("--ddp", action="store_true",
                    help="data-parallel over torchrun's processes (implied by WORLD_SIZE > 1): nccl on CUDA, gloo "
                         "on CPU; --batch is the global batch, split evenly across the ranks")
    ap.add_argument("--out", default="out/train")
    args = ap.parse_args(argv)
    global DEVICE, DDP, RANK, WORLD
    DEVICE, DDP, RANK, WORLD = torch.device(args.device), False, 0, 1
    if args.ddp or int(os.environ.get("WORLD_SIZE", "1")) > 1:
        init_distributed(ap, args)
    args.inject_nan_step, args.inject_nan_param = -1, None
    if args.inject_nan:
        st, _, args.inject_nan_param = args.inject_nan.partition(":")
        args.inject_nan_step = int(st)
    labels = [s.strip() for s in args.recipes.split(",") if s.strip()]
    bad = [s for s in labels if s not in SCHEMES]
    if bad:
        ap.error(f"unknown recipe(s) {bad}; valid: {', '.join(SCHEMES)}")
    if RANK == 0:
        os.makedirs(args.out, exist_ok=True)
        logf = open(os.path.join(args.out, "log.txt"), "w")

    def log(s):
        if RANK != 0:  # under DDP only rank 0 logs and writes
            return
        print(s, flush=True)
        logf.write(s + "\n")
        logf.flush()

    deadline = t_start + 60 * args.max_minutes if args.max_minutes else None
    train, val, desc = load_named(args.corpus)
    train, val = train.to(DEVICE), val.to(DEVICE)
    log(f"corpus: {desc}")
    log(f"device {DEVICE}" + (f" ({torch.cuda.get_device_name()})" if DEVICE.type == "cuda" else "")
        + f", torch {torch.__version__}, model {args.layers}x{args.hidden}, batch {args.batch}x{args.seq_len}")
    if DDP:
        log(f"data-parallel (DDP, {dist.get_backend()}): {WORLD} ranks x {args.batch // WORLD} windows of each "
            "global batch; per-rank backward seeds; amax histories all-reduced (MAX) after every step")
    val_starts = batch_order(len(val), args.seq_len, args.batch, args.val_batches, args.seed + 2).flatten().to(DEVICE)
    if args.max_minutes:
        remaining = deadline - time.perf_counter()
        args.steps, per_step, eval_s = calibrate_steps(args, labels, train, val, val_starts, deadline, log)
        log(f"budget {args.max_minutes} min ({remaining:.0f} s left after start-up, "
            f"{deadline - time.perf_counter():.0f} s after calibration): {args.steps} steps per recipe")
    args.warmup = args.warmup or max(1, args.steps // 20)
    args.eval_every = args.eval_every or max(1, args.steps // 10)
    order = batch_order(len(train), args.seq_len, args.batch, args.steps, args.seed).to(DEVICE)
    meta = dict(config={k: v for k, v in vars(args).items()}, corpus=desc, device=str(DEVICE),
                gpu=torch.cuda.get_device_name() if DEVICE.type == "cuda" else None, torch=torch.__version__,
                float32_matmul_precision=torch.get_float32_matmul_precision(), world_size=WORLD)
    if args.max_minutes:
        meta["calibration"] = dict(seconds_per_step=per_step, eval_seconds=eval_s, steps=args.steps)
    results = []
    write_outputs(args.out, args, meta, results, desc["name"])  # so a run cut off during the first recipe leaves its meta
    for label in labels:
        if deadline is not None and agree(time.perf_counter() > deadline):
            log(f"{label}: SKIPPED: time budget spent")
            results.append(dict(scheme=label, skipped="time budget spent"))
            write_outputs(args.out, args, meta, results, desc["name"])
            continue
        try:
            est = eval_s[label] if args.max_minutes else 0.0
            results.append(train_one(label, args, train, val, order, val_starts, log, deadline, est))
        except (nt.NonFiniteError, RuntimeError) as e:
            if not isinstance(e, nt.NonFiniteError) and "non-finite" not in str(e):
                raise
            msg = str(e) if str(e).startswith(label + ":") else f"{label}: {e}"
            log(f"STOPPED: {msg}")
            results.append(dict(scheme=label, diverged=str(e)))
        if DEVICE.type == "cuda":
            torch.cuda.empty_cache()
        ok = write_outputs(args.out, args, meta, results, desc["name"])
    ok = [r for r in results if "final_val_loss" in r]
    base = next((r["final_val_loss"] for r in ok if r["scheme"] == "bf16"), None)
    if ok:
        log(f"\n{ok[0]['non_embedding_params']:,} non-embedding parameters; {ok[0]['tokens']:,} training tokens "
            f"(bytes) = {ok[0]['tokens_per_param']:.3f} tokens per parameter")
    log(f"\n{'scheme':12s} {'val loss':>9s} {'gap vs bf16':>11s} {'tok/s':>10s} {'steps':>6s}  path")
    for r in results:
        if "final_val_loss" not in r:
            log(f"{r['scheme']:12s} {'diverged: ' + r['diverged'] if 'diverged' in r else 'skipped'}")
            continue
        gap = f"{r['final_val_loss'] - base:+.4f}" if base is not None else "-"
        log(f"{r['scheme']:12s} {r['final_val_loss']:9.4f} {gap:>11s} {r['tokens_per_s']:10,.0f} "
            f"{r['steps_run']:6d}{' (truncated)' if r['truncated'] else ''}  {r['path']}")
    log(f"total wall time {time.perf_counter() - t_start:.0f} s")
    if DDP:
        dist.destroy_process_group()
    return 0 if len(ok) == len(results) else 1


def init_distributed(ap, args):
    """Join torchrun's process group: nccl with this rank on cuda:LOCAL_RANK, gloo on CPU. Checked first,
    before any collective: torchrun's environment and a --batch the ranks can split evenly."""
    global DEVICE, DDP, RANK, WORLD
    need = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
    missing = [v for v in need if v not in os.environ]
    if missing:
        ap.error(f"data-parallel training needs torchrun's environment ({', '.join(missing)} not set): "
                 "torchrun --standalone --nproc_per_node=N train/train.py ...")
    world = int(os.environ["WORLD_SIZE"])
    if args.batch % world:
        ap.error(f"--batch {args.batch} is not divisible by the world size {world}: each rank takes an equal "
                 f"share of every global batch; use a multiple of {world} (e.g. {max(1, args.batch // world) * world})")
    if DEVICE.type == "cuda":
        DEVICE = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(DEVICE)
    dist.init_process_group("nccl" if DEVICE.type == "cuda" else "gloo")
    DDP, RANK, WORLD = True, dist.get_rank(), dist.get_world_size()


DEVICE = torch.device("cpu")
DDP, RANK, WORLD = False, 0, 1  # set by init_distributed under torchrun
if __name__ == "__main__":
    sys.exit(main())
