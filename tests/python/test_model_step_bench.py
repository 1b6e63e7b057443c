"""benchmarks/model_step_bench.py and its model (benchmarks/step_model.py) on CPU tensors: one step per row at tiny
dims on nibble's CPU reference, with torch.compile made to fail so the "compile failed" rows are exercised;
the JSON holds every row with numbers that agree with each other, the projection follows Amdahl's law from
the given `nibble bench` speedups, and the model is causal where it says so with rotary positions that
depend only on relative position. No GPU, torchao or compiler needed."""
import json
import math
import os
import random
import subprocess
import sys

import pytest
import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import model_step_bench as msb  # noqa: E402
import step_model  # noqa: E402

BLOCKS, ACCUM = 2, 2
TINY = ["--device", "cpu", "--hidden", "128", "--ffn", "256", "--heads", "4", "--kv-heads", "2", "--vocab", "96",
        "--micro-batch", "8", "--seq-len", "16", "--blocks", str(BLOCKS), "--grad-accum", str(ACCUM), "--reps", "1",
        "--warmup", "0", "--backend", "reference"]


def _no_compile(*args, **kwargs):
    raise RuntimeError("no inductor in this test")


def test_one_step_per_row_gives_consistent_json(tmp_path, monkeypatch):
    monkeypatch.setattr(torch, "compile", _no_compile, raising=False)
    rng = random.Random()
    speedups = {r: rng.uniform(0.5, 3.0) for r in msb.NIBBLE_RECIPES}
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps(dict(tokens=128, predicted=True, summary=[
        dict(recipe=r, mode="step", speedup_vs_bf16=g) for r, g in speedups.items()])))
    out = tmp_path / "step.json"
    msb.main(TINY + ["--bench-json", str(bench), "--json", str(out)])
    doc = json.loads(out.read_text())
    assert doc["gpu"] == "cpu (smoke test)" and doc["torch"] == torch.__version__ and "torchao" in doc
    assert "--grad-accum 2" in doc["command"]
    m = doc["model"]
    assert (m["blocks"], m["grad_accum"], m["tokens_per_step"], m["causal"]) == (BLOCKS, ACCUM, 8 * 16 * ACCUM, True)
    built = msb.build_model(m, "cpu")
    assert m["parameters"] == sum(p.numel() for p in built.parameters())
    rows = {r["name"]: r for r in doc["rows"]}
    want = {"bf16 eager", "bf16 compiled"} | {"torchao tensorwise compiled", "torchao rowwise compiled"}
    for r in msb.NIBBLE_RECIPES:
        want |= {f"nibble {r} eager", f"nibble {r} eager weight_cache", f"nibble {r} compiled"}
    assert set(rows) == want
    base = rows["bf16 eager"]["median_ms"]
    assert base > 0 and rows["bf16 eager"]["path"] == "native bf16 (torch)"
    gemm_ms = doc["converted_gemm_ms_per_step"]
    assert gemm_ms > 0
    for name, r in rows.items():
        if r["compiled"]:
            assert r["median_ms"] is None
            assert r["note"].startswith("compile failed: RuntimeError: no inductor") or (
                r["kind"] == "torchao" and r["note"].startswith("torchao not installed")), (name, r["note"])
            continue
        assert r["median_ms"] > 0 and r["min_ms"] <= r["median_ms"] <= r["max_ms"], name
        assert math.isclose(r["tokens_per_s"], m["tokens_per_step"] / (r["median_ms"] / 1e3), rel_tol=1e-9)
        assert math.isclose(r["per_micro_batch_ms"], r["median_ms"] / ACCUM, rel_tol=1e-9)
        assert math.isclose(r["speedup_vs_bf16_eager"], base / r["median_ms"], rel_tol=1e-9)
        assert r["speedup_vs_bf16_compiled"] is None  # the compiled baseline failed
        if r["kind"] != "nibble":
            continue
        # Only the blocks' four linear layers run the recipe; the path names the backend that ran.
        assert r["converted_layers"] == 4 * BLOCKS, name
        assert "cpu-reference" in r["path"], (name, r["path"])
        g = speedups[r["recipe"]]
        f = min(gemm_ms / base, 1.0)
        assert r["gemm_speedup"] == g and r["projected_against"] == "bf16 eager"
        assert math.isclose(r["projected_speedup"], 1 / (1 - f + f / g), rel_tol=1e-9)
        if r["weight_cache"]:
            plain = rows[f"nibble {r['recipe']} eager"]
            assert r["uncached_per_micro_batch_ms"] == plain["per_micro_batch_ms"]
            assert math.isclose(r["weight_cache_saves_ms_per_micro_batch"],
                                plain["per_micro_batch_ms"] - r["per_micro_batch_ms"], rel_tol=1e-9, abs_tol=1e-12)


