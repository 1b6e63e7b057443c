"""Offline corpora, byte-level tokens (vocabulary 256), split train/validation by a hash of each file's
relative path, so no file's text is in both.
- The packed corpus (data/corpus, made by train/make_corpus.py from Debian's linux-source-6.1): its .xz
  splits are unpacked once into /tmp and memory-mapped (load_packed).
- The fallback: the Python standard library's own source files (present wherever Python is; the split is
  the same on every machine with the same Python version)."""
import hashlib
import json
import lzma
import os
import sysconfig
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
PACKED_DIR = os.path.join(HERE, "..", "data", "corpus")
PACKED_NAME = "linux-6.1-bytes"  # data/corpus/<name>.json + .train.xz + .val.xz (train/make_corpus.py)
CACHE_DIR = os.environ.get("NIBBLE_CORPUS_CACHE", "/tmp/nibble-corpus")


def default_root():
    for cand in ("/usr/lib/python3.12", sysconfig.get_paths()["stdlib"]):
        if os.path.isdir(cand):
            return cand
    raise FileNotFoundError("no Python standard library folder found; pass --corpus DIR")


def load_corpus(root, val_fraction=0.02, max_bytes=None):
    """Returns (train uint8 tensor, val uint8 tensor, description dict)."""
    files = []
    for d, dirs, names in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in ("__pycache__", "site-packages", "dist-packages"))
        files += [os.path.join(d, n) for n in sorted(names) if n.endswith(".py")]
    if not files:
        raise FileNotFoundError(f"corpus folder {root} holds no .py files; pass --corpus DIR with text files")
    train, val = bytearray(), bytearray()
    for path in files:
        rel = os.path.relpath(path, root)
        with open(path, "rb") as f:
            data = f.read() + b"\n"
        h = int(hashlib.sha1(rel.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
        (val if h < val_fraction else train).extend(data)
        if max_bytes and len(train) >= max_bytes:
            break
    if not train or not val:
        raise ValueError(f"corpus {root}: {len(files)} files gave {len(train)} training and {len(val)} validation "
                         f"bytes; the split by path hash ({val_fraction:.0%} held out) needs more files")
    desc = dict(root=root, files=len(files), train_bytes=len(train), val_bytes=len(val),
                tokenizer="bytes (vocab 256)", val_fraction=val_fraction)
    # bytearrays are writable, so frombuffer shares them without a warning.
    return torch.frombuffer(train, dtype=torch.uint8), torch.frombuffer(val, dtype=torch.uint8), desc


def batch_order(n_tokens, seq_len, batch, steps, seed):
    """The same random window starts for every recipe: [steps, batch]."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, n_tokens - seq_len - 1, (steps, batch), generator=g)


def windows(data, starts, seq_len):
    idx = starts.reshape(-1, 1) + torch.arange(seq_len + 1, device=starts.device).reshape(1, -1)
    w = data[idx].long()
    return w[:, :-1], w[:, 1:]


def packed_manifest(folder=PACKED_DIR, name=PACKED_NAME):
    """The manifest of a packed corpus (train/make_corpus.py), or None when it is not there."""
    path = os.path.join(folder, name + ".json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def packed_available(folder=PACKED_DIR, name=PACKED_NAME, cache=CACHE_DIR):
    """Whether the packed corpus can load here: its manifest and, for each split, the .xz stream (not kept in
    git: tools/make_corpus.sh makes it) or an earlier unpack of it in `cache`."""
    m = packed_manifest(folder, name)
    if m is None:
        return False
    return all(os.path.exists(os.path.join(folder, i["file"])) or
               os.path.exists(os.path.join(cache, i["sha256"] + ".bin")) for i in m["splits"].values())


def unpack_split(folder, split_info, cache=CACHE_DIR):
    """Decompress one split's .xz into cache/<sha256>.bin once (checked against the manifest's sha256 and
    size, written under a temporary name and renamed, so a cut-off unpack never looks finished); later
    calls find it there. Returns (path, seconds spent unpacking, 0 when it was cached)."""
    os.makedirs(cache, exist_ok=True)
    dest = os.path.join(cache, split_info["sha256"] + ".bin")
    if os.path.exists(dest) and os.path.getsize(dest) == split_info["bytes"]:
        return dest, 0.0
    src_path = os.path.join(folder, split_info["file"])
    if not os.path.exists(src_path):
        raise FileNotFoundError(f"corpus stream {src_path} is missing (the .xz streams are not kept in git): make "
                                "them with `bash tools/make_corpus.sh`, or pass --corpus stdlib")
    t0 = time.perf_counter()
    tmp = f"{dest}.{os.getpid()}.part"
    h = hashlib.sha256()
    with lzma.open(src_path, "rb") as src, open(tmp, "wb") as out:
        for chunk in iter(lambda: src.read(1 << 22), b""):
            h.update(chunk)
            out.write(chunk)
    size = os.path.getsize(tmp)
    if h.hexdigest() != split_info["sha256"] or size != split_info["bytes"]:
        os.remove(tmp)
        raise ValueError(f"corpus file {split_info['file']}: unpacked {size} bytes with sha256 {h.hexdigest()}, "
                         f"but the manifest says {split_info['bytes']} bytes, {split_info['sha256']}; the .xz "
                         "is damaged or does not belong to this manifest: regenerate with tools/make_corpus.sh")
    os.replace(tmp, dest)
    return dest, time.perf_counter() - t0


def map_file(path, size):
    """A read-only-in-practice uint8 tensor over the file (memory-mapped, private copy-on-write pages)."""
    return torch.from_file(path, shared=False, size=size, dtype=torch.uint8)


def load_packed(folder=PACKED_DIR, name=PACKED_NAME, cache=CACHE_DIR):
    """(train uint8 tensor, val uint8 tensor, description) of a packed corpus, unpacked into `cache`."""
    m = packed_manifest(folder, name)
    if m is None:
        raise FileNotFoundError(f"no packed corpus {name}.json in {folder}; regenerate it with tools/make_corpus.sh, "
                                "or pass --corpus stdlib")
    out, unpack_s = [], 0.0
    for split in ("train", "val"):
        info = m["splits"][split]
        path, secs = unpack_split(folder, info, cache)
        unpack_s += secs
        out.append(map_file(path, info["bytes"]))
    desc = dict(name=m["name"], source=f"{m['package']} {m['package_version']}", tokenizer=m["tokenizer"],
                train_bytes=m["splits"]["train"]["bytes"], val_bytes=m["splits"]["val"]["bytes"],
                train_files=m["splits"]["train"]["files"], val_files=m["splits"]["val"]["files"],
                unpack_seconds=round(unpack_s, 2))
    return out[0], out[1], desc


def load_named(spec):
    """--corpus: "linux" (the packed corpus, data/corpus), "stdlib" (Python's standard library), "auto" (linux
    when its streams are here, else stdlib; the description's name says which), or a folder of .py files.
    Returns (train, val, description)."""
    if spec in (None, "", "auto"):
        spec = "linux" if packed_available() else "stdlib"
    if spec == "linux":
        return load_packed()
    if spec == "stdlib":
        train, val, desc = load_corpus(default_root())
        return train, val, dict(desc, name="python-stdlib-bytes")
    train, val, desc = load_corpus(spec)
    return train, val, dict(desc, name="folder:" + os.path.basename(os.path.normpath(spec)))
