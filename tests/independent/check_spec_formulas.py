#!/usr/bin/env python3
"""The nibble CLI against docs/spec.md §5 and §7, re-derived here from the spec's text with the standard library.

docs/spec.md §5 (model config -> GEMMs): for Hugging Face config.json files (tests/workload/fixtures) and flags,
with GQA, an explicit head_dim (Gemma: heads x head_dim != hidden), gated MLPs, tensor parallelism, the LM
head and a mixture of experts, the set of (layer, pass, M, K, N, count) of `nibble shapes --format json`
must equal this file's derivation:
  fprop M=T K=I N=O; dgrad M=T K=O N=I; wgrad M=I K=T N=O; FLOPs = 2MKN (x count);
  QKV O = heads*head_dim + 2*kv_heads*head_dim; attention output I = heads*head_dim, O = H;
  MLP up O = F (2F gated); down I = F, O = H; TP: QKV and up O/tp, attention output and down I/tp;
  MoE: per expert T*top_k/experts tokens, one GEMM per expert.
Plus the reference number of docs/spec.md §5: one CodonFM-5B layer at T = 15,872 is 19.17 TFLOP.

docs/spec.md §7 (scaling law and planner): `nibble law predict` and `nibble law plan` against
L = (A/(N effN)^alpha + B/(D effD)^beta)^gamma + E with the published constants, sp_tr = 1/(1/(3 sp_fw) +
2/(3 sp_bw)), each scheme evaluated at L(N sp_fw, D sp_tr/sp_fw); the plan's best is the argmin and its
FP4:FP4 threshold is where FP4:FP4 and FP8:FP8 cross (found here by bisection).

Usage: check_spec_formulas.py PATH/TO/nibble   (run from the repository root; ctest does)
"""
import json
import math
import os
import sys

from cli_checks import check, close, failures, run_nibble

FIXTURES = os.path.join("tests", "workload", "fixtures")
GATED_MODEL_TYPES = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "gemma"}  # SwiGLU / GeGLU MLPs


def nibble(*args):
    return json.loads(run_nibble(*args))


# ---- docs/spec.md §5 --------------------------------------------------------------------------------

def arch_of_hf(path):
    c = json.load(open(path))
    heads = c["num_attention_heads"]
    experts = c.get("num_local_experts", c.get("num_experts", 0)) or 0
    return {
        "hidden": c["hidden_size"], "ffn": c["intermediate_size"], "heads": heads,
        "kv_heads": c.get("num_key_value_heads") or heads,
        "head_dim": c.get("head_dim") or c["hidden_size"] // heads,
        "gated": c.get("model_type") in GATED_MODEL_TYPES, "vocab": c["vocab_size"],
        "experts": experts, "top_k": c.get("num_experts_per_tok", 0),
        "moe_ffn": c.get("moe_intermediate_size") or c["intermediate_size"],
    }


