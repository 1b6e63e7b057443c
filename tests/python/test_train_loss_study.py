"""The loss study's corpus and plan runner on CPU (train/make_corpus.py, train/corpus.py, train/plan.py):
the split is deterministic and disjoint, the packed corpus round-trips, the plan is ordered and resumes
exactly after its finished rows, and a tiny run writes rows `nibble law fit` can parse."""
import csv
import glob
import importlib
import io
import lzma
import os
import random
import subprocess
import sys
import tarfile

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "train"))
make_corpus = importlib.import_module("make_corpus")
corpus = importlib.import_module("corpus")
plan = importlib.import_module("plan")

TINY = ["--corpus", "stdlib", "--size", "tiny=1,64,2,1e-3", "--sizes", "tiny", "--base-ratios", "", "--batch", "2",
        "--seq-len", "32",
        "--val-windows", "4", "--max-steps", "4", "--evals", "1", "--backend", "emulated", "--device", "cpu"]


def random_paths(rng, n):
    dirs = ["kernel", "mm", "fs/ext4", "Documentation/admin-guide", "drivers/net", "include/linux"]
    return [f"{rng.choice(dirs)}/f{rng.randrange(10 ** 9)}{rng.choice(['.c', '.h', '.rst'])}" for _ in range(n)]


def test_split_is_deterministic_disjoint_and_budgeted():
    rng = random.Random()
    sizes = {p: rng.randrange(1, 5000) for p in random_paths(rng, 3000)}
    a = make_corpus.choose(sizes, 0.05, 2_000_000, 100_000)
    shuffled = dict(sorted(sizes.items(), key=lambda kv: rng.random()))  # insertion order must not matter
    assert make_corpus.choose(shuffled, 0.05, 2_000_000, 100_000) == a
    assert a["train"] and a["val"] and not set(a["train"]) & set(a["val"])
    for split, budget in (("train", 2_000_000), ("val", 100_000)):
        assert all(make_corpus.split_of(p, 0.05) == split for p in a[split])
        assert sum(sizes[p] + 1 for p in a[split]) <= budget
        assert a[split] == sorted(a[split])
    # a file's split depends on its path alone: growing the budget never moves a file across
    b = make_corpus.choose(sizes, 0.05, 10 ** 9, 10 ** 9)
    assert set(a["train"]) <= set(b["train"]) and set(a["val"]) <= set(b["val"])
    assert set(b["train"]) | set(b["val"]) == set(sizes)
    frac = len(b["val"]) / len(sizes)
    assert 0.03 < frac < 0.07, frac


def test_selection_rule():
    assert make_corpus.selected("kernel/fork.c", 100, 1000)
    assert make_corpus.selected("Documentation/x.rst", 1000, 1000)
    assert not make_corpus.selected("kernel/fork.c", 1001, 1000)
    assert not make_corpus.selected("scripts/x.py", 10, 1000)
    assert not make_corpus.selected("drivers/gpu/drm/amd/include/asic_reg/gc/x.h", 10, 1000)


def write_tar(path, files):
    with tarfile.open(path, "w:xz") as t:
        for name, data in files.items():
            info = tarfile.TarInfo("linux-x/" + name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))


def test_pack_and_load_round_trip(tmp_path):
    rng = random.Random()
    files = {p: bytes(rng.randrange(1, 256) for _ in range(rng.randrange(0, 400))) for p in random_paths(rng, 300)}
    files["kernel/binary.c"] = b"a\0b"   # NUL inside: not text, left out
    files["scripts/skip.py"] = b"print()"
    tar = tmp_path / "src.tar.xz"
    write_tar(tar, files)
    out = tmp_path / "packed"
    assert make_corpus.main(["--tar", str(tar), "--version", "1", "--deb-sha256", "0" * 64, "--out", str(out),
                             "--name", "t", "--val-fraction", "0.2", "--preset", "1"]) == 0
    cache = tmp_path / "cache"
    train, val, desc = corpus.load_packed(str(out), "t", str(cache))
    text = [p for p in files if make_corpus.selected(p, len(files[p]), 256 * 1024) and b"\0" not in files[p]]
    want = {s: b"".join(files[p] + b"\0" for p in sorted(text) if make_corpus.split_of(p, 0.2) == s)
            for s in ("train", "val")}
    assert bytes(train.tolist()) == want["train"] and bytes(val.tolist()) == want["val"]
    assert desc["train_bytes"] == len(want["train"]) and desc["unpack_seconds"] >= 0
    # Cached: the second load does not unpack again; a damaged cache file of the wrong size is replaced.
    assert corpus.load_packed(str(out), "t", str(cache))[2]["unpack_seconds"] == 0.0
    cached = glob.glob(str(cache / "*.bin"))
    assert len(cached) == 2
    with open(cached[0], "ab") as f:
        f.write(b"x")
    t2, v2, _ = corpus.load_packed(str(out), "t", str(cache))
    assert bytes(t2.tolist()) == want["train"] and bytes(v2.tolist()) == want["val"]
    # A .xz that does not match its manifest is an error naming the file.
    with lzma.open(out / "t.val.xz", "wb") as f:
        f.write(want["val"] + b"!")
    for p in glob.glob(str(cache / "*.bin")):
        os.remove(p)
    with pytest.raises(ValueError, match="t.val.xz"):
        corpus.load_packed(str(out), "t", str(cache))


