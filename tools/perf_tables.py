#!/usr/bin/env python3
"""Markdown tables from the JSON files one GPU run wrote (nibble bench, gpu_gemm_bench, the kernel
benchmarks, the Triton and torch.compile comparisons), for the performance docs; DIR is one result folder
(docs/results/<gpu>-<date>/ or a fresh output folder). Reads what exists in DIR."""
import json
import os
import sys


def load(d, name):
    p = os.path.join(d, name)
    return json.load(open(p)) if os.path.exists(p) else None


def fmt(x, n=2):
    return "-" if x is None or x != x else f"{x:.{n}f}"


def total(x):
    return sum(x.values()) if isinstance(x, dict) else x


def bench_table(b):
    out = [f"`{b['command_line']}` on {b['gpu']}, {b['date']}; copy bandwidth measured in the same run "
           f"{b['copy_bandwidth_gbs']:.0f} GB/s.", "",
           "| recipe | mode | layer ms | GEMM ms | quant ms | bound ms | vs bf16 | fwd / bwd speedup | path |",
           "|---|---|---|---|---|---|---|---|---|"]
    for s in b["summary"]:
        out.append(f"| {s['recipe']} | {s['mode']} | {fmt(s['layer_ms'])} | {fmt(total(s.get('gemm_ms')))} | "
                   f"{fmt(total(s.get('quant_ms')))} | {fmt(s.get('bound_layer_ms'))} | {fmt(s['speedup_vs_bf16'], 3)}x | "
                   f"{fmt(s.get('forward_speedup_vs_bf16'))} / {fmt(s.get('backward_speedup_vs_bf16'))} | {s['path']} |")
    return out


def gemm_table(g):
    out = [f"gpu_gemm_bench on {g['device']}, cuBLASLt {g['cublaslt_version']}, {g['reps']} timed runs "
           f"(median), {g['warmup']} warm-up, {g['operand_sets']} rotating operand sets.", "",
           "| variant | layer ms (12 GEMMs) | vs bf16 | path | note |", "|---|---|---|---|---|"]
    for r in g["recipes"]:
        err = (r.get("error") or "")[:90]
        out.append(f"| {r['recipe']} | {fmt(r.get('layer_ms'))} | {fmt(r.get('speedup_vs_bf16'), 3)}x | "
                   f"{r.get('path') or '-'} | {err or r.get('note', '')} |")
    return out


def kernel_table(k, title):
    out = [f"{title}: median of the timed runs; ratio = (bytes read + written) / time over a device copy "
           "measured in the same run.", "", "| tensor | kernel | median ms | ratio to copy |", "|---|---|---|---|"]
    for r in k["results"]:
        out.append(f"| {r['shape']} | {r['kernel']} | {fmt(r['median_ms'], 3)} | {fmt(r['ratio_to_copy'], 3)} |")
    return out


def torch_table(t):
    rows = t.get("results") or t.get("rows") or []
    out = ["| tensor | kernel | median us | ratio to copy |", "|---|---|---|---|"]
    for r in rows:
        med = r.get("median_us", r.get("median_ms", 0) * 1000)
        name = r.get("kernel", r.get("function", r.get("name", "")))
        out.append(f"| {r.get('shape', '')} | {name} | {fmt(med, 1)} | "
                   f"{fmt(r.get('ratio_to_copy', r.get('ratio')), 3)} |")
    return out


# torch.compile function -> the nibble kernels doing the same work (the fastest one counts).
TORCH_TO_NIBBLE = {
    "fp8 cast+transpose+amax (e4m3)": ["fp8 cast+transpose+amax (delayed, e4m3)"],
    "fp8 current scaling (e5m2)": ["fp8 current 2 launches (e5m2)", "fp8 current single launch (e4m3)"],
    "fp8-block 1x128 rowwise": ["fp8-block 1x128 rowwise only"],
    "fp8-block 1x128 row+col": ["fp8-block 1x128 row+col"],
    "mxfp8 ocp rowwise": ["mxfp8 ocp rowwise only"],
    "mxfp8 ocp row+col": ["mxfp8 ocp row+col"],
}


def versus_torch_table(kernels, torch_runs):
    """nibble's kernel vs torch.compile of the same math, same tensor, same call (nibble's kernels aim never to be slower)."""
    ms = {}
    for k in kernels:
        for r in k["results"]:
            ms[(r["shape"], r["kernel"])] = r["median_ms"]
    out = ["| tensor | function | torch.compile ms | nibble ms (kernel) | torch / nibble |", "|---|---|---|---|---|"]
    slower = []
    for t in torch_runs:
        for r in t.get("results", []):
            name = r.get("function", "")
            if name.startswith("d2d copy"):
                continue
            cands = [(ms[(r["shape"], n)], n) for n in TORCH_TO_NIBBLE.get(name, [name]) if (r["shape"], n) in ms]
            if not cands:
                continue
            best, kname = min(cands)
            ratio = r["median_ms"] / best
            if ratio < 1:
                slower.append(f"{r['shape']} {name}")
            out.append(f"| {r['shape']} | {name} | {fmt(r['median_ms'], 3)} | {fmt(best, 3)} ({kname}) | {fmt(ratio)}x |")
    out += ["", "nibble slower than torch.compile: " + (", ".join(slower) if slower else "none")]
    return out


def main():
    d = sys.argv[1]
    lines = []
    if (b := load(d, "bench.json")):
        lines += ["### nibble bench (codonfm-5b, 31 x 512)", ""] + bench_table(b) + [""]
    if (g := load(d, "gemm.json")):
        lines += ["### GEMMs alone (pre-quantized operands)", ""] + gemm_table(g) + [""]
    for name, title in (("gpu_quant_fp8_bench.json", "FP8-family kernels"),
                        ("gpu_quant_fp4_bench.json", "FP4/Quartet kernels")):
        if (k := load(d, name)):
            lines += [f"### {title}", ""] + kernel_table(k, title) + [""]
    torch_runs = []
    for name, title in (("torch_compile_fp8.json", "torch.compile, FP8 family (same run)"),
                        ("torch_compile_fp4.json", "torch.compile, FP4 family (same run)")):
        t = load(d, name)
        if not t and (t := load(d, name + ".partial")):  # the script stopped (timeout) after these shapes
            title += f" -- PARTIAL: only {', '.join(t.get('shapes_done', []))} (the script stopped before the rest)"
        if t:
            lines += [f"### {title}", ""] + torch_table(t) + [""]
            torch_runs.append(t)
    kernels = [k for k in (load(d, "gpu_quant_fp8_bench.json"), load(d, "gpu_quant_fp4_bench.json")) if k]
    if kernels and torch_runs:
        lines += ["### nibble vs torch.compile (same run)", ""] + versus_torch_table(kernels, torch_runs) + [""]
    if (t := load(d, "triton.json")):
        lines += ["### Triton tl.dot_scaled MXFP4 (same shapes)", "", "```", json.dumps(
            {k: v for k, v in t.items() if not isinstance(v, list)}, indent=1), "```", ""]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
