"""The loss study's plan runner (docs/training.md, "Loss study"): Llama-style decoders (train/model.py) at
three sizes (xxs, xs, s) x 10 and 20 tokens per non-embedding parameter x six schemes, bf16 also at 40, a
second seed of every scheme at the cheapest point; cheapest runs first:

    python3 train/plan.py --dry-run                  # the plan, tokens and (once rows exist) estimated seconds
    python3 train/plan.py --max-seconds 540 --workers 3   # on a GPU: runs until the next run would not fit
    python3 train/study_table.py data/law/loss-study/runs.csv   # losses, gaps to bf16 over the seed spread
    build/nibble law fit data/law/loss-study/runs.csv --base-scheme bf16 --confidence 0.9

Resumable: every finished run appends one row to --csv (columns scheme,n,d,loss for `nibble law fit`,
then the run's metadata); a run whose key is already there is skipped, so the same command continues
the plan. A run stopped by --max-seconds writes nothing (no partial row) and starts over next time.
A diverged run (NaN/inf) goes to failed.csv beside --csv, skipped afterwards unless --retry-failed.
Quantized recipes must run on nibble's CUDA kernels: a run whose layers report an emulated path is
refused (no row) unless --allow-emulation, and every row names the path its layers reported.

--workers K trains K runs at a time on the one GPU (K processes taking the plan's runs in order): the small
models leave the GPU idle while a process compiles or launches kernels, and K runs fill those gaps. A row's
tokens_per_s is then its share of the GPU (column `gpu_shared_by` = K); the speed of one run alone is
train/speed.py's table.

Every run trains through train/loop.py's Trainer (the same step for every recipe; its docstring), with the
same initial weights and data order for a given seed. The validation loss is measured on one fixed slice of
the validation split (the same windows for every run).
"""
import argparse
import csv
import fcntl
import io
import json
import math
import os
import shutil
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import loop  # noqa: E402
from corpus import batch_order, load_named, windows  # noqa: E402
from loop import SIZES, nt, non_embedding_params  # noqa: E402,F401  (non_embedding_params: tests use plan's)

STUDY_SIZES = ("xxs", "xs", "s")
STUDY_SCHEMES = ("bf16", "fp8-current", "mxfp8", "nvfp4", "mxfp4", "quartet")
SCHEMES = {k: loop.SCHEMES[k] for k in STUDY_SCHEMES + ("fp8-delayed", "quartet-sr")}
RATIOS = (10, 20)
BASE_RATIOS = (10, 20, 40)  # the base scheme's budgets: the law's base constants need more of them
BASE_SCHEME = "bf16"
SEEDS_CHEAPEST = (0, 1)     # every scheme's second seed at the cheapest (size, budget): the run-to-run noise
DEFAULT_CSV = os.path.join(HERE, "..", "data", "law", "loss-study", "runs.csv")
COLUMNS = ["run", "scheme", "n", "d", "loss", "recipe", "options", "seed", "size", "layers", "hidden", "heads",
           "n_params", "n_total_params", "tokens", "tokens_per_param", "val_loss", "train_loss", "steps", "batch",
           "seq_len", "lr", "tokens_per_s", "gpu_shared_by", "wall_s", "train_s", "eval_s", "compile", "path_kind",
           "path", "backward_path", "gpu", "torch", "corpus", "finished_utc"]
# The settings every row of one CSV must share (a different corpus or batch shape is another study).
STUDY_FIELDS = ("batch", "seq_len", "corpus")


