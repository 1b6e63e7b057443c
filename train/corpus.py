"""An offline corpus: the Python standard library's own source files (present wherever Python is),
byte-level tokens (vocabulary 256). Files are split train/validation by a hash of their relative path,
so the split is the same on every machine with the same Python version, and no file's text is in both."""
import hashlib
import os
import sysconfig

import torch


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