def test_a_failing_row_says_why_and_the_run_goes_on(tmp_path):
    # 8 x 8 = 64 tokens is not a multiple of fp8-block's 128-token wgrad block: that row fails, the others run.
    args = TINY + ["--micro-batch", "8", "--seq-len", "8", "--grad-accum", "1", "--no-compile",
                   "--recipes", "fp8-block,fp8-current", "--json", str(tmp_path / "s.json")]
    rows = {r["name"]: r for r in msb.main(args)["rows"]}
    assert set(rows) == {"bf16 eager", "nibble fp8-block eager", "nibble fp8-current eager"}
    assert rows["nibble fp8-block eager"]["median_ms"] is None
    assert rows["nibble fp8-block eager"]["note"].startswith("failed: ValueError") and "128" in \
        rows["nibble fp8-block eager"]["note"]
    assert rows["nibble fp8-current eager"]["median_ms"] > 0


def test_bad_arguments_name_the_field(tmp_path, capsys):
    for args, words in ((["--preset", "no-such-model"], ["no-such-model", "llama-3-8b"]),
                        (["--recipes", "fp9"], ["--recipes", "fp9", "nvfp4"]),
                        (["--torchao", "columnwise"], ["--torchao", "rowwise"]),
                        (["--heads", "3"], ["heads 3"]),
                        (["--json", str(tmp_path / "missing" / "x.json")], ["--json", "create it first"])):
        with pytest.raises(SystemExit):
            msb.main(TINY + args)
        err = capsys.readouterr().err
        assert all(w in err for w in words), (args, err)


def test_help_needs_no_torch(tmp_path):
    (tmp_path / "torch.py").write_text("raise ImportError('torch hidden by the test')\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    for script in ("model_step_bench.py", "step_bench.py"):
        p = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", script), "--help"], env=env,
                           capture_output=True, text=True)
        assert p.returncode == 0 and p.stdout.startswith("usage:"), (script, p.stderr)


def _logits(model, tokens):
    x = model.embed(tokens)
    rope = (model.rope_cos, model.rope_sin)
    for blk in model.blocks:
        x = blk(x, rope)
    return model.lm_head(model.norm(x))


@pytest.mark.parametrize("causal", [True, False])
def test_model_attends_only_where_it_says(causal):
    torch.manual_seed(random.randrange(1 << 30))
    model = step_model.LanguageModel(50, 64, 96, 4, 2, True, 2, 12, causal=causal).double()
    tokens = torch.randint(0, 50, (1, 12))
    changed = tokens.clone()
    changed[0, 7] = (tokens[0, 7] + 1) % 50
    a, b = _logits(model, tokens), _logits(model, changed)
    assert torch.equal(a[0, :7], b[0, :7]) == causal  # earlier positions see the later token only if bidirectional
    assert not torch.equal(a[0, 7:], b[0, 7:])


def test_rotary_scores_depend_only_on_relative_position():
    torch.manual_seed(random.randrange(1 << 30))
    cos, sin = step_model.rope_tables(40, 16, base=10000.0)
    cos, sin = cos.double(), sin.double()
    q, k = torch.randn(16, dtype=torch.float64), torch.randn(16, dtype=torch.float64)

    def score(i, j):
        return (step_model.apply_rope(q, cos[i], sin[i]) @ step_model.apply_rope(k, cos[j], sin[j])).item()
    i, j, s = random.randrange(20), random.randrange(20), random.randrange(1, 20)
    # The tables hold float32 angles: equal up to float32 rounding of cos and sin.
    assert math.isclose(score(i, j), score(i + s, j + s), rel_tol=1e-5, abs_tol=1e-5)
    assert not math.isclose(score(i, j), score(i, j + 1), rel_tol=1e-3, abs_tol=1e-3)
    assert math.isclose(score(0, 0), (q @ k).item(), rel_tol=1e-12)  # position 0 is not rotated
