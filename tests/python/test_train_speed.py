"""train/speed.py's orchestration on CPU (a smoke test of the table, not a speed measurement): one process per
configuration, all warm before any is timed, a row per configuration with its fractions of the peer and of
bf16, and a configuration that fails is an error row and a non-zero exit."""
import json
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TINY = ["--device", "cpu", "--backend", "emulated", "--size", "tiny=1,64,2,1e-3", "--sizes", "tiny", "--batch", "2",
        "--seq-len", "32", "--steps", "2", "--warmup", "1"]


def speed(tmp_path, schemes):
    out = tmp_path / "speed.json"
    r = subprocess.run([sys.executable, os.path.join(ROOT, "train", "speed.py"), *TINY, "--schemes", schemes,
                        "--json", str(out)], capture_output=True, text=True, timeout=300)
    return r, (json.loads(out.read_text()) if out.exists() else None)


def test_every_configuration_gets_a_row_with_its_fractions(tmp_path):
    r, doc = speed(tmp_path, "peer,bf16,quartet")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    rows = {row["scheme"]: row for row in doc["rows"]}
    assert set(rows) == {"peer", "bf16", "quartet"}
    for s, row in rows.items():
        assert row["tokens_per_s"] > 0 and row["steps"] == 2
        assert abs(row["of_peer"] - row["tokens_per_s"] / rows["peer"]["tokens_per_s"]) < 1e-12
        assert abs(row["of_bf16"] - row["tokens_per_s"] / rows["bf16"]["tokens_per_s"]) < 1e-12
    assert rows["peer"]["path_kind"] == "torch" and "no nibble" in rows["peer"]["path"]
    assert rows["quartet"]["path_kind"] == "emulated"
    assert rows["bf16"]["target"] == 0.9 and rows["bf16"]["target_met"] == (rows["bf16"]["of_peer"] >= 0.9)
    assert "tiny" in r.stdout and "of peer" in r.stdout


def test_a_failing_configuration_is_an_error_row_and_exit_1(tmp_path):
    r, doc = speed(tmp_path, "bf16,no-such-scheme")
    assert r.returncode == 1
    bad = [row for row in doc["rows"] if row["scheme"] == "no-such-scheme"]
    assert len(bad) == 1 and "error" in bad[0] and not doc["all_targets_met"]
    assert any(row["scheme"] == "bf16" and row["tokens_per_s"] > 0 for row in doc["rows"])
