"""benchmarks/step_report.py: the step benchmark's HTML report renders every row, escapes what it prints,
needs nothing from the network, and refuses malformed input without leaving a file."""
import json
import os
import random
import subprocess
import sys

import pytest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import step_report  # noqa: E402

RECORDED = os.path.join(ROOT, "docs", "results", "h200-2026-12-04-training", "step-codonfm-5b.json")


def synthetic(rng):
    base = rng.uniform(20, 40)
    rows = [dict(recipe="bf16", median_ms=base, min_ms=base * 0.98, max_ms=base * 1.03, path="native bf16 (torch)")]
    for name in ("fp8-current", "quartet", "nvfp4"):
        ms = base / rng.uniform(0.6, 1.8)
        rows.append(dict(recipe=name, median_ms=ms, min_ms=ms * 0.99, max_ms=ms * 1.02, step_speedup_vs_bf16=base / ms,
                         gemm_speedup=rng.uniform(0.7, 2.0), projected_step_speedup=rng.uniform(0.7, 1.8),
                         path=f"cuda {name} forward: <GEMM> & more"))
    return dict(model=dict(hidden=4096, ffn=16384, heads=32, kv_heads=8, gated=True, tokens=8192), gpu="GPU <x>",
                torch="2.x", reps=5, warmup=2, bf16_gemm_ms=dict(median=base * 0.8), gemm_bench=None, results=rows)


def test_every_row_and_number_is_in_the_report_and_text_is_escaped():
    rng = random.Random()
    r = synthetic(rng)
    page = step_report.render_html(r)
    assert page.count("<svg") == 1 and page.count("<rect") == len(r["results"])
    for row in r["results"]:
        assert f">{row['recipe']}<" in page
        assert f"{row['median_ms']:.2f}" in page
    q = r["results"][2]
    assert f"{q['step_speedup_vs_bf16']:.2f}x" in page and f"{q['projected_step_speedup']:.2f}x" in page
    assert "<GEMM>" not in page and "&lt;GEMM&gt; &amp; more" in page and "GPU &lt;x&gt;" in page
    # Self-contained: the only URL is the SVG namespace.
    assert page.replace('xmlns="http://www.w3.org/2000/svg"', "").count("http") == 0
    assert "<script" not in page
    assert "(80%); 20% of the step is outside them" in page


def test_recorded_h200_result_renders():
    with open(RECORDED) as fi:
        result = json.load(fi)
    page = step_report.render_html(result)
    for row in result["results"]:
        assert f">{row['recipe']}<" in page


def test_cli_writes_atomically_and_refuses_malformed_input(tmp_path):
    good = tmp_path / "step.json"
    good.write_text(json.dumps(synthetic(random.Random())))
    out = tmp_path / "step.html"
    p = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "step_report.py"), str(good), "--html", str(out)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert sorted(os.listdir(tmp_path)) == ["step.html", "step.json"]  # no temporary left behind
    for bad in ('{"results": "x"}', '{"results": [{"recipe": "bf16"}]}', "not json", "[1, 2]"):
        src, dst = tmp_path / "bad.json", tmp_path / "bad.html"
        src.write_text(bad)
        p = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "step_report.py"), str(src), "--html",
                            str(dst)], capture_output=True, text=True)
        assert p.returncode != 0 and "step_report:" in p.stderr, (bad, p.stderr)
        assert not dst.exists()
