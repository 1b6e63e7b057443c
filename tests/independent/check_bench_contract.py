#!/usr/bin/env python3
"""`nibble bench --json --csv` against the interface contract of docs/bench-output.md, read as a
consumer would.

Runs the CLI (no GPU: the prediction path, or --gpu) and checks, with the standard library only:
- JSON top level: `gpu` (a name), `predicted` (true here), `summary` with one entry per (recipe, mode),
  each with `recipe`, `mode` in {pre-quantized, step, per-gemm}, `layer_ms` > 0, `speedup_vs_bf16` and a
  non-empty `path`;
- arithmetic a reader would redo: speedup_vs_bf16 = bf16's layer_ms / layer_ms in the same mode (and
  speedup_vs_baseline with `baseline_recipe`'s); quant_overhead_ms = autocast minus pre-quantized layer_ms;
  layer_ms = the sum over the layer's GEMM rows of (GEMM + quantization) ms x count; model_ms = layer_ms x
  layers + the once-per-model GEMMs;
- every row's `bound_ms` = the GEMM time on pre-quantized operands (step: the pre-quantized row's; per-gemm:
  its own) + quant_bytes / copy bandwidth; `sweeps` = 1 without --repeat;
- CSV: exactly one row per (GEMM, recipe, mode), flops = 2 M K N x count, the same GPU and `predicted`.
Usage: check_bench_contract.py PATH/TO/nibble   (run from the repository root; ctest does)
"""
import csv
import json
import os
import sys
import tempfile

from cli_checks import check, close, failures, run_nibble

MODES = {"pre-quantized", "step", "per-gemm"}


def run_case(args):
    with tempfile.TemporaryDirectory() as tmp:
        js, cs = os.path.join(tmp, "r.json"), os.path.join(tmp, "r.csv")
        run_nibble("bench", "--quiet", "--json", js, "--csv", cs, *args)
        result = json.load(open(js))
        rows = list(csv.DictReader(open(cs)))
    tag = " ".join(args) or "(defaults)"
    check(isinstance(result.get("gpu"), str) and result["gpu"], f"{tag}: gpu is not a name: {result.get('gpu')!r}")
    check(result.get("predicted") is True, f"{tag}: predicted should be true on the prediction path")
    layers = result["model"]["layers"]

    by_key = {}
    for s in result["summary"]:
        key = (s["recipe"], s["mode"])
        check(key not in by_key, f"{tag}: summary lists {key} twice")
        by_key[key] = s
        check(s["mode"] in MODES, f"{tag}: summary mode {s['mode']!r}")
        check(s["layer_ms"] > 0, f"{tag}: {key} layer_ms {s['layer_ms']}")
        check(isinstance(s["path"], str) and s["path"], f"{tag}: {key} has no path")
    baseline = result["baseline_recipe"]
    for (recipe, mode), s in by_key.items():
        bf16 = by_key.get(("bf16", mode))
        if bf16:
            check(close(s["speedup_vs_bf16"], bf16["layer_ms"] / s["layer_ms"]),
                  f"{tag}: {recipe} {mode} speedup_vs_bf16 {s['speedup_vs_bf16']} != {bf16['layer_ms'] / s['layer_ms']}")
        base = by_key.get((baseline, mode))
        if base:
            check(close(s["speedup_vs_baseline"], base["layer_ms"] / s["layer_ms"]),
                  f"{tag}: {recipe} {mode} speedup_vs_baseline ({baseline}) {s['speedup_vs_baseline']}")
        # docs/spec.md §6: the quantization overhead is autocast minus pre-quantized, when both ran.
        pre = by_key.get((recipe, "pre-quantized"))
        if mode != "pre-quantized" and pre:
            check(close(s["quant_overhead_ms"], s["layer_ms"] - pre["layer_ms"], 1e-6),
                  f"{tag}: {recipe} {mode} quant_overhead_ms {s['quant_overhead_ms']} != "
                  f"{s['layer_ms'] - pre['layer_ms']} (autocast minus pre-quantized)")

    # The bandwidth bound of every row: its GEMMs on pre-quantized operands (step: the pre-quantized row of the
    # same GEMM; per-gemm: its own, which runs with Transformer Engine's settings) + quantization bytes / copy.
    copy = result["copy_bandwidth_gbs"]
    check(copy > 0, f"{tag}: copy_bandwidth_gbs {copy}")
    check(result.get("sweeps") == 1, f"{tag}: sweeps {result.get('sweeps')!r} (one sweep without --repeat)")
    pre_gemm = {(g["layer"], g["pass"], g["recipe"], g["m"], g["k"], g["n"]): g["gemm_ms"]
                for g in result["gemms"] if g["mode"] == "pre-quantized" and g["error"] is None}
    for g in result["gemms"]:
        if g["error"] is not None:
            continue
        own = g["gemm_ms"]
        gemm = pre_gemm.get((g["layer"], g["pass"], g["recipe"], g["m"], g["k"], g["n"]), own) if g["mode"] == "step" else own
        want = gemm + g["quant_bytes"] / (copy * 1e9) * 1e3
        check(close(g["bound_ms"], want, 1e-9),
              f"{tag}: {g['layer']} {g['pass']} {g['recipe']} {g['mode']} bound_ms {g['bound_ms']} != {want}")

    seen = set()
    layer_sum, once_sum = {}, {}
    for r in rows:
        key = (r["layer"], r["pass"], r["recipe"], r["mode"])
        check(key not in seen, f"{tag}: CSV row {key} twice")
        seen.add(key)
        m, k, n, count = (int(r[f]) for f in ("m", "k", "n", "count"))
        check(int(r["flops"]) == 2 * m * k * n * count, f"{tag}: CSV {key} flops {r['flops']} != 2MKN x count")
        check(r["gpu"] == result["gpu"] and r["predicted"] == "true", f"{tag}: CSV {key} gpu/predicted columns")
        target = once_sum if r["per_model"] == "true" else layer_sum
        target[(r["recipe"], r["mode"])] = target.get((r["recipe"], r["mode"]), 0.0) + float(r["total_ms"]) * count
    n_gemms = len({(k[0], k[1]) for k in seen})
    check(len(seen) == n_gemms * len(by_key), f"{tag}: {len(seen)} CSV rows for {n_gemms} GEMMs x {len(by_key)} (recipe, mode)")
    for key, s in by_key.items():
        check(close(s["layer_ms"], layer_sum.get(key, 0.0), 1e-6),
              f"{tag}: {key} layer_ms {s['layer_ms']} != sum of its CSV rows {layer_sum.get(key)}")
        check(close(s["model_ms"], s["layer_ms"] * layers + once_sum.get(key, 0.0), 1e-6),
              f"{tag}: {key} model_ms {s['model_ms']} != layer_ms x {layers} + once-per-model {once_sum.get(key, 0.0)}")
    return len(by_key)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    n = run_case([])
    n += run_case(["--mode", "all", "--model", "llama-3-8b", "--lm-head", "--gpu", "B200"])
    n += run_case(["--recipes", "bf16", "fp8-current", "quartet", "--gpu", "H100 SXM", "--mbs", "4", "--seq", "2048",
                   "--baseline", "fp8-current"])
    print(f"bench contract: {n} (recipe, mode) entries in 3 runs; {len(failures)} failures")
    sys.exit(1 if failures else 0)
