#!/usr/bin/env python3
"""How much of a `nibble bench` result is the GEMMs' row-to-row variation (docs/timing-noise.md).

For each bench JSON given: (1) the same GEMMs timed twice, bf16 pre-quantized vs bf16 step (identical
work: the step mode of bf16 quantizes nothing), per GEMM and per layer; (2) fp8-delayed vs fp8-current
pre-quantized (the same E4M3 x E4M3 fprop operands: both scale the same tensors by 448 / amax), per
pass; (3) every recipe's pre-quantized layer time; (4) where the file has them, each recipe's layer timed
as one sequence over the sum of its separately timed parts (what the separate timing leaves out).
Usage: bench_noise.py BENCH.json [BENCH.json ...]
"""
import json
import sys


def rows(result):
    out = {}
    for g in result["gemms"]:
        if g.get("error") or not g.get("gemm_ms"):
            continue
        out[(g["recipe"], g["layer"], g["pass"], g["mode"])] = g
    return out


def main(paths):
    for path in paths:
        try:
            result = json.load(open(path))
        except (OSError, ValueError) as e:
            print(f"{path}: not read ({e})")
            continue
        r = rows(result)
        print(f"== {path}  ({result.get('command_line', '')})")
        same = [(k, r[k]["gemm_ms"] / r[(k[0], k[1], k[2], "pre-quantized")]["gemm_ms"])
                for k in r if k[0] == "bf16" and k[3] == "step" and k[1] != "lm_head"
                and (k[0], k[1], k[2], "pre-quantized") in r]
        if same:
            ratios = sorted(x for _, x in same)
            print(f"  bf16 step / pre-quantized, same GEMMs: per GEMM {ratios[0]:.3f} .. {ratios[-1]:.3f} "
                  f"over {len(ratios)} GEMMs")
        layer = {(s["recipe"], s["mode"]): s["layer_ms"] for s in result.get("summary", [])}
        if ("bf16", "step") in layer and ("bf16", "pre-quantized") in layer:
            print(f"  bf16 layer: step / pre-quantized = {layer[('bf16', 'step')] / layer[('bf16', 'pre-quantized')]:.3f}")
        for p in ("fprop", "dgrad", "wgrad"):
            d = sum(g["gemm_ms"] * g["count"] for k, g in r.items()
                    if k[0] == "fp8-delayed" and k[2] == p and k[3] == "pre-quantized" and k[1] != "lm_head")
            c = sum(g["gemm_ms"] * g["count"] for k, g in r.items()
                    if k[0] == "fp8-current" and k[2] == p and k[3] == "pre-quantized" and k[1] != "lm_head")
            if d and c:
                print(f"  {p}: fp8-delayed {d:6.3f} ms, fp8-current {c:6.3f} ms, current / delayed {c / d:.3f}")
        pre = [f"{rc}={ms:.2f}" for (rc, m), ms in layer.items() if m == "pre-quantized"]
        print("  pre-quantized layer ms: " + " ".join(pre))
        seq = [(s["recipe"], s["mode"], s["sequence_layer_ms"] / s["layer_ms"]) for s in result.get("summary", [])
               if s.get("sequence_layer_ms") and s.get("layer_ms")]
        if seq:
            print("  sequence / sum of parts, per layer: " + " ".join(f"{rc}:{m}={x:.3f}" for rc, m, x in seq))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
