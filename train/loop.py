"""The training loop of every nibble training script: the loss study (train/plan.py), the recipe comparison
and its data-parallel form (train/train.py) and the speed table (train/speed.py) all train through `Trainer`.

One step: BF16 autocast (CUDA) for everything outside the recipe GEMMs, the nibble layers outside autocast (the
recipe decides their precision), cross-entropy in FP32, AdamW (0.9, 0.95; fused on CUDA; weight decay 0.1 on
matrices), gradient clipping 1.0, the learning rate set per step (warm-up then cosine to 10%). The model is
torch.compile'd when it compiles (else eager: `compile_note` says which). The scheme "bf16" is torch's own
nn.Linear under BF16 autocast, not a nibble recipe. A step makes no host synchronisation: the loss stays on
the device until the caller reads it.
"""
import contextlib
import json
import math
import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, HERE)
import nibble.torch as nt  # noqa: E402
from corpus import windows  # noqa: E402
from model import Decoder  # noqa: E402

# name -> (layers, hidden, heads, peak learning rate); head size 64; every width a multiple of 32
# (the block of quartet's and mxfp4's inner dimension) and every FFN width a multiple of 128.
SIZES = {"xxs": (4, 192, 3, 3e-3), "xs": (4, 256, 4, 3e-3), "s": (6, 320, 5, 2.5e-3), "m": (6, 448, 7, 2e-3),
         "l": (8, 512, 8, 1.5e-3)}
# label (the `scheme` of `nibble law fit`) -> (nibble recipe or None for torch's BF16, recipe options)
SCHEMES = {
    "bf16": (None, {}),
    "fp8-current": ("fp8-current", {}),
    "fp8-delayed": ("fp8-delayed", {}),
    "mxfp8": ("mxfp8", {}),
    "nvfp4": ("nvfp4", {}),
    "mxfp4": ("mxfp4", {}),
    "quartet": ("quartet", {"backward_rounding": "nearest"}),
    "quartet-sr": ("quartet", {"backward_rounding": "stochastic"}),
}


def sizes_with(specs):
    """SIZES plus sizes given as NAME=LAYERS,HIDDEN,HEADS,LR (the --size option); ValueError names a bad one."""
    table = dict(SIZES)
    for spec in specs:
        name, _, vals = spec.partition("=")
        try:
            l, h, hd, lr = vals.split(",")
            table[name] = (int(l), int(h), int(hd), float(lr))
        except ValueError:
            raise ValueError(f"--size {spec!r}: expected NAME=LAYERS,HIDDEN,HEADS,LR, e.g. tiny=1,64,2,1e-3") from None
    return table


def non_embedding_params(layers, hidden):
    """As Decoder.non_embedding_params counts them: per block QKV + out (4 h^2), SwiGLU (3 h f), 2 norms; final norm."""
    ffn = int(math.ceil(hidden * 8 / 3 / 128) * 128)
    return layers * (4 * hidden * hidden + 3 * hidden * ffn + 2 * hidden) + hidden


def lr_at(step, steps, peak, warmup):
    """Linear warm-up over `warmup` steps, then cosine from `peak` down to 10% of it at the last step."""
    if step < warmup:
        return peak * (step + 1) / warmup
    p = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))


def scheme_label(scheme):
    """The recipe column of a row: the nibble recipe, or torch-bf16 for the bf16 scheme."""
    return SCHEMES[scheme][0] or "torch-bf16"


def scheme_options(scheme):
    opts = SCHEMES[scheme][1]
    return json.dumps(opts, sort_keys=True) if opts else ""


