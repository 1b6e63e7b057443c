"""Pack the loss-study corpus (data/corpus/) from the Linux kernel source tarball of a Debian package:

    bash tools/make_corpus.sh            # apt-get download linux-source-6.1, dpkg-deb -x, then this script
    python3 train/make_corpus.py --tar /tmp/x/usr/src/linux-source-6.1.tar.xz --deb-sha256 ... --out data/corpus

Selection rule (deterministic, no dependence on file-system order): regular files ending in .c, .h or
.rst of at most --max-file-bytes, outside EXCLUDED (machine-generated register tables). Each file's
relative path (the tarball's top folder removed) gets h = first 8 bytes of sha256(path) / 2^64. Files
with h < --val-fraction are validation, the rest training, so no file is in both. Training takes
files in ascending h (a uniform sample of the tree) until --max-train-bytes, validation likewise until
--max-val-bytes; each split is then written in path order (similar files adjacent: better xz
compression; training samples random windows anyway). Tokens are bytes (vocabulary 256); every file
is followed by one NUL byte, which no selected text contains, as a document separator.

By default the result must reproduce the manifest already in --out (the committed one): every sha256
is compared, and a difference stops with both values before anything is written (--new makes another corpus).

Outputs: <name>.train.xz, <name>.val.xz (raw byte streams, xz via Python's lzma) and <name>.json (the
manifest: package, tarball, rule, file counts, raw and compressed sizes, sha256 of each raw stream,
which train/corpus.py checks after decompressing).
"""
import argparse
import hashlib
import json
import lzma
import os
import sys
import tarfile
import time

SUFFIXES = (".c", ".h", ".rst")
EXCLUDED = ("drivers/gpu/drm/amd/include/asic_reg/",)
SEPARATOR = b"\0"


def path_hash(rel):
    """The split/sample key of a relative path, in [0, 1)."""
    return int.from_bytes(hashlib.sha256(rel.encode()).digest()[:8], "big") / 2.0 ** 64


def selected(rel, size, max_file_bytes):
    return rel.endswith(SUFFIXES) and size <= max_file_bytes and not rel.startswith(EXCLUDED)


def split_of(rel, val_fraction):
    return "val" if path_hash(rel) < val_fraction else "train"


def choose(sizes, val_fraction, max_train_bytes, max_val_bytes):
    """sizes: {relative path: bytes} of the selected files -> {"train": [paths], "val": [paths]}, each in
    path order. Files are taken in ascending path hash until the split's byte budget (+ separators)."""
    out = {"train": [], "val": []}
    budget = {"train": max_train_bytes, "val": max_val_bytes}
    used = {"train": 0, "val": 0}
    for rel in sorted(sizes, key=lambda r: (path_hash(r), r)):
        s = split_of(rel, val_fraction)
        need = sizes[rel] + len(SEPARATOR)
        if used[s] + need > budget[s]:
            continue
        used[s] += need
        out[s].append(rel)
    return {k: sorted(v) for k, v in out.items()}


def read_members(tar_path, max_file_bytes):
    """{relative path: bytes} of every selected file of the tarball (read in one streaming pass)."""
    texts = {}
    with tarfile.open(tar_path, "r|*") as t:
        for m in t:
            if not m.isfile():
                continue
            rel = m.name.split("/", 1)[1] if "/" in m.name else m.name
            if selected(rel, m.size, max_file_bytes):
                data = t.extractfile(m).read()
                if SEPARATOR in data:  # binary content under a text suffix: not text, left out
                    continue
                texts[rel] = data
    return texts


def parse_defaults():
    """The selection rule's defaults (what `bash tools/make_corpus.sh` uses), as a dict."""
    a = build_parser().parse_args(["--tar", "-", "--version", "-", "--deb-sha256", "-"])
    return vars(a)


def build_parser():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tar", required=True, help="linux-source-*.tar.xz from the package")
    ap.add_argument("--package", default="linux-source-6.1")
    ap.add_argument("--version", required=True, help="the package version (dpkg-deb -f DEB Version)")
    ap.add_argument("--deb-sha256", required=True, help="sha256 of the .deb the tarball came from")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "corpus"))
    ap.add_argument("--name", default="linux-6.1-bytes")
    ap.add_argument("--val-fraction", type=float, default=0.01)
    ap.add_argument("--max-train-bytes", type=int, default=230_000_000)
    ap.add_argument("--max-val-bytes", type=int, default=4_000_000)
    ap.add_argument("--max-file-bytes", type=int, default=256 * 1024)
    ap.add_argument("--preset", type=int, default=9)
    ap.add_argument("--expect", default=None,
                    help="the manifest the result must reproduce (default: the one already in --out, i.e. the "
                         "committed data/corpus manifest); a different package, rule or stream stops with both "
                         "values and writes nothing")
    ap.add_argument("--new", action="store_true", help="make a new corpus: no manifest to reproduce")
    return ap


