"""The timing and reporting both torch.compile baselines share (benchmarks/torch_compile_fp8.py, _fp4.py): the
method of benchmarks/gpu_quant_fp*_bench.cu (warm-up, CUDA events around each call, queued or synced, median and p10/p90 of >= 20 runs, two
rotating inputs, effective bandwidth = (bytes read + written) / median next to a device-to-device copy
of the same input measured in the same run), on the CodonFM-5B tensors."""
import argparse
import json
import os

import torch

SHAPES = [("act 15872x4096", 15872, 4096), ("act 15872x16384", 15872, 16384), ("weight 4096x16384", 4096, 16384)]


def time_it(fn, inputs, reps, timing="synced"):
    """Median, p10, p90 in ms of fn over reps calls, events around each call (benchmarks/event_timing.hpp):
    synced (the default) = a wait after each call; queued = the calls enqueued back to back, one wait at the end."""
    for i in range(3):
        fn(inputs[i % 2])
    torch.cuda.synchronize()
    events = []
    for i in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn(inputs[i % 2])
        b.record()
        if timing == "synced":
            b.synchronize()
        events.append((a, b))
    torch.cuda.synchronize()
    ms = sorted(a.elapsed_time(b) for a, b in events)
    q = lambda p: ms[int(p * (len(ms) - 1) + 0.5)]
    return q(0.5), q(0.1), q(0.9)


def write_json(path, out):
    """Writes out to path through a temporary file and a rename, so path is either whole or absent."""
    with open(path + ".tmp", "w") as f:
        json.dump(out, f, indent=2)
    os.replace(path + ".tmp", path)


def run(cases_for, width=36):
    """cases_for(n) -> [(label, fn(x), bytes)] for a tensor of n elements; prints and --json writes."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--timing", choices=["synced", "queued"], default="synced")
    args = ap.parse_args()
    reps = max(20, args.reps)
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "reps": reps, "timing": args.timing, "complete": False,
           "shapes_done": [], "results": []}
    print(f"{'shape':<20} {'function':<{width}} {'median_us':>9} {'p10_us':>9} {'p90_us':>9} {'TB/s':>7} {'vs_copy':>7}")
    for name, r, c in SHAPES:
        n = r * c
        xs = [torch.randn(r, c, device="cuda", dtype=torch.bfloat16) for _ in range(2)]
        dst = torch.empty_like(xs[0])
        copy = time_it(lambda x: dst.copy_(x), xs, reps, args.timing)
        copy_tbs = 4.0 * n / (copy[0] * 1e-3) / 1e12
        rows = [("d2d copy (reference)", copy, 4.0 * n)]
        for label, fn, nbytes in cases_for(n):
            rows.append((label, time_it(fn, xs, reps, args.timing), nbytes))
        for label, (med, p10, p90), nbytes in rows:
            tbs = nbytes / (med * 1e-3) / 1e12
            print(f"{name:<20} {label:<{width}} {med*1e3:9.1f} {p10*1e3:9.1f} {p90*1e3:9.1f} {tbs:7.2f} {tbs/copy_tbs:7.2f}")
            out["results"].append({"shape": name, "rows": r, "cols": c, "function": label, "bytes": nbytes,
                                   "median_ms": med, "p10_ms": p10, "p90_ms": p90, "tb_per_s": tbs,
                                   "copy_tb_per_s": copy_tbs, "ratio_to_copy": tbs / copy_tbs})
        out["shapes_done"].append(name)
        if args.json:  # what is measured so far, under a name that says so (a timeout keeps it)
            write_json(args.json + ".partial", out)
    if args.json:
        out["complete"] = True
        write_json(args.json, out)
        os.remove(args.json + ".partial")
        print("wrote", args.json)