class OutsideAutocast(nn.Module):
    """Runs a nibble layer with autocast off: its recipe, not autocast, decides its GEMMs' precision."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        with torch.autocast(x.device.type, enabled=False):
            return self.inner(x)


def build_model(scheme, layers, hidden, heads, seq_len, seed, device, backend="auto", amp=True, layer_options=None):
    """The decoder of train/model.py with `scheme`'s linear layers, the same initial weights for a given seed.
    With amp, each nibble layer runs outside autocast (OutsideAutocast)."""
    torch.manual_seed(seed)
    model = Decoder(hidden=hidden, layers=layers, heads=heads, seq_len=seq_len).to(device)
    recipe, opts = SCHEMES[scheme]
    if recipe is not None:
        nt.convert(model, recipe, backend=backend, **{**opts, **(layer_options or {})})
        for name, m in list(model.named_modules()) if amp else []:
            if isinstance(m, nt.Linear):
                parent = model.get_submodule(name.rsplit(".", 1)[0]) if "." in name else model
                setattr(parent, name.rsplit(".", 1)[-1], OutsideAutocast(m))
    return model


def make_optimizer(model, lr, device):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    extra = {"fused": True} if device.type == "cuda" else {}
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, 0.95), **extra)


def layer_paths(model, autocast_on):
    """(kind, forward paths, backward paths): kind "cuda" when every nibble layer ran nibble's CUDA kernels,
    "emulated" when any ran the torch emulation or the CPU reference, "torch" for the bf16 scheme."""
    layers = [m for m in model.modules() if isinstance(m, nt.Linear)]
    if not layers:
        return "torch", "torch nn.Linear" + (" under bf16 autocast" if autocast_on else " (float32, no autocast)"), ""
    fwd = sorted({str(m.last_path) for m in layers})
    bwd = sorted({str(m.last_backward_path) for m in layers})
    kind = "cuda" if all(p.startswith("cuda") for p in fwd + bwd) else "emulated"
    return kind, " || ".join(fwd), " || ".join(bwd)


class Trainer:
    """One model, its optimizer and its step. `wrap` (e.g. DistributedDataParallel) is applied to the model
    before compiling; `model` stays the unwrapped module (parameters, layer paths, evaluation). `step` is the
    whole step; a caller that checks between its parts (train/train.py) calls set_lr, loss, backward, clip and
    update itself, in that order."""

    def __init__(self, scheme, layers, hidden, heads, lr, steps, seed=0, seq_len=512, device="cuda",
                 amp="bf16", compile="auto", backend="auto", warmup_fraction=0.05, warmup_steps=None, clip=1.0,
                 wrap=None, layer_options=None, log=print):
        self.device = torch.device(device)
        self.scheme, self.peak, self.steps, self.clip_norm = scheme, lr, steps, clip
        self.warmup = warmup_steps or max(1, round(warmup_fraction * steps))
        self.amp = self.device.type == "cuda" and amp == "bf16"
        self._rebuild = dict(scheme=scheme, layers=layers, hidden=hidden, heads=heads, seq_len=seq_len, seed=seed,
                             backend=backend, lr=lr, wrap=wrap, layer_options=layer_options)
        self._build()
        self.log = log
        if compile != "off" and hasattr(torch, "compile") and self.device.type == "cuda":
            self.fwd, self.compile_note = torch.compile(self.net), "compiled"
        self.calls = 0

    def _build(self):
        r = self._rebuild
        self.model = build_model(r["scheme"], r["layers"], r["hidden"], r["heads"], r["seq_len"], r["seed"],
                                 self.device, r["backend"], self.amp, r["layer_options"])
        self.opt = make_optimizer(self.model, r["lr"], self.device)
        self.net = r["wrap"](self.model) if r["wrap"] else self.model
        self.fwd, self.compile_note = self.net, "eager"

    def autocast(self):
        return torch.autocast("cuda", dtype=torch.bfloat16) if self.amp else contextlib.nullcontext()

    def loss(self, x, y):
        with self.autocast():
            return F.cross_entropy(self.fwd(x).flatten(0, 1).float(), y.flatten())

    def set_lr(self, step):
        for g in self.opt.param_groups:
            g["lr"] = lr_at(step, self.steps, self.peak, self.warmup)

    def backward(self, loss):
        self.opt.zero_grad(set_to_none=True)
        loss.backward()

    def clip(self):
        """Clip the gradients' global norm; returns the norm before clipping (a device tensor)."""
        return torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip_norm or float("inf"))

    def update(self):
        self.opt.step()

    def _step(self, step, x, y):
        self.set_lr(step)
        loss = self.loss(x, y)
        self.backward(loss)
        self.clip()
        self.update()
        return loss.detach()

    def step(self, step, x, y):
        """One optimizer step on windows (x, y); returns the loss as a device tensor. The first call compiles;
        a model the compiler cannot take is rebuilt (same seed, same weights) and trains eager, and says so."""
        self.calls += 1
        if self.calls > 1 or self.compile_note != "compiled":
            return self._step(step, x, y)
        try:
            return self._step(step, x, y)
        except Exception as e:  # noqa: BLE001
            if isinstance(e, nt.NonFiniteError):
                raise
            self.log(f"  torch.compile failed ({type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}); "
                     "training eager")
            torch._dynamo.reset()
            self._build()
            self.compile_note = f"eager (compile failed: {type(e).__name__})"
            return self._step(step, x, y)

    @torch.no_grad()
    def evaluate(self, val, starts, seq_len, batch):
        """Mean cross-entropy (nats per token) over the validation windows starting at `starts`. Runs the eager
        model (the same modules and weights as the compiled step): no recompilation for inference mode."""
        self.model.eval()
        total = torch.zeros((), device=self.device, dtype=torch.float64)
        with self.autocast():
            for i in range(0, len(starts), batch):
                x, y = windows(val, starts[i:i + batch], seq_len)
                total += F.cross_entropy(self.model(x).flatten(0, 1).float(), y.flatten(), reduction="sum").double()
        self.model.train()
        return float(total) / (len(starts) * seq_len)

    def paths(self):
        return layer_paths(self.model, self.amp)

    def sync(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