def make_plan(sizes=STUDY_SIZES, ratios=RATIOS, schemes=STUDY_SCHEMES, batch=128, seq_len=512,
              seeds=SEEDS_CHEAPEST, max_steps=None, table=None, base_ratios=BASE_RATIOS, base_scheme=BASE_SCHEME):
    """The runs, cheapest first (compute N x tokens), then seed, then scheme in SCHEMES order. Every scheme
    trains at `ratios`, the base scheme also at `base_ratios`; the seeds after the first run only at the
    cheapest (size, ratio). max_steps (testing) caps every run's steps; its row then records the tokens it
    really trained on."""
    table = table or SIZES
    smallest = min(sizes, key=lambda s: non_embedding_params(*table[s][:2]))
    runs = []
    for size in sizes:
        layers, hidden, heads, lr = table[size]
        n = non_embedding_params(layers, hidden)
        for scheme in schemes:
            for ratio in sorted(set(ratios) | (set(base_ratios) if scheme == base_scheme else set())):
                steps = max(1, math.ceil(ratio * n / (batch * seq_len)))
                steps = min(steps, max_steps) if max_steps else steps
                cheapest = size == smallest and ratio == min(ratios)
                for seed in (seeds if cheapest else seeds[:1]):
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
    """One complete line per run, written in a single write under an exclusive lock (several workers append
    to one file) and flushed to disk; header when the file is new."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "a+", newline="") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
        f.seek(0)
        header = f.readline().rstrip("\r\n")
        if not header:
            w.writeheader()
        elif header != ",".join(columns):
            fcntl.flock(f, fcntl.LOCK_UN)
            check_header(path, columns)
        w.writerow({k: row.get(k, "") for k in columns})
        f.write(buf.getvalue())
        f.flush()
        os.fsync(f.fileno())
        fcntl.flock(f, fcntl.LOCK_UN)


def claim(path, run):
    """Whether this worker takes `run`: the first worker to write its key into the claims file does."""
    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        taken = run in f.read().split()
        if not taken:
            f.write(run + "\n")
            f.flush()
        fcntl.flock(f, fcntl.LOCK_UN)
    return not taken


def check_header(path, columns=COLUMNS):
    """A runs CSV that exists must have this version's columns (rows are appended in that order)."""
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return
    with open(path, newline="") as f:
        header = f.readline().rstrip("\r\n")
    if header != ",".join(columns):
        missing = [c for c in columns if c not in header.split(",")]
        raise SystemExit(f"plan: {path} has the header '{header}', not this version's columns "
                         f"(missing: {', '.join(missing) or 'none; another order'}): one CSV holds one layout; "
                         "pass --csv with another file")


def check_study(rows, settings, path):
    """Existing rows must come from the same study settings (batch, seq_len, corpus)."""
    for r in rows:
        for k in STUDY_FIELDS:
            if k in r and str(r[k]) != str(settings[k]):
                raise SystemExit(f"plan: {path} row {r.get('run')!r} has {k}={r[k]}, this call {k}={settings[k]}: "
                                 f"one CSV holds one study; pass --csv with another file or the same --{k.replace('_', '-')}")


def measured_rates(rows):
    rates = {}
    for r in rows:
        try:
            rates[(r["scheme"], r["size"])] = float(r["tokens_per_s"])
        except (KeyError, ValueError):
            pass
    return rates


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


class Stop(Exception):
    """A run stopped before its end: no row."""