def expected_gemms(a, tokens, tp=1, lm_head=False):
    """{(layer, pass): (m, k, n, count)} from docs/spec.md §5."""
    h, hd = a["hidden"], a["head_dim"]
    linears = [("qkv", h, (a["heads"] + 2 * a["kv_heads"]) * hd // tp, tokens, 1),
               ("attn_out", a["heads"] * hd // tp, h, tokens, 1)]
    if a["experts"]:
        per_expert = tokens * a["top_k"] // a["experts"]
        up = a["moe_ffn"] * (2 if a["gated"] else 1)
        linears += [("mlp_up", h, up // tp, per_expert, a["experts"]),
                    ("mlp_down", a["moe_ffn"] // tp, h, per_expert, a["experts"])]
    else:
        linears += [("mlp_up", h, a["ffn"] * (2 if a["gated"] else 1) // tp, tokens, 1),
                    ("mlp_down", a["ffn"] // tp, h, tokens, 1)]
    if lm_head:
        linears.append(("lm_head", h, a["vocab"], tokens, 1))
    out = {}
    for layer, i, o, t, count in linears:
        out[(layer, "fprop")] = (t, i, o, count)
        out[(layer, "dgrad")] = (t, o, i, count)
        out[(layer, "wgrad")] = (i, t, o, count)
    return out


def shapes_of(args):
    got = {}
    for g in nibble("shapes", "--format", "json", *args)["gemms"]:
        key = (g["layer"], g["pass"])
        check(key not in got, f"shapes {args}: {key} listed twice")
        got[key] = (g["m"], g["k"], g["n"], g["count"])
        check(g["flops"] == 2 * g["m"] * g["k"] * g["n"] * g["count"],
              f"shapes {args}: {key} flops {g['flops']} != 2MKN x count")
    return got


def check_shapes(name, args, arch, tokens, tp=1, lm_head=False):
    got = shapes_of(args)
    want = expected_gemms(arch, tokens, tp, lm_head)
    check(got == want, f"{name}: nibble shapes {args}\n  got  {sorted(got.items())}\n  want {sorted(want.items())}")


def spec5():
    cases = 0
    for fixture, mbs, seq, tp, lm in [("llama-3-8b", 1, 4096, 1, True), ("llama-3-8b", 2, 2048, 4, False),
                                      ("qwen2.5-7b", 3, 1024, 2, False), ("gemma-7b", 2, 1024, 2, False),
                                      ("gemma-7b", 1, 512, 1, True), ("esm2-15b", 8, 1024, 1, True),
                                      ("mixtral-8x7b", 1, 4096, 1, False), ("mixtral-8x7b", 2, 2048, 2, False)]:
        path = os.path.join(FIXTURES, f"{fixture}.config.json")
        args = ["--hf-config", path, "--mbs", str(mbs), "--seq", str(seq), "--tp", str(tp)] + (["--lm-head"] if lm else [])
        check_shapes(fixture, args, arch_of_hf(path), mbs * seq, tp, lm)
        cases += 1
    # Flags alone: GQA with an explicit head_dim, non-gated.
    flags = {"hidden": 2048, "ffn": 5632, "heads": 16, "kv_heads": 4, "head_dim": 160, "gated": False,
             "vocab": 32000, "experts": 0, "top_k": 0, "moe_ffn": 0}
    args = ["--hidden", "2048", "--ffn", "5632", "--heads", "16", "--kv-heads", "4", "--head-dim", "160",
            "--layers", "2", "--vocab", "32000", "--no-gated", "--mbs", "5", "--seq", "384", "--lm-head"]
    check_shapes("flags", args, flags, 5 * 384, 1, True)
    cases += 1
    # The reference of docs/spec.md §5: one CodonFM-5B layer at 31 x 512 is 19.17 TFLOP of linear-layer GEMM work.
    layer = sum(g["flops"] for g in nibble("shapes", "--format", "json")["gemms"] if not g["per_model"])
    check(abs(layer / 1e12 - 19.17) < 0.005, f"codonfm-5b layer {layer / 1e12:.3f} TFLOP, docs/spec.md §5 says 19.17")
    return cases + 1


# ---- docs/spec.md §7 --------------------------------------------------------------------------------

A, ALPHA, B, BETA, E, GAMMA = 1.52e5, 0.589, 5.25e5, 0.544, 1.35, 0.274
EFF = {"fp8": (1.0, 1.0), "fp4": (0.65, 0.95)}  # published Quartet effN (forward), effD (backward)


def loss(n, d, eff_n=1.0, eff_d=1.0):
    return (A / (n * eff_n) ** ALPHA + B / (d * eff_d) ** BETA) ** GAMMA + E


def scheme_loss(n, d, fwd, bwd, sp_fw, sp_bw):
    fw = sp_fw if fwd == "fp4" else 1.0
    bw = sp_bw if bwd == "fp4" else 1.0
    sp_tr = 1.0 / (1.0 / (3 * fw) + 2.0 / (3 * bw))
    return loss(n * fw, d * sp_tr / fw, EFF[fwd][0], EFF[bwd][1])


def spec7():
    cases = 0
    for n, d in [(1e8, 2e9), (1e9, 2e10), (7e9, 1e12), (3e7, 2.4e10)]:
        got = nibble("law", "predict", "--n", repr(n), "--d", repr(d), "--format", "json")["loss"]
        check(close(got, loss(n, d)), f"law predict N={n:g} D={d:g}: {got} vs {loss(n, d)}")
        got = nibble("law", "predict", "--n", repr(n), "--d", repr(d), "--scheme", "quartet", "--format", "json")["loss"]
        check(close(got, loss(n, d, 0.65, 0.95)), f"law predict quartet N={n:g} D={d:g}: {got} vs {loss(n, d, .65, .95)}")
        for sp_fw, sp_bw in [(1.8, 1.5), (1.2, 1.1), (2.0, 2.0)]:
            plan = nibble("law", "plan", "--n", repr(n), "--d", repr(d), "--sp-fwd", repr(sp_fw), "--sp-bwd",
                          repr(sp_bw), "--format", "json")
            want = {f"{f}:{b}": scheme_loss(n, d, f, b, sp_fw, sp_bw) for f in ("fp8", "fp4") for b in ("fp8", "fp4")}
            for s, v in want.items():
                check(close(plan["schemes"][s]["loss"], v), f"law plan {n:g},{d:g},{sp_fw},{sp_bw} {s}: "
                      f"{plan['schemes'][s]['loss']} vs {v}")
            check(plan["best"] == min(want, key=want.get), f"law plan best {plan['best']} vs {min(want, key=want.get)}")
            # FP4:FP4 against FP8:FP8 along D/N at this N: the crossing, by bisection on log(D/N).
            f = lambda r: scheme_loss(n, n * r, "fp4", "fp4", sp_fw, sp_bw) - scheme_loss(n, n * r, "fp8", "fp8", 1, 1)
            lo, hi = 1e-3, 1e9
            if f(lo) > 0 > f(hi):
                for _ in range(200):
                    mid = math.sqrt(lo * hi)
                    lo, hi = (mid, hi) if f(mid) > 0 else (lo, mid)
                got = plan["fp4_fp4_threshold"]["tokens_per_param"]
                check(got is not None and close(got, lo, 1e-3), f"FP4:FP4 threshold N={n:g} sp {sp_fw},{sp_bw}: {got} vs {lo}")
            cases += 1
    return cases


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    n5, n7 = spec5(), spec7()
    print(f"docs/spec.md §5: {n5} configurations, §7: {n7} law/plan cases; {len(failures)} failures")
    sys.exit(1 if failures else 0)
