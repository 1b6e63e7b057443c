"""train/train.py data-parallel (DistributedDataParallel) on CPU: gloo, 2 processes started by torchrun,
tiny model, the torch emulation (the path CUDA tensors take). The 2-process bf16 curve equals the
1-process one (a mean of two half-batch gradients is the full-batch gradient up to summation order);
fp8-delayed and quartet train with identical amax histories and weights on both ranks and different
per-rank seeds; a NaN on one rank stops every rank; nibble.distributed.sync_amax reduces with MAX."""
import importlib.util
import json
import os
import socket
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist

import nibble.distributed as nd
import nibble.torch as nt

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
TRAIN = os.path.join(ROOT, "train", "train.py")
TINY = ["--hidden", "64", "--layers", "1", "--heads", "2", "--seq-len", "64", "--batch", "4", "--steps", "6",
        "--val-batches", "1", "--device", "cpu", "--backend", "emulated"]
BF16_TOLERANCE = 5e-4  # measured 1.3e-5 after 6 steps; one rank training on the wrong half gives ~2e-2

pytestmark = pytest.mark.skipif(not (dist.is_available() and dist.is_gloo_available()),
                                reason="torch.distributed with gloo is not available")


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(args, tmp, nproc=2):
    """train.py under torchrun; returns the CompletedProcess. Not --standalone: torch 1.13's standalone
    rendezvous is the fixed port 29400, which two jobs on one machine would share. --redirects/--tee 1:
    torch 1.13 on Python 3.11 cannot parse their default 0 (IntFlag iteration no longer yields it)."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1", f"--nproc_per_node={nproc}",
           "--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{_free_port()}", "--redirects", "1", "--tee", "1",
           "--log_dir", str(tmp / "torchrun-logs"), TRAIN] + args
    # A hang (one rank stopped, the other waiting in a collective) fails here instead of blocking the suite.
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One 2-process run of bf16, fp8-delayed and quartet (with per-rank state dumps), one 1-process bf16."""
    tmp = tmp_path_factory.mktemp("ddp")
    r = torchrun(TINY + ["--recipes", "bf16,fp8-delayed,quartet", "--out", str(tmp / "ddp"),
                         "--dump-rank-state", str(tmp / "state")], tmp)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    single = _load("nibble_train_single", TRAIN)
    assert single.main(TINY + ["--recipes", "bf16", "--out", str(tmp / "single")]) == 0
    return tmp


def _results(folder):
    with open(folder / "results.json") as f:
        return json.load(f)


def _state(tmp, rank, label):
    with open(tmp / "state" / f"rank{rank}-{label}.json") as f:
        return json.load(f)


def test_bf16_ddp_curve_equals_single_process(runs):
    ddp, single = _results(runs / "ddp"), _results(runs / "single")
    assert ddp["meta"]["world_size"] == 2 and single["meta"]["world_size"] == 1
    a = next(r for r in single["runs"] if r["scheme"] == "bf16")
    b = next(r for r in ddp["runs"] if r["scheme"] == "bf16")
    assert [s for s, _ in a["curve"]] == [s for s, _ in b["curve"]] == list(range(6))
    assert a["tokens"] == b["tokens"] == 6 * 4 * 64  # the global batch's tokens, not one rank's
    diffs = [abs(u - v) for (_, u), (_, v) in zip(a["curve"], b["curve"])]
    assert max(diffs) < BF16_TOLERANCE, diffs
    # The comparison helper agrees, and its tolerance option fails when exceeded.
    cmp = _load("nibble_compare_runs", os.path.join(ROOT, "train", "compare_runs.py"))
    files = [str(runs / "single" / "results.json"), str(runs / "ddp" / "results.json")]
    assert cmp.main(files + ["--tolerance", str(BF16_TOLERANCE)]) == 0
    assert cmp.main(files + ["--tolerance", "0"]) == 1
    rows = {r[0]: r for r in cmp.compare(single, ddp)}
    assert set(rows) == {"bf16"} and abs(rows["bf16"][1] - max(diffs)) < 1e-12


def test_only_rank0_writes_and_logs_ddp(runs):
    assert sorted(os.listdir(runs / "ddp")) == ["log.txt", "results.json", "runs.csv", "val_loss.svg"]
    log = (runs / "ddp" / "log.txt").read_text()
    assert "data-parallel (DDP, gloo): 2 ranks x 2 windows" in log
    assert {r["scheme"] for r in _results(runs / "ddp")["runs"] if "final_val_loss" in r} == \
        {"bf16", "fp8-delayed", "quartet"}


@pytest.mark.parametrize("label", ["fp8-delayed", "quartet"])
def test_amax_histories_and_weights_identical_on_both_ranks(runs, label):
    s0, s1 = _state(runs, 0, label), _state(runs, 1, label)
    assert (s0["rank"], s1["rank"], s0["world_size"]) == (0, 1, 2)
    assert s0["amax_history"] == s1["amax_history"]
    assert s0["weights"] == s1["weights"]  # DDP keeps the replicas equal
    assert s0["steps"] == s1["steps"] and set(s0["steps"].values()) == {6}
    if label == "fp8-delayed":
        assert s0["amax_sum"] > 0  # the histories really were recorded (and reduced), not all zeros
    run = next(r for r in _results(runs / "ddp")["runs"] if r["scheme"] == label)
    assert all(v == v and v < 6 for _, v in run["curve"]), run["curve"]