def train_run(run, args, data, device, deadline, log):
    """Train one run; returns (row, curve). Raises Stop (deadline, refused emulation) or nt.NonFiniteError."""
    train, val, val_starts, corpus_name = data
    t_start = time.perf_counter()
    steps = run["steps"]
    tr = loop.Trainer(run["scheme"], run["layers"], run["hidden"], run["heads"], run["lr"], steps, seed=run["seed"],
                      seq_len=args.seq_len, device=device, amp=args.amp, compile=args.compile, backend=args.backend,
                      warmup_fraction=args.warmup_fraction, log=log)
    order = batch_order(len(train), args.seq_len, args.batch, steps, 1000 + run["seed"]).to(device)
    eval_at = {round(steps * k / (args.evals + 1)) for k in range(1, args.evals + 1)} - {0, steps - 1}
    curve, eval_s, losses = [], 0.0, []
    x, y = windows(train, order[0], args.seq_len)
    losses.append(tr.step(0, x, y))
    tr.sync()
    kind, path, bpath = tr.paths()
    if kind == "emulated" and not args.allow_emulation:
        raise Stop(f"refused: its layers ran emulated ({path}); nibble's CUDA kernels are needed "
                   "(build nibble._C with CUDA, NIBBLE_BUILD_DIR), or pass --allow-emulation")
    first_s = time.perf_counter() - t_start
    t_steady, steady_from = time.perf_counter(), 1
    for step in range(1, steps):
        if step in eval_at:
            te = time.perf_counter()
            nt.check_finite(tr.model)
            curve.append((step, tr.evaluate(val, val_starts, args.seq_len, args.batch)))
            eval_s += time.perf_counter() - te
            log(f"  {run['run']}: step {step}/{steps} val {curve[-1][1]:.4f}")
        if step % args.check_every == 0:
            tr.sync()
            now = time.perf_counter()
            rate = (step - steady_from) / max(1e-9, now - t_steady - eval_s)
            end = now + (steps - step) / max(rate, 1e-9) + eval_s / max(1, len(curve)) + 1.0
            if deadline is not None and end > deadline:
                raise Stop(f"stopped at step {step}/{steps}: at {rate:.2f} steps/s it would end "
                           f"{end - deadline:.0f} s past the time limit (no row written)",
                           dict(tokens_per_s=rate * args.batch * args.seq_len))
        x, y = windows(train, order[step], args.seq_len)
        losses.append(tr.step(step, x, y))
    tr.sync()
    train_s = time.perf_counter() - t_start - eval_s
    steady_s = time.perf_counter() - t_steady - eval_s
    te = time.perf_counter()
    nt.check_finite(tr.model)
    val_loss = tr.evaluate(val, val_starts, args.seq_len, args.batch)
    eval_s += time.perf_counter() - te
    curve.append((steps, val_loss))
    if not math.isfinite(val_loss):
        raise nt.NonFiniteError(f"final validation loss is {val_loss}")
    kind, path, bpath = tr.paths()
    tail = torch.stack(losses[-max(1, steps // 50):]).float().mean().item()
    tokens = steps * args.batch * args.seq_len
    n = tr.model.non_embedding_params()
    assert n == run["n"], (n, run["n"])
    row = dict(run=run["run"], scheme=run["scheme"], n=n, d=tokens, loss=f"{val_loss:.6f}",
               recipe=loop.scheme_label(run["scheme"]), options=loop.scheme_options(run["scheme"]),
               seed=run["seed"], size=run["size"], layers=run["layers"], hidden=run["hidden"], heads=run["heads"],
               n_params=n, n_total_params=sum(p.numel() for p in tr.model.parameters()), tokens=tokens,
               tokens_per_param=f"{tokens / n:.3f}", val_loss=f"{val_loss:.6f}", train_loss=f"{tail:.6f}",
               steps=steps, batch=args.batch, seq_len=args.seq_len, lr=run["lr"],
               tokens_per_s=f"{(steps - steady_from) * args.batch * args.seq_len / max(steady_s, 1e-9):.0f}",
               gpu_shared_by=args.workers,
               wall_s=f"{time.perf_counter() - t_start:.1f}", train_s=f"{train_s:.1f}", eval_s=f"{eval_s:.1f}",
               compile=tr.compile_note + f" (first step {first_s:.1f} s)", path_kind=kind, path=path,
               backward_path=bpath, gpu=torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
               torch=torch.__version__, corpus=corpus_name,
               finished_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    return row, curve


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--csv", default=DEFAULT_CSV)
    ap.add_argument("--max-seconds", type=float, default=None,
                    help="wall-clock limit of this call from start-up: no run starts that is estimated not to fit, "
                         "a run that turns out not to fit stops (no row)")
    ap.add_argument("--workers", type=int, default=1, help="runs trained at a time on the one GPU (processes)")
    ap.add_argument("--sizes", default=",".join(STUDY_SIZES), help="comma list of " + ", ".join(SIZES))
    ap.add_argument("--ratios", default=",".join(map(str, RATIOS)), help="tokens per non-embedding parameter")
    ap.add_argument("--base-ratios", default=",".join(map(str, BASE_RATIOS)),
                    help=f"the base scheme's ({BASE_SCHEME}) tokens per parameter (it also trains at --ratios)")
    ap.add_argument("--schemes", default=",".join(STUDY_SCHEMES), help="comma list of " + ", ".join(SCHEMES))
    ap.add_argument("--seeds", default=",".join(map(str, SEEDS_CHEAPEST)),
                    help="seeds at the cheapest (size, budget); every other run takes the first")
    ap.add_argument("--size", action="append", default=[], metavar="NAME=L,H,HEADS,LR",
                    help="add a model size (layers, hidden, heads, peak learning rate), e.g. for a quick test")
    ap.add_argument("--max-steps", type=int, default=None, help="testing: cap every run's steps")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--corpus", default="linux", help="linux (data/corpus, packed; its sha256 are checked against "
                    "the manifest), stdlib (Python's), or a folder of .py files")
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
    ap.add_argument("--limit", type=int, default=None, help="at most this many runs in this call (per worker)")
    ap.add_argument("--copy-to", default=None, help="copy the CSVs into this folder after every run (e.g. $OUT)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dry-run", action="store_true", help="print the plan (tokens, estimates) and exit")
    ap.add_argument("--worker-of", default=None, help=argparse.SUPPRESS)  # CLAIMS_FILE:DEADLINE_EPOCH:INDEX
    a = ap.parse_args(argv)
    if a.workers < 1:
        ap.error(f"--workers {a.workers}: give 1 or more")
    try:
        table = loop.sizes_with(a.size)
    except ValueError as e:
        ap.error(str(e))
    sizes = [s for s in a.sizes.split(",") if s]
    schemes = [s for s in a.schemes.split(",") if s]
    for bad, valid, what in ((set(sizes) - set(table), table, "size"), (set(schemes) - set(SCHEMES), SCHEMES, "scheme")):
        if bad:
            ap.error(f"unknown {what}(s) {sorted(bad)}; valid: {', '.join(valid)}")
    plan = make_plan(sizes, [int(r) for r in a.ratios.split(",")], schemes, a.batch, a.seq_len,
                     tuple(int(s) for s in a.seeds.split(",")), a.max_steps, table,
                     [int(r) for r in a.base_ratios.split(",") if r])
    return a, table, plan


def main(argv=None):
    t0 = time.perf_counter()
    argv = sys.argv[1:] if argv is None else list(argv)
    a, table, plan = parse_args(argv)
    check_header(a.csv)
    rows = read_rows(a.csv)
    failed_csv = os.path.join(os.path.dirname(os.path.abspath(a.csv)), "failed.csv")
    curves_path = os.path.join(os.path.dirname(os.path.abspath(a.csv)), "curves.jsonl")
    failed = {r["run"] for r in read_rows(failed_csv)} if not a.retry_failed else set()
    done = {r["run"] for r in rows}
    rates = measured_rates(rows)
    todo = [r for r in plan if r["run"] not in done and r["run"] not in failed]
    worker = a.worker_of is not None
    if not worker:
        total = sum(r["tokens"] for r in plan)
        print(f"plan: {len(plan)} runs, {total / 1e9:.2f} G tokens in all; {len(plan) - len(todo)} done or failed "
              f"({a.csv}); {len(todo)} to run, {sum(r['tokens'] for r in todo) / 1e9:.2f} G tokens", flush=True)
    if a.dry_run:
        print(f"{'run':26s} {'N':>10s} {'tokens':>13s} {'steps':>6s}  estimate (one run alone)")
        left_s = 0.0
        for r in plan:
            est = estimate_seconds(r, rates, table)
            if r["run"] not in done and r["run"] not in failed and est:
                left_s += est
            state = "done" if r["run"] in done else "failed" if r["run"] in failed else \
                (f"~{est:.0f} s" if est else "unknown (no measured rate yet)")
            print(f"{r['run']:26s} {r['n']:10,d} {r['tokens']:13,d} {r['steps']:6d}  {state}")
        print(f"plan: the runs left with a measured rate need ~{left_s:.0f} s at the rates in {a.csv}")
        return 0
    if a.workers > 1 and not worker:
        load_named(a.corpus)  # unpacked and checked once, before the workers map it
        return run_workers(a, argv, t0)
    claims, deadline, index = (a.worker_of.split(":") if worker else (None, None, "0"))
    deadline = float(deadline) - time.time() + time.perf_counter() if worker else \
        (t0 + a.max_seconds if a.max_seconds else None)
    tag = f"[w{index}] " if worker else ""

    def log(s):
        print(tag + s, flush=True)

    device = torch.device(a.device)
    train, val, desc = load_named(a.corpus)
    corpus_name = desc["name"]
    settings = dict(batch=a.batch, seq_len=a.seq_len, corpus=corpus_name)
    check_study(rows, settings, a.csv)
    train, val = train.to(device), val.to(device)
    val_starts = batch_order(len(val), a.seq_len, a.val_windows, 1, 1234).flatten().to(device)
    log(f"corpus {desc}; device {device}" + (f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda"
        else "") + f", torch {torch.__version__}; loaded in {time.perf_counter() - t0:.1f} s")
    refused, ran = {}, 0
    for r in todo:
        if a.limit is not None and ran >= a.limit:
            break
        if r["scheme"] in refused:
            continue
        if worker:
            rates.update(measured_rates(read_rows(a.csv)))
        est = estimate_seconds(r, rates, table)
        left = None if deadline is None else deadline - time.perf_counter()
        if left is not None and est is not None and est * 1.1 + 15 > left:
            log(f"  {r['run']}: skipped in this call: estimated {est:.0f} s, {left:.0f} s left")
            continue
        if left is not None and left < 20:
            log("plan: time limit reached")
            break
        if claims and not claim(claims, r["run"]):
            continue
        log(f"  {r['run']}: N {r['n']:,}, {r['tokens']:,} tokens ({r['steps']} steps)"
            + (f", estimated {est:.0f} s" if est else ""))
        ran += 1
        try:
            row, curve = train_run(r, a, (train, val, val_starts, corpus_name), device, deadline, log)
        except Stop as e:
            log(f"  {r['run']}: {e.args[0]}")
            if len(e.args) > 1:
                rates[(r["scheme"], r["size"])] = e.args[1]["tokens_per_s"]
            if e.args[0].startswith("refused"):
                refused[r["scheme"]] = e.args[0]
            continue
        except nt.NonFiniteError as e:
            log(f"  {r['run']}: FAILED: {e}")
            append_row(failed_csv, dict(run=r["run"], scheme=r["scheme"], reason=str(e)[:500],
                                        finished_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())),
                       ["run", "scheme", "reason", "finished_utc"])
            copy_out(a.copy_to, a.csv, failed_csv, curves_path)
            continue
        except Exception as e:  # noqa: BLE001  e.g. a kernel's error: this scheme stops, the others go on
            msg = f"error: {type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
            log(f"  {r['run']}: {msg} (no row; the rest of this scheme is skipped in this call)")
            refused[r["scheme"]] = msg
            continue
        finally:
            if device.type == "cuda":
                torch.cuda.empty_cache()
        append_row(a.csv, row, COLUMNS)
        with open(curves_path, "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            f.write(json.dumps(dict(run=r["run"], curve=curve)) + "\n")
            fcntl.flock(f, fcntl.LOCK_UN)
        rates[(r["scheme"], r["size"])] = float(row["tokens_per_s"])
        log(f"  {r['run']}: val loss {row['loss']}, {row['tokens_per_s']} tokens/s, {row['wall_s']} s, "
            f"{row['compile']}, path {row['path_kind']}")
        copy_out(a.copy_to, a.csv, failed_csv, curves_path)
    for scheme, why in refused.items():
        log(f"plan: {scheme}: {why}")
    log(f"plan: {ran} runs attempted in {time.perf_counter() - t0:.0f} s")
    return 1 if refused else 0


def run_workers(a, argv, t0):
    """Start a.workers copies of this script on the same plan; each takes the next unclaimed run. Returns the
    first non-zero worker status (0 when all succeed)."""
    import tempfile
    claims = tempfile.NamedTemporaryFile(prefix="nibble-plan-claims-", delete=False).name
    deadline = time.time() + (a.max_seconds - (time.perf_counter() - t0) if a.max_seconds else 10 ** 9)
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), *argv, "--worker-of",
                               f"{claims}:{deadline:.3f}:{i}"]) for i in range(a.workers)]
    codes = [p.wait() for p in procs]
    os.remove(claims)
    print(f"plan: {a.workers} workers ended with status {codes} in {time.perf_counter() - t0:.0f} s", flush=True)
    return next((c for c in codes if c), 0)


def copy_out(folder, *paths):
    if not folder:
        return
    os.makedirs(folder, exist_ok=True)
    for p in paths:
        if os.path.exists(p):
            shutil.copy(p, os.path.join(folder, os.path.basename(p)))


if __name__ == "__main__":
    sys.exit(main())
