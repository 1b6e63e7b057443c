"""Compare the validation-loss curves of two train/train.py runs (results.json), recipe by recipe:

    python3 train/compare_runs.py out/single/results.json out/ddp8/results.json [--tolerance 0.02]

For every scheme in both files, over the steps both curves evaluated: the largest |val loss A - val loss
B|, the step where it occurs, and the final losses. What difference is "run-to-run noise" is measured
the same way: compare two single-process runs that differ only in --seed (different initial weights
and data order). With --tolerance, the exit status is 1 when any scheme's largest difference exceeds
it (or no scheme is in both files).
"""
import argparse
import json
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def compare(a, b):
    """[(scheme, max |diff|, at step, final A, final B, common points)] for the schemes both runs finished."""
    runs_b = {r["scheme"]: r for r in b["runs"] if "curve" in r}
    rows = []
    for ra in a["runs"]:
        rb = runs_b.get(ra["scheme"])
        if "curve" not in ra or rb is None:
            continue
        cb = dict((int(s), v) for s, v in rb["curve"])
        common = [(int(s), v, cb[int(s)]) for s, v in ra["curve"] if int(s) in cb]
        if not common:
            continue
        s, va, vb = max(common, key=lambda t: abs(t[1] - t[2]))
        rows.append((ra["scheme"], abs(va - vb), s, ra["final_val_loss"], rb["final_val_loss"], len(common)))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a", help="results.json of run A (e.g. single-process)")
    ap.add_argument("b", help="results.json of run B (e.g. DDP)")
    ap.add_argument("--tolerance", type=float, default=None, help="exit 1 when a max |difference| exceeds this")
    args = ap.parse_args(argv)
    a, b = load(args.a), load(args.b)
    ws = lambda r: r["meta"].get("world_size", 1)
    print(f"A: {args.a} (world size {ws(a)})\nB: {args.b} (world size {ws(b)})")
    rows = compare(a, b)
    if not rows:
        print("no scheme finished in both runs")
        return 1 if args.tolerance is not None else 0
    print(f"{'scheme':12s} {'max |dval|':>10s} {'at step':>7s} {'final A':>8s} {'final B':>8s} {'points':>6s}")
    for scheme, d, s, fa, fb, n in rows:
        print(f"{scheme:12s} {d:10.6f} {s:7d} {fa:8.4f} {fb:8.4f} {n:6d}")
    worst = max(r[1] for r in rows)
    if args.tolerance is not None:
        ok = worst <= args.tolerance
        print(f"largest difference {worst:.6f} {'<=' if ok else '>'} tolerance {args.tolerance}")
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