def main(argv=None):
    a = build_parser().parse_args(argv)
    expect_path = a.expect or os.path.join(a.out, f"{a.name}.json")
    expected = None
    if not a.new and os.path.exists(expect_path):
        with open(expect_path) as f:
            expected = json.load(f)
    t0 = time.perf_counter()
    texts = read_members(a.tar, a.max_file_bytes)
    t_read = time.perf_counter() - t0
    picks = choose({r: len(d) for r, d in texts.items()}, a.val_fraction, a.max_train_bytes, a.max_val_bytes)
    assert not set(picks["train"]) & set(picks["val"])
    os.makedirs(a.out, exist_ok=True)
    manifest = dict(
        name=a.name, package=a.package, package_version=a.version, deb_sha256=a.deb_sha256,
        tarball=os.path.basename(a.tar), tarball_sha256=sha256_file(a.tar),
        rule=dict(suffixes=list(SUFFIXES), excluded_prefixes=list(EXCLUDED), max_file_bytes=a.max_file_bytes,
                  path_hash="first 8 bytes of sha256(relative path), big-endian / 2^64",
                  val_fraction=a.val_fraction, max_train_bytes=a.max_train_bytes, max_val_bytes=a.max_val_bytes,
                  order="files taken in ascending path hash up to the byte budget, written in path order",
                  separator="one NUL byte after every file"),
        tokenizer="bytes (vocabulary 256)", selectable_files=len(texts),
        selectable_bytes=sum(len(d) for d in texts.values()), splits={})
    packed_splits = {}
    for split, paths in picks.items():
        blob = b"".join(texts[p] + SEPARATOR for p in paths)
        t1 = time.perf_counter()
        packed = lzma.compress(blob, preset=a.preset)
        t_xz = time.perf_counter() - t1
        fname = f"{a.name}.{split}.xz"
        packed_splits[fname] = packed
        manifest["splits"][split] = dict(
            file=fname, files=len(paths), bytes=len(blob), sha256=hashlib.sha256(blob).hexdigest(),
            xz_bytes=len(packed), xz_sha256=hashlib.sha256(packed).hexdigest(),
            paths_sha256=hashlib.sha256("\n".join(paths).encode()).hexdigest())
        print(f"{split}: {len(paths)} files, {len(blob):,} bytes -> {len(packed):,} xz bytes "
              f"(ratio {len(blob) / len(packed):.2f}, {t_xz:.0f} s)", flush=True)
    if expected is not None:
        differences = manifest_differences(expected, manifest)
        if differences:
            print(f"make_corpus: the corpus made here differs from {expect_path}; nothing written:", file=sys.stderr)
            for what, want, got in differences:
                print(f"  {what}: manifest {want}, made {got}", file=sys.stderr)
            print("  (a different package version in the archive makes another corpus; --new writes it anyway)",
                  file=sys.stderr)
            return 1
        print(f"make_corpus: every sha256 equals {expect_path}")
    for fname, packed in packed_splits.items():
        tmp = os.path.join(a.out, fname + ".part")
        with open(tmp, "wb") as f:
            f.write(packed)
        os.replace(tmp, os.path.join(a.out, fname))
    with open(os.path.join(a.out, f"{a.name}.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    print(f"{len(texts)} selectable files ({manifest['selectable_bytes']:,} bytes) read in {t_read:.0f} s; "
          f"total {time.perf_counter() - t0:.0f} s")
    return 0


def manifest_differences(expected, made):
    """[(field, expected value, made value)] for every identifying field that differs: the package, the
    tarball, the rule, and per split its file count, bytes and sha256 values (the raw stream's sha256 is
    the corpus's identity; the xz stream's depends also on the compressor)."""
    out = []
    for k in ("package", "package_version", "deb_sha256", "tarball_sha256", "rule", "selectable_files",
              "selectable_bytes"):
        if expected.get(k) != made.get(k):
            out.append((k, expected.get(k), made.get(k)))
    for split in sorted(set(expected.get("splits", {})) | set(made["splits"])):
        e, m = expected.get("splits", {}).get(split, {}), made["splits"].get(split, {})
        for k in ("files", "bytes", "sha256", "paths_sha256", "xz_sha256"):
            if e.get(k) != m.get(k):
                out.append((f"{split}.{k}", e.get(k), m.get(k)))
    return out


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


if __name__ == "__main__":
    sys.exit(main())