def test_shipped_manifest_names_the_packed_corpus():
    m = corpus.packed_manifest()
    assert m is not None, "data/corpus keeps the manifest in git"
    assert m["rule"]["max_train_bytes"] == m["splits"]["train"]["bytes"] == 230_000_000
    # make_corpus.py's defaults are the manifest's rule: `bash tools/make_corpus.sh` reproduces it
    defaults = make_corpus.parse_defaults()
    for k in ("max_train_bytes", "max_val_bytes", "max_file_bytes", "val_fraction"):
        assert defaults[k] == m["rule"][k], k
    assert m["name"] == defaults["name"] == corpus.PACKED_NAME
    assert all(len(m["splits"][s]["sha256"]) == 64 for s in ("train", "val"))


def test_repacking_must_reproduce_the_manifest(tmp_path, capsys):
    """A corpus made again equals its manifest (every sha256 checked) or stops with both values, writing nothing."""
    rng = random.Random()
    files = {p: bytes(rng.randrange(1, 256) for _ in range(rng.randrange(1, 300))) for p in random_paths(rng, 200)}
    tar = tmp_path / "src.tar.xz"
    write_tar(tar, files)
    out = tmp_path / "packed"
    args = ["--tar", str(tar), "--version", "1", "--deb-sha256", "0" * 64, "--out", str(out), "--name", "t",
            "--val-fraction", "0.2", "--preset", "1"]
    assert make_corpus.main(args) == 0  # no manifest yet: a new corpus
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert make_corpus.main(args) == 0 and "every sha256 equals" in capsys.readouterr().out
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    # another byte budget gives another training stream: refused, naming both sha256 values
    assert make_corpus.main(args + ["--max-train-bytes", "5000"]) == 1
    err = capsys.readouterr().err
    m = corpus.packed_manifest(str(out), "t")
    assert "train.sha256" in err and m["splits"]["train"]["sha256"] in err and "nothing written" in err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    # the loader refuses a stream that does not belong to the manifest
    (out / "t.train.xz").write_bytes(lzma.compress(b"other text\0"))
    with pytest.raises(ValueError, match="t.train.xz"):
        corpus.load_packed(str(out), "t", str(tmp_path / "cache"))


def test_plan_order_and_keys():
    runs = plan.make_plan()
    keys = [r["run"] for r in runs]
    assert len(keys) == len(set(keys))
    cost = [r["n"] * r["tokens"] for r in runs]
    assert cost == sorted(cost)
    smallest = min(plan.STUDY_SIZES, key=lambda s: plan.non_embedding_params(*plan.SIZES[s][:2]))
    cheapest = (smallest, min(plan.RATIOS))
    # the second seed only at the cheapest point, for every scheme
    assert {(r["size"], r["ratio"]) for r in runs if r["seed"] != plan.SEEDS_CHEAPEST[0]} == {cheapest}
    assert {r["scheme"] for r in runs if r["seed"] == plan.SEEDS_CHEAPEST[1]} == set(plan.STUDY_SCHEMES)
    # every scheme at every size and ratio; the base scheme also at its extra budgets
    for scheme in plan.STUDY_SCHEMES:
        ratios = set(plan.RATIOS) | (set(plan.BASE_RATIOS) if scheme == plan.BASE_SCHEME else set())
        got = {(r["size"], r["ratio"]) for r in runs if r["scheme"] == scheme and r["seed"] == 0}
        assert got == {(s, t) for s in plan.STUDY_SIZES for t in ratios}, scheme
    extra = len(set(plan.BASE_RATIOS) - set(plan.RATIOS))
    assert len(runs) == len(plan.STUDY_SCHEMES) * (len(plan.STUDY_SIZES) * len(plan.RATIOS) + 1) + \
        extra * len(plan.STUDY_SIZES)
    ns = sorted({r["n"] for r in runs})
    assert 1.5e6 < ns[0] and ns[-1] < 1e7, ns
    for r in runs:
        assert r["tokens"] >= r["ratio"] * r["n"] and r["tokens"] - r["ratio"] * r["n"] < 128 * 512
        assert r["ratio"] >= 10