def test_per_rank_seeds_differ_and_are_reproducible(runs):
    # The layer seeds convert() gives (deterministic), then rank_seed(layer seed, rank) on each rank.
    model = _load("nibble_model", os.path.join(ROOT, "train", "model.py")).Decoder(hidden=64, layers=1, heads=2)
    base = {n: m.seed for n, m in nd.nibble_layers(nt.convert(model, "quartet"))}
    assert _state(runs, 0, "bf16")["seeds"] == {}  # the bf16 scheme is torch's nn.Linear: no nibble layers
    for label in ("fp8-delayed", "quartet"):
        s0, s1 = _state(runs, 0, label)["seeds"], _state(runs, 1, label)["seeds"]
        assert set(s0) == set(s1) == set(base) and len(base) == 4
        assert s0 == {n: nd.rank_seed(b, 0) for n, b in base.items()}
        assert s1 == {n: nd.rank_seed(b, 1) for n, b in base.items()}
        assert all(s0[n] != s1[n] for n in base) and len(set(s0.values()) | set(s1.values())) == 8


def test_seed_per_rank_unit():
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32))
    nt.convert(model, "quartet")
    before = [m.seed for _, m in nd.nibble_layers(model)]
    r1 = nd.seed_per_rank(model, 1)
    assert nd.seed_per_rank(model, 1) == r1  # from the kept base seed, not a seed of a seed
    r0, r3 = nd.seed_per_rank(model, 0), nd.seed_per_rank(model, 3)
    assert len(set(r0.values()) | set(r1.values()) | set(r3.values()) | set(before)) == 8
    assert list(r3.values()) == [m.seed for _, m in nd.nibble_layers(model)]
    assert all(0 <= s < 2 ** 63 for s in r0.values())
    assert nd.rank_seed(2 ** 63 - 1, 7) == nd.rank_seed(2 ** 63 - 1, 7) != nd.rank_seed(2 ** 63 - 1, 6)
    assert nd.sync_amax(model) == 0  # no process group: nothing to reduce


def test_batch_not_divisible_by_world_size(monkeypatch, capsys, tmp_path):
    train_mod = _load("nibble_train_batch", TRAIN)
    for k, v in dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT="1").items():
        monkeypatch.setenv(k, v)
    with pytest.raises(SystemExit) as e:  # refused before any collective (no peer is listening on port 1)
        train_mod.main(TINY[:8] + ["--batch", "3", "--out", str(tmp_path)])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--batch 3 is not divisible by the world size 2" in err, err
    monkeypatch.delenv("MASTER_PORT")
    with pytest.raises(SystemExit):
        train_mod.main(TINY + ["--ddp", "--out", str(tmp_path)])
    assert "needs torchrun's environment (MASTER_PORT not set)" in capsys.readouterr().err
    assert not os.listdir(tmp_path)


def test_nan_on_one_rank_stops_every_rank(tmp_path):
    r = torchrun(TINY + ["--recipes", "bf16,quartet", "--inject-nan", "3:blocks.0.down.weight", "--inject-nan-rank",
                         "1", "--out", str(tmp_path / "out")], tmp_path)
    assert r.returncode != 0  # train.py's status 1 on both ranks
    log = (tmp_path / "out" / "log.txt").read_text()
    for label in ("bf16", "quartet"):  # quartet ran after bf16's stop: the group survived it
        line = next(s for s in log.splitlines() if s.startswith(f"STOPPED: {label}: rank 1: "))
        assert "step 3" in line and "'blocks.0.down'" in line, line
    # Both ranks returned 1 from main(); neither died of an exception (torchrun's own report of the
    # failed workers is a traceback of torch's files, never of train.py's).
    assert 'train.py", line' not in r.stderr, r.stderr[-3000:]


def _sync_amax_worker(rank, world, init):
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    try:
        layers = [nt.Linear(32, 32, recipe="fp8-delayed", window=4), nt.Linear(32, 32, recipe="fp8-delayed", window=4)]
        model = torch.nn.Sequential(*layers)
        g = torch.Generator().manual_seed(100 + rank)  # different on each rank
        for m in layers:
            m.amax_history.copy_(torch.rand(3, 4, generator=g) * 10)
            m.amax_filled.copy_(torch.tensor([rank + 1, 4, 2 * rank]))
        mine = [(m.amax_history.clone(), m.amax_filled.clone()) for m in layers]
        assert nd.sync_amax(model) == 2
        every = [None] * world
        dist.all_gather_object(every, mine)
        for i, m in enumerate(layers):  # elementwise MAX over the ranks' own values
            want_h = torch.stack([e[i][0] for e in every]).amax(0)
            want_f = torch.stack([e[i][1] for e in every]).amax(0)
            assert torch.equal(m.amax_history, want_h) and torch.equal(m.amax_filled, want_f)
        assert nd.any_rank(rank == 1) and not nd.any_rank(False)
    finally:
        dist.destroy_process_group()


def test_sync_amax_is_an_elementwise_max(tmp_path):
    torch.multiprocessing.spawn(_sync_amax_worker, args=(2, f"file://{tmp_path}/rendezvous"), nprocs=2)


def test_sweep_runs_do_not_inherit_torchrun(tmp_path):
    sweep = _load("nibble_sweep", os.path.join(ROOT, "train", "sweep.py"))
    env = sweep.child_env(3, dict(PATH="/bin", RANK="3", LOCAL_RANK="3", WORLD_SIZE="8", MASTER_PORT="29500",
                                  TORCHELASTIC_RUN_ID="x", CUDA_VISIBLE_DEVICES="0,1"))
    assert env == dict(PATH="/bin", CUDA_VISIBLE_DEVICES="3")
