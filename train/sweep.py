"""The scaling-law sweep (docs/spec.md §7): model sizes x tokens-per-parameter x recipes, one training run per
GPU at a time, launched by PyTorch's own launcher:

    torchrun --standalone --nproc_per_node=8 train/sweep.py --out out/sweep
    build/nibble law fit out/sweep/runs.csv --json out/sweep/fit.json

Each torchrun worker (LOCAL_RANK = its GPU) takes the grid's runs i with i % WORLD_SIZE == RANK, in
order, and runs train/train.py for one recipe at the step count that gives the run's tokens per
parameter. Resumable: a run whose row is already in out/runs.csv is skipped, so the same command
continues a cut-off sweep. Each finished run's row is appended to out/runs.csv under an exclusive file
lock as soon as it finishes (columns as train.py's runs.csv: scheme,n,d,loss,...). Without torchrun
(no WORLD_SIZE) it runs the whole grid on one GPU. --dry-run prints the plan and exits.

Each run is a single-process train.py: its environment drops torchrun's variables (WORLD_SIZE, RANK,
...), which would otherwise make train.py join a data-parallel group. The issue's other part, one
configuration trained data-parallel on all 8 GPUs, is train.py itself under torchrun (its docstring).
"""
import argparse
import csv
import fcntl
import math
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# (layers, hidden, heads): the Quartet paper's smallest setups and one step below.
SIZES = {"s": (4, 384, 6), "m": (6, 640, 10), "l": (7, 768, 12)}
RECIPES = ["bf16", "fp8-current", "quartet", "nvfp4"]
RATIOS = [10, 25, 50]


def non_embedding_params(layers, hidden):
    """As train/model.py counts them: per block QKV + out (4 h^2), SwiGLU gate+up and down (3 h f), 2 norms."""
    ffn = int(math.ceil(hidden * 8 / 3 / 128) * 128)
    return layers * (4 * hidden * hidden + 3 * hidden * ffn + 2 * hidden) + hidden


def plan(sizes, ratios, recipes, batch, seq_len):
    runs = []
    for size in sizes:
        layers, hidden, heads = SIZES[size]
        n = non_embedding_params(layers, hidden)
        for ratio in ratios:
            steps = max(1, round(ratio * n / (batch * seq_len)))
            for recipe in recipes:
                runs.append(dict(key=f"{recipe}-{size}-{ratio}tpp", recipe=recipe, layers=layers, hidden=hidden,
                                 heads=heads, n=n, steps=steps, ratio=ratio))
    return runs


# What torchrun sets for its workers; a sweep run must not inherit them (train.py would start DDP).
_TORCHRUN_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
                  "ROLE_RANK", "ROLE_NAME", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def child_env(local_rank, environ=None):
    """The environment of one single-GPU training run: this worker's GPU only, no torchrun variables."""
    env = {k: v for k, v in (os.environ if environ is None else environ).items()
           if k not in _TORCHRUN_VARS and not k.startswith("TORCHELASTIC_")}
    env["CUDA_VISIBLE_DEVICES"] = str(local_rank)
    return env


def done_keys(csv_path):
    if not os.path.exists(csv_path):
        return set()
    with open(csv_path) as f:
        return {row.get("run", "") for row in csv.DictReader(f)}


def append_row(csv_path, row):
    """Appends one row under an exclusive lock (several workers share the file); header on first write."""
    with open(csv_path, "a+", newline="") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        empty = f.read(1) == ""
        w = csv.DictWriter(f, fieldnames=list(row.keys()))
        if empty:
            w.writeheader()
        w.writerow(row)
        f.flush()
        fcntl.flock(f, fcntl.LOCK_UN)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="out/sweep")
    ap.add_argument("--sizes", default=",".join(SIZES), help="comma list of " + ", ".join(SIZES))
    ap.add_argument("--ratios", default=",".join(map(str, RATIOS)), help="tokens per non-embedding parameter")
    ap.add_argument("--recipes", default=",".join(RECIPES))
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("train_args", nargs="*", help="passed to train.py after --")
    a = ap.parse_args(argv)
    sys.path.insert(0, HERE)
    from train import SCHEMES  # the recipe labels train.py runs; checked here, before any run is launched
    bad = [r for r in a.recipes.split(",") if r not in SCHEMES]
    if bad:
        ap.error(f"unknown recipe(s) {bad}; valid: {', '.join(SCHEMES)}")
    bad = [s for s in a.sizes.split(",") if s not in SIZES]
    if bad:
        ap.error(f"unknown size(s) {bad}; valid: {', '.join(SIZES)}")
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    local = os.environ.get("LOCAL_RANK", "0")
    runs = plan(a.sizes.split(","), [int(r) for r in a.ratios.split(",")], a.recipes.split(","), a.batch, a.seq_len)
    os.makedirs(a.out, exist_ok=True)
    csv_path = os.path.join(a.out, "runs.csv")
    done = done_keys(csv_path)
    mine = [r for i, r in enumerate(runs) if i % world == rank]
    print(f"sweep: {len(runs)} runs in the grid, {len(done)} already in {csv_path}; worker {rank}/{world} "
          f"(GPU {local}) takes {len(mine)}", flush=True)
    for r in mine:
        if r["key"] in done:
            print(f"  {r['key']}: done, skipped", flush=True)
            continue
        run_dir = os.path.join(a.out, r["key"])
        cmd = [sys.executable, os.path.join(HERE, "train.py"), "--recipes", r["recipe"], "--steps", str(r["steps"]),
               "--layers", str(r["layers"]), "--hidden", str(r["hidden"]), "--heads", str(r["heads"]),
               "--batch", str(a.batch), "--seq-len", str(a.seq_len), "--out", run_dir] + a.train_args
        print(f"  {r['key']}: N {r['n']:,}, {r['steps']} steps ({r['ratio']} tokens/param): {' '.join(cmd)}",
              flush=True)
        if a.dry_run:
            continue
        rc = subprocess.call(cmd, env=child_env(local))
        result = os.path.join(run_dir, "runs.csv")
        if rc != 0 or not os.path.exists(result):
            print(f"  {r['key']}: FAILED (rc {rc}); not recorded, a rerun retries it", flush=True)
            continue
        with open(result) as f:
            for row in csv.DictReader(f):
                append_row(csv_path, dict(run=r["key"], **row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