def test_plan_completes_two_sizes_first():
    """Cheapest first: every scheme's runs at the two smallest sizes (both budgets, the seed pair, the base
    scheme's extra budgets) come before any run of a larger size, so a partial study fits."""
    runs = plan.make_plan()
    small = sorted(plan.STUDY_SIZES, key=lambda s: plan.non_embedding_params(*plan.SIZES[s][:2]))[:2]
    first = [r for r in runs if r["size"] in small]
    assert runs[:len(first)] == first
    assert len(first) >= 30


def test_param_count_matches_model():
    pytest.importorskip("torch")
    from model import Decoder
    for layers, hidden, heads, _ in plan.SIZES.values():
        m = Decoder(hidden=hidden, layers=layers, heads=heads, seq_len=64)
        assert m.non_embedding_params() == plan.non_embedding_params(layers, hidden)


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def tiny_csv(tmp_path_factory):
    out = tmp_path_factory.mktemp("study")
    path = out / "runs.csv"
    assert plan.main(TINY + ["--csv", str(path), "--ratios", "10", "--schemes", "bf16,quartet", "--seeds", "0,1",
                             "--allow-emulation", "--copy-to", str(out / "copy")]) == 0
    return path


def test_tiny_run_rows(tiny_csv):
    rs = rows(tiny_csv)
    assert [r["run"] for r in rs] == ["bf16-tiny-10tpp-s0", "quartet-tiny-10tpp-s0", "bf16-tiny-10tpp-s1",
                                      "quartet-tiny-10tpp-s1"]
    with open(tiny_csv) as f:
        assert f.readline().strip() == ",".join(plan.COLUMNS)
    for r in rs:
        assert float(r["loss"]) == float(r["val_loss"]) and 0 < float(r["loss"]) < 10
        assert int(r["d"]) == int(r["tokens"]) == 4 * 2 * 32 and int(r["n"]) == int(r["n_params"])
        assert float(r["tokens_per_s"]) > 0 and float(r["wall_s"]) >= 0 and r["corpus"] == "python-stdlib-bytes"
        assert r["gpu"] == "cpu" and r["torch"]
    q = [r for r in rs if r["scheme"] == "quartet"]
    assert all(r["path_kind"] == "emulated" and "torch-emulated" in r["path"] for r in q)
    assert all(r["path_kind"] == "torch" for r in rs if r["scheme"] == "bf16")
    # different seeds: different initial weights and data, so different losses
    assert rs[0]["loss"] != rs[2]["loss"]
    assert rows(tiny_csv.parent / "copy" / "runs.csv") == rs


def test_resume_skips_exactly_finished_keys(tiny_csv, tmp_path, capsys):
    path = tmp_path / "runs.csv"
    kept = rows(tiny_csv)[:1] + rows(tiny_csv)[2:3]  # bf16 s0 and s1 finished; both quartet runs not
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=plan.COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(kept)
        f.write("quartet-tiny-10tpp-s0,quartet,65728")  # a line cut off by a kill: not a finished run
    assert plan.main(TINY + ["--csv", str(path), "--ratios", "10", "--schemes", "bf16,quartet", "--seeds", "0,1",
                             "--allow-emulation"]) == 0
    out = capsys.readouterr().out
    assert "dropping an incomplete last line" in out
    got = [r["run"] for r in rows(path)]
    assert got == ["bf16-tiny-10tpp-s0", "bf16-tiny-10tpp-s1", "quartet-tiny-10tpp-s0", "quartet-tiny-10tpp-s1"]
    assert rows(path)[:2] == kept
    # the same command again runs nothing
    assert plan.main(TINY + ["--csv", str(path), "--ratios", "10", "--schemes", "bf16,quartet", "--seeds", "0,1",
                             "--allow-emulation"]) == 0
    assert len(rows(path)) == 4 and "0 runs attempted" in capsys.readouterr().out


