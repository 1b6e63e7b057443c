"""train/train.py end to end on CPU with the torch emulation (the code path CUDA tensors take), tiny model:
every recipe trains and writes its outputs; a NaN or a divergence stops the run naming step and layer."""
import importlib.util
import os
import time
import xml.dom.minidom

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
TINY = ["--hidden", "64", "--layers", "1", "--heads", "2", "--seq-len", "32", "--batch", "2", "--val-batches", "1",
        "--device", "cpu", "--backend", "emulated"]


@pytest.fixture(scope="module")
def train_mod():
    spec = importlib.util.spec_from_file_location("nibble_train", os.path.join(ROOT, "train", "train.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_recipe_trains_and_writes_outputs(train_mod, tmp_path):
    rc = train_mod.main(TINY + ["--steps", "4", "--out", str(tmp_path)])
    assert rc == 0
    rows = (tmp_path / "runs.csv").read_text().splitlines()
    assert rows[0].startswith("scheme,n,d,loss") and len(rows) == 1 + len(train_mod.SCHEMES)
    assert {r.split(",")[0] for r in rows[1:]} == set(train_mod.SCHEMES)
    xml.dom.minidom.parse(str(tmp_path / "val_loss.svg"))
    assert "torch-emulated" in (tmp_path / "log.txt").read_text()


@pytest.mark.parametrize("param,layer", [("blocks.0.down.weight", "blocks.0.down"),
                                         ("blocks.0.attn_norm.weight", "blocks.0.attn_norm")])
def test_nan_stops_naming_step_and_layer(train_mod, tmp_path, param, layer):
    rc = train_mod.main(TINY + ["--steps", "6", "--recipes", "bf16,quartet", "--inject-nan", f"3:{param}",
                                "--out", str(tmp_path)])
    assert rc == 1
    log = (tmp_path / "log.txt").read_text()
    for label in ("bf16", "quartet"):  # Quartet's quantizer zeroes NaN groups: the input check still sees it
        line = next(s for s in log.splitlines() if s.startswith(f"STOPPED: {label}:"))
        assert "step 3" in line and f"'{layer}'" in line, line


def test_divergence_stops(train_mod, tmp_path):
    rc = train_mod.main(TINY + ["--steps", "40", "--recipes", "bf16", "--lr", "3", "--warmup", "2",
                                "--out", str(tmp_path)])
    assert rc == 1
    assert "DIVERGED" in (tmp_path / "log.txt").read_text()


def test_max_minutes_fits_the_budget(train_mod, tmp_path):
    t0 = time.perf_counter()
    rc = train_mod.main(TINY + ["--max-minutes", "0.1", "--recipes", "bf16,quartet", "--out", str(tmp_path)])
    assert rc == 0 and time.perf_counter() - t0 < 6 + 4  # budget 6 s; slack for a loaded machine
    assert "steps per recipe" in (tmp_path / "log.txt").read_text()


def test_cuda_path_needs_neither_extension_nor_numpy(tmp_path):
    # The GPU machine may have neither nibble._C built nor NumPy installed: the emulated backend needs neither.
    import subprocess
    import sys
    code = ("import sys; sys.modules['numpy'] = None; sys.path.insert(0, sys.argv[1]); import torch; "
            "import nibble.torch as nt; l = nt.Linear(64, 64, recipe='nvfp4', backend='emulated'); "
            "x = torch.randn(32, 64, requires_grad=True); l(x).sum().backward(); print(l.last_backward_path)")
    env = {k: v for k, v in os.environ.items() if k != "NIBBLE_BUILD_DIR"}
    r = subprocess.run([sys.executable, "-c", code, os.path.join(ROOT, "python")], capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "torch-emulated" in r.stdout
