#!/usr/bin/env python3
"""Compare the base and new sides of a same-call kernel A/B (scripts/gpu_call_kernel_ab.sh).

Usage: perf_ab_compare.py RUN_DIR [KERNEL_SUBSTRING]
Reads RUN_DIR/<i>-<side>-gpu_quant_fp{8,4}_bench.json and prints, per (shape, kernel), the range of
the median times of each side, the mean ratio to the copy measured in the same run, and the change
of the mean time (new vs base, negative = faster); then, for each knob run (knob-VAR-VALUE-<bench>.json,
KNOBS= of the A/B script), its time and ratio next to the new side's mean.
"""
import glob
import json
import os
import statistics as st
import sys


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    run, filt = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "")
    for bench in ("gpu_quant_fp8_bench", "gpu_quant_fp4_bench"):
        rows: dict = {}
        for f in sorted(glob.glob(os.path.join(run, f"*-{bench}.json"))):
            name = os.path.basename(f)
            side = name[len("knob-"):-len(f"-{bench}.json")] if name.startswith("knob-") else name.split("-")[1]
            for r in json.load(open(f))["results"]:
                rows.setdefault((r["shape"], r["kernel"]), {}).setdefault(side, []).append(
                    (r["median_ms"], r["ratio_to_copy"]))
        for (shape, kernel), v in rows.items():
            if filt not in kernel or "new" not in v or kernel.startswith("d2d copy"):
                continue
            n = [t for t, _ in v["new"]]
            nr = st.mean(x for _, x in v["new"])
            if "base" in v:
                b = [t for t, _ in v["base"]]
                br = st.mean(x for _, x in v["base"])
                print(f"{shape[:18]:18s} {kernel[:44]:44s} base {min(b):.4f}-{max(b):.4f} new {min(n):.4f}-{max(n):.4f} "
                      f"ratio {br:.3f}->{nr:.3f} {100 * (st.mean(n) / st.mean(b) - 1):+5.1f}%")
            else:  # BASE=none: the new side's runs and the knobs
                print(f"{shape[:18]:18s} {kernel[:44]:44s} new {min(n):.4f}-{max(n):.4f} ratio {nr:.3f}")
            for knob, runs in v.items():
                if knob in ("base", "new"):
                    continue
                t, r = runs[0]
                print(f"{'':18s}   knob {knob[:36]:36s} {t:.4f} ratio {r:.3f} {100 * (t / st.mean(n) - 1):+5.1f}% vs new")
    return 0


if __name__ == "__main__":
    sys.exit(main())