def test_emulation_refused_without_flag(tmp_path, capsys):
    path = tmp_path / "runs.csv"
    assert plan.main(TINY + ["--csv", str(path), "--ratios", "10,25", "--schemes", "nvfp4", "--seeds", "0"]) == 1
    out = capsys.readouterr().out
    assert not path.exists() and "refused" in out and "--allow-emulation" in out
    assert out.count("nvfp4-tiny-") == 1 + 1  # the first run tried and refused, the second not started


def test_other_study_settings_are_rejected(tiny_csv):
    with pytest.raises(SystemExit, match="seq_len"):
        plan.main(TINY[:-2] + ["--seq-len", "64", "--csv", str(tiny_csv), "--ratios", "25", "--schemes", "bf16",
                               "--seeds", "0"] + TINY[-2:])


def test_max_seconds_starts_no_run_that_cannot_fit(tiny_csv, tmp_path, capsys):
    path = tmp_path / "runs.csv"
    base = rows(tiny_csv)[0]
    slow = dict(base, run="bf16-tiny-25tpp-s0", tokens_per_s="0.001")  # a measured rate: far too slow
    plan.append_row(str(path), slow, plan.COLUMNS)
    assert plan.main(TINY + ["--csv", str(path), "--ratios", "25,50", "--schemes", "bf16", "--seeds", "0",
                             "--max-seconds", "60"]) == 0
    out = capsys.readouterr().out
    assert "bf16-tiny-50tpp-s0: skipped in this call: estimated" in out
    assert [r["run"] for r in rows(path)] == ["bf16-tiny-25tpp-s0"]


def test_dry_run_prints_every_run(capsys):
    assert plan.main(["--dry-run", "--csv", "/nonexistent/runs.csv"]) == 0
    out = capsys.readouterr().out
    assert sum(1 for line in out.splitlines() if "tpp-s" in line) == len(plan.make_plan())


def nibble_binary():
    for cand in [os.environ.get("NIBBLE_BIN", "")] + [os.path.join(ROOT, d, "nibble") for d in
                                                      ("build-corpus", "build")]:
        if cand and os.access(cand, os.X_OK):
            return cand
    return None


def test_nibble_law_fit_parses_rows(tiny_csv, tmp_path):
    exe = nibble_binary()
    if exe is None:
        pytest.skip("no nibble binary (NIBBLE_BIN, build-corpus/nibble or build/nibble)")
    # Too few runs to fit: the reader must get past parsing to the fit's own run-count check.
    r = subprocess.run([exe, "law", "fit", str(tiny_csv)], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "too few base-scheme ('bf16') runs" in (r.stdout + r.stderr), r.stdout + r.stderr
    bad = tmp_path / "bad.csv"
    bad.write_text(tiny_csv.read_text().replace(",torch-bf16,", ",torch-bf16,extra,", 1))
    r = subprocess.run([exe, "law", "fit", str(bad)], capture_output=True, text=True, timeout=60)
    assert "fields, but the header has" in r.stdout + r.stderr


# ---------------------------------------------------------------------------------------------- results table

study_table = importlib.import_module("study_table")
STUDY_HEADER = "run,scheme,n,d,loss,seed,size\n"


def write_study(tmp_path, rows):
    p = tmp_path / "runs.csv"
    p.write_text(STUDY_HEADER + "".join(f"{s}-{size}-{t}-{seed},{s},{n},{n * t},{loss},{seed},{size}\n"
                                        for s, size, n, t, seed, loss in rows))
    return str(p)


def test_study_table_reports_gaps_only_above_the_seed_spread(tmp_path):
    rng = random.Random()
    bf = 2.0 + rng.random()
    noise = 0.005 + 0.01 * rng.random()  # the seed pair's spread, on mxfp4
    rows = [("bf16", "xs", 3e6, 10, 0, bf), ("bf16", "xs", 3e6, 10, 1, bf + noise / 4),
            ("mxfp4", "xs", 3e6, 10, 0, bf + 0.2), ("mxfp4", "xs", 3e6, 10, 1, bf + 0.2 + noise),
            ("quartet", "xs", 3e6, 10, 0, bf + noise / 2), ("quartet", "s", 8e6, 25, 0, bf - 0.1 + 3 * noise),
            ("bf16", "s", 8e6, 25, 0, bf - 0.1), ("nvfp4", "s", 8e6, 25, 0, bf - 0.1 - noise / 3)]
    t = study_table.tabulate(study_table.read_runs(write_study(tmp_path, rows)))
    assert t["noise"] == pytest.approx(noise)
    assert t["schemes"][0] == "bf16" and set(t["schemes"]) == {"bf16", "mxfp4", "quartet", "nvfp4"}
    xs, s = t["rows"]
    assert (xs["size"], xs["tokens_per_param"], s["size"], s["tokens_per_param"]) == ("xs", 10, "s", 25)
    assert xs["loss"]["bf16"] == pytest.approx(bf + noise / 8)  # the mean over seeds
    # mxfp4's gap (about 0.2) is far above the spread; quartet's (below it) is not reported as a gap.
    assert xs["significant"] == {"mxfp4": True, "quartet": False}
    assert s["significant"] == {"quartet": True, "nvfp4": False}
    assert s["gap"]["quartet"] == pytest.approx(3 * noise)
    md = study_table.markdown(t)
    assert f"{noise:.4f} (mxfp4, xs, 10 tokens/param; 2 pairs)" in md
    assert f"({s['gap']['quartet']:+.4f})" in md and "(~)" in md
    assert md.count("\n| ") == 3  # header and two rows


def test_study_table_without_seed_pairs_and_bad_input(tmp_path, capsys):
    p = write_study(tmp_path, [("bf16", "xs", 3e6, 10, 0, 2.5), ("quartet", "xs", 3e6, 10, 0, 2.6)])
    t = study_table.tabulate(study_table.read_runs(p))
    assert t["noise"] is None and t["rows"][0]["significant"] == {"quartet": False}
    assert "not measured" in study_table.markdown(t) and "(+0.1000)" in study_table.markdown(t)
    out = tmp_path / "t.json"
    assert study_table.main([p, "--json", str(out)]) == 0 and '"noise": null' in out.read_text()
    empty = tmp_path / "empty.csv"
    empty.write_text(STUDY_HEADER)
    assert study_table.main([str(empty)]) == 1
    assert "no runs yet" in capsys.readouterr().err
    no_seed = tmp_path / "noseed.csv"
    no_seed.write_text("scheme,n,d,loss,size\nbf16,1,10,2.0,xs\n")
    assert study_table.main([str(no_seed)]) == 1
    assert "lacks the column(s) seed" in capsys.readouterr().err
    bad = tmp_path / "bad.csv"
    bad.write_text(STUDY_HEADER + "r,bf16,3e6,3e7,nan?,0,xs\n")
    assert study_table.main([str(bad)]) == 1
    assert "line 2" in capsys.readouterr().err


def test_workers_take_every_run_exactly_once(tmp_path):
    """--workers 2: two processes share the plan; each run is trained by one of them, every row says so."""
    path = tmp_path / "runs.csv"
    r = subprocess.run([sys.executable, os.path.join(ROOT, "train", "plan.py")] + TINY +
                       ["--csv", str(path), "--ratios", "10,20", "--schemes", "bf16,quartet", "--seeds", "0,1",
                        "--allow-emulation", "--workers", "2"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    got = [row["run"] for row in rows(path)]
    want = [p["run"] for p in plan.make_plan(["tiny"], [10, 20], ["bf16", "quartet"], 2, 32, (0, 1), 4,
                                             dict(plan.SIZES, tiny=(1, 64, 2, 1e-3)), [])]
    assert sorted(got) == sorted(want) and len(got) == len(set(got)) == 6
    assert {row["gpu_shared_by"] for row in rows(path)} == {"2"}
    assert "[w0]" in r.stdout and "[w1]" in r.stdout and "2 workers ended with status [0, 0]" in r.stdout


def test_committed_csv_has_the_plan_columns_and_another_layout_is_refused(tmp_path):
    with open(plan.DEFAULT_CSV) as f:
        assert f.readline().strip() == ",".join(plan.COLUMNS)
    old = tmp_path / "runs.csv"
    old.write_text(",".join(c for c in plan.COLUMNS if c != "gpu_shared_by") + "\n")
    with pytest.raises(SystemExit, match="missing: gpu_shared_by"):
        plan.main(TINY + ["--csv", str(old), "--ratios", "10", "--schemes", "bf16", "--seeds", "0"])
    with pytest.raises(SystemExit, match="gpu_shared_by"):
        plan.append_row(str(old), {"run": "x"}, plan.COLUMNS)
    assert old.read_text().count("\n") == 1  # nothing appended
