"""nibble.torch: a drop-in nn.Linear whose three GEMMs follow a nibble recipe (docs/spec.md §2-3).

    layer = nibble.torch.Linear(1024, 4096, recipe="quartet", backward_rounding="stochastic")
    model = nibble.torch.convert(model, "fp8-delayed")          # embeddings / lm_head stay high precision

GEMM operands (docs/spec.md §5): fprop X[T,I] . W[O,I]^T, dgrad dY[T,O] . (W^T)[I,O]^T, wgrad dY^T[O,T] . (X^T)[I,T]^T;
each operand is quantized along its GEMM's inner dimension with its role's rule (x, w, dy). The GEMM
itself runs in float32 on the dequantized values (exact products; float32 accumulation), so the
numbers equal what an exact low-precision GEMM computes, up to summation order.
"""
import re
import warnings

try:
    import torch
except ModuleNotFoundError as e:
    if e.name != "torch":
        raise
    raise ImportError("nibble.torch needs PyTorch, which is not installed: `pip install torch` (any build, CPU or "
                      "CUDA). The CPU reference works without it: nibble.quantize(numpy_array, recipe)") from e
from torch import nn

from ._ext import extension, load_extension, recipe_names
from . import ops
from .backends import decoded, emulate, emulated, fp8, mxfp4, quartet, reference
from .readback import DeviceFlags, capturing
from .weight_cache import weight_cache  # noqa: F401  (part of this module's API)
from .seeds import mix, quartet_backward_seed  # noqa: F401  (quartet_backward_seed: part of this module's API)

# The C++ table's names (include/nibble/quant/recipe_list.hpp) through nibble._C; without the extension,
# the recipes the torch emulation implements (the only backend that runs then).
RECIPES = recipe_names(extension()) if extension() is not None else emulated.RECIPES
_ROLE_INDEX = {"x": 0, "w": 1, "dy": 2}
_BLOCK_ALONG_K = {"bf16": 1, "fp8-delayed": 1, "fp8-current": 1, "fp8-block": 128, "mxfp8": 32, "mxfp4": 32,
                  "nvfp4": 16, "quartet": 32}
BACKENDS = ("auto", "reference", "emulated", "cuda")
CUDA_RECIPES = ("quartet", "fp8-current", "fp8-delayed", "fp8-block", "mxfp4", "mxfp8", "nvfp4")  # backend cuda
_WARNED_CUDA_FALLBACK = set()
_FP8_CUDA_RECIPES = ("fp8-current", "fp8-delayed", "fp8-block")  # backend cuda needs features % 16
_DEFAULTS = dict(backward_rounding="nearest", hadamard_size=32, rotate=True, forward_quantizer="quest",
                 mx_scale_rule="default", margin=0, window=1024, backend="auto", check_finite="deferred",
                 gemm_check="deferred", delayed_first_step="te")
DELAYED_FIRST_STEP = emulated.DELAYED_FIRST_STEP  # fp8-delayed's delayed_first_step values
_CHECK_FINITE = {"deferred": "deferred", True: "sync", "sync": "sync", False: "off", "off": "off"}
_FINITE_NAMES = ("input", "weight", "bias", "forward output", "incoming gradient", "input gradient", "weight gradient")
_ORIGIN = {"input": "made upstream of this layer", "weight": "put there by an earlier update",
           "bias": "put there by an earlier update", "incoming gradient": "made by the layers after it"}
_PASS_BITS = {"fprop": 1, "dgrad": 2, "wgrad": 4}
_SEEDED_KERNELS = ("quartet", "nvfp4")  # CUDA recipes whose kernels take per-step seeds as arguments


class NonFiniteError(FloatingPointError):
    """A training step produced NaN or inf; the message names the step and the layer."""


class _RecipeLinearFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, layer):
        be, recipe = layer._backend(x), layer.recipe
        ctx.layer, ctx.be, ctx.step = layer, be, layer.host_step()
        if recipe == "quartet":
            xq, mx, p = be.quartet_forward(x)
            wq, mw, _ = be.quartet_forward(weight)
            ctx.save_for_backward(xq, wq, mx, mw)
        else:
            xq, p = layer._quantize(be, x, "x", 0)
            wq, _ = layer._quantize(be, weight, "w", 1)
            # Per-tensor recipes: the transposed copies hold the same values; block recipes requantize
            # X^T and W^T along their own inner dimension in backward, from the high-precision tensors.
            ctx.save_for_backward(*((xq, wq) if recipe in emulated.PER_TENSOR else (x, weight)))
        layer.last_path = p
        y = xq @ wq.t()
        if recipe == "quartet" and layer.options["forward_quantizer"] == "absmax":
            y = y * emulate.QUARTET_RESCALE  # both operands hold 3/4 of their values (prescale 0.75)
        if bias is not None:
            y = y + bias
        layer._require_finite(dict(input=x, weight=weight, bias=bias), {"forward output": y})
        return y

    @staticmethod
    def backward(ctx, dy):
        layer, be, recipe, step = ctx.layer, ctx.be, ctx.layer.recipe, ctx.step
        dy = dy.contiguous().float()
        seed_d, seed_w = mix(layer.seed, step, 1), mix(layer.seed, step, 2)
        if recipe == "quartet":
            # One sign seed per layer per step for both rotations (as src/recipes/quartet_layer.cu), so
            # the CUDA backend quantizes dY once into its row-wise and column-wise copies.
            xq, wq, mx, mw = ctx.saved_tensors
            sr = layer.options["backward_rounding"] == "stochastic"
            seed_b = quartet_backward_seed(layer.seed, step)
            # absmax: Wq and Xq hold 3/4 of their values, so their requantized copies are 3/4 smaller once
            # more: 4/3 on top of the epilogue's 16/9 (as nibble.backends.quartet's GEMM alpha 64/27).
            undo = 1.0 / emulate.QUARTET_PRESCALE if layer.options["forward_quantizer"] == "absmax" else 1.0
            a, p = be.quartet_backward(dy, seed_b, sr)                     # dY along O
            b, _ = be.quartet_backward(wq.t().contiguous(), seed_b, sr)    # Wq^T along O, same signs
            g = a @ b.t()
            dx = be.quartet_epilogue(g * undo if undo != 1.0 else g, mx)
            a, _ = be.quartet_backward(dy.t().contiguous(), seed_b, sr)    # dY^T along T
            b, _ = be.quartet_backward(xq.t().contiguous(), seed_b, sr)    # Xq^T along T, same signs
            g = a @ b.t()
            dw = be.quartet_epilogue(g * undo if undo != 1.0 else g, mw)
        elif recipe in emulated.PER_TENSOR:
            xq, wq = ctx.saved_tensors
            dyq, p = layer._quantize(be, dy, "dy", 2, seed=seed_d)
            dx, dw = dyq @ wq, dyq.t() @ xq
        else:
            x, w = ctx.saved_tensors
            rht = recipe == "nvfp4"  # nvfp4: random Hadamard on the wgrad operands only
            dyq, p = layer._quantize(be, dy, "dy", 2, seed=seed_d)
            wtq, _ = layer._quantize(be, w.t().contiguous(), "w", 1)
            dx = dyq @ wtq.t()
            dytq, _ = layer._quantize(be, dy.t().contiguous(), "dy", 2, seed=seed_w, rht=rht)
            xtq, _ = layer._quantize(be, x.t().contiguous(), "x", 0, rht=rht)
            dw = dytq @ xtq.t()
        layer.last_backward_path = p
        layer._require_finite({"incoming gradient": dy}, {"input gradient": dx, "weight gradient": dw}, step)
        db = dy.sum(0) if ctx.needs_input_grad[2] else None
        return dx, dw, db, None


class Linear(nn.Module):
    """nn.Linear with nibble's recipe on all three GEMMs.

    recipe_options: backward_rounding (quartet: nearest | stochastic), hadamard_size (16/32/64/128),
    rotate (bool), forward_quantizer (quest | absmax), mx_scale_rule (default = te for mxfp8 and ocp for
    mxfp4 | te (alias round-up) | ocp), margin, window and delayed_first_step (fp8-delayed, Transformer Engine's
    DelayedScaling: each step quantizes with the current scale, then records its amax; the scale becomes
    fmax 2^-margin / max(history) when that max is finite and > 0, else stays; a non-finite amax stays in
    its slot until the window moves past it; the first step uses scale 1 ("te", default) or the
    tensor's own amax ("own_amax")), backend (auto | reference | emulated | cuda; auto = reference on CPU tensors; on CUDA
    tensors cuda = nibble's own kernels and cuBLASLt for the recipes CUDA_RECIPES (nibble.backends.quartet,
    fp8, mxfp4, and nibble.backends.decoded for mxfp8 and nvfp4: exact BF16 decodes
    for BF16 GEMMs, as Hopper has no MXFP8 / NVFP4 GEMM; auto falls back to emulated with a warning when
    the extension lacks them or the shape does not fit them), emulated for the other recipes),
    check_finite (NonFiniteError naming step and layer): "deferred" (default) sums each tensor a pass
    reads or makes on the device and sets a device flag, no host sync; the flag is read back
    asynchronously (nibble.readback) and raised at one of the layer's next passes (typically the next
    step), or at once by nibble.torch.check_finite(model) (one host sync for the whole model); "sync" (or
    True) checks every pass before returning (a host sync per pass, exact counts in the message); False
    or "off" checks nothing. gemm_check (quartet and mxfp4 on the CUDA backend, whose FP8 GEMMs need
    every row of an operand within 14 binades, docs/spec.md §4): "sync" reads the violation counters
    at each pass (one host sync per pass) and picks the exact path (row FP8, 1x128-group FP8 or BF16
    decode) before the GEMM; "deferred" (default) runs the row FP8 GEMM, counts violations on the
    device and reads them back one step late: a pass that had any is reported (RuntimeWarning naming
    layer, step and pass; layer.inexact_passes) and the layer checks synchronously from then on.
    Buffers (in the state_dict):
    amax_history [3, window] (roles x, w, dy; newest last), amax_filled [3], scale [3] (fp8-delayed's s_enc
    per role as of its latest update, 1 before any; a state_dict without it gets it derived from its
    history), step, seed.
    """

    def __init__(self, in_features, out_features, bias=True, recipe="quartet", device=None, dtype=None,
                 seed=None, **recipe_options):
        super().__init__()
        self.options = {**_DEFAULTS, **checked_recipe_options(recipe, recipe_options)}
        rule = self.options["mx_scale_rule"]
        if rule not in ("default", "te", "round-up", "ocp"):
            raise ValueError(f"mx_scale_rule {rule!r} is unknown; valid: default, te (alias round-up), ocp")
        # One name per rule from here on (the default is docs/recipes.md's: te for mxfp8, ocp for mxfp4).
        self.options["mx_scale_rule"] = ("te" if recipe == "mxfp8" else "ocp") if rule == "default" else \
            ("te" if rule == "round-up" else rule)
        if self.options["check_finite"] not in _CHECK_FINITE:
            raise ValueError(f"check_finite {self.options['check_finite']!r} is unknown; valid: deferred, sync (or "
                             "True), off (or False)")
        self.options["check_finite"] = _CHECK_FINITE[self.options["check_finite"]]
        if self.options["gemm_check"] not in ("deferred", "sync"):
            raise ValueError(f"gemm_check {self.options['gemm_check']!r} is unknown; valid: deferred, sync")
        if self.options["backward_rounding"] not in ("nearest", "stochastic"):
            raise ValueError("backward_rounding must be nearest or stochastic")
        if self.options["delayed_first_step"] not in DELAYED_FIRST_STEP:
            raise ValueError(f"delayed_first_step {self.options['delayed_first_step']!r} is unknown; valid: te (scale 1, "
                             "Transformer Engine), own_amax (the first tensor's own amax)")
        if self.options["backend"] not in BACKENDS:
            raise ValueError(f"backend {self.options['backend']!r} is unknown; valid: {', '.join(BACKENDS)}")
        if self.options["backend"] == "cuda" and recipe not in CUDA_RECIPES:
            raise ValueError(f"backend 'cuda' runs recipes {', '.join(CUDA_RECIPES)} on "
                             f"nibble's kernels; recipe "
                             f"{recipe} on CUDA tensors runs the torch emulation (backend 'auto' or 'emulated')")
        if self.options["backend"] == "cuda" and recipe in _FP8_CUDA_RECIPES:  # FP4 / MX: their block, below
            for name, n in (("in_features", in_features), ("out_features", out_features)):
                if n % 16:
                    raise ValueError(f"backend 'cuda' (recipe {recipe}): {name} {n} is not a multiple of 16, which "
                                     "nibble's FP8 kernels and cuBLASLt's FP8 GEMMs need; pad it, or use backend "
                                     "'auto' (the torch emulation for this layer)")
        blk = max(_BLOCK_ALONG_K[recipe], self.options["hadamard_size"] if recipe == "quartet" else 1)
        for name, n in (("in_features", in_features), ("out_features", out_features)):
            if n % blk:
                raise ValueError(f"{name} {n} is not a multiple of {blk}, the block size of recipe {recipe} "
                                 "along a GEMM's inner dimension; pad it or skip this layer in convert()")
        self.in_features, self.out_features, self.recipe = in_features, out_features, recipe
        self.weight = nn.Parameter(torch.empty(out_features, in_features, device=device, dtype=dtype))
        self.bias = nn.Parameter(torch.empty(out_features, device=device, dtype=dtype)) if bias else None
        self.reset_parameters()
        w = self.options["window"]
        self.register_buffer("amax_history", torch.zeros(3, w, dtype=torch.float32, device=device))
        self.register_buffer("amax_filled", torch.zeros(3, dtype=torch.long, device=device))
        self.register_buffer("scale", torch.ones(3, dtype=torch.float32, device=device))
        self.register_buffer("step", torch.zeros((), dtype=torch.long, device=device))
        s = int(torch.randint(0, 2 ** 62, ()).item()) if seed is None else int(seed)
        self.register_buffer("seed_buffer", torch.tensor(s, dtype=torch.long, device=device))
        self.layer_name = ""  # set by convert(); used in error messages
        self.last_path = self.last_backward_path = None
        self._ext = None
        self._host_cache = {}  # buffer name -> (key of the buffer's state, value on the host)
        self._finite_flags = DeviceFlags((0, -1))      # bit per _FINITE_NAMES, first step flagged
        self._inexact_flags = DeviceFlags((0, -1, 0))  # violating rows, first step, bit per GEMM pass
        self._weight_copies = None  # quantized weight copies while weight_cache(model) is on
        self.inexact_passes = []  # (first step, passes, violating rows) found by gemm_check="deferred"
        self.forget_history_state()
        self._new_flags()
        self._op_key = ops.register(self)  # the custom ops' handle on this layer (nibble.ops)

    def _new_flags(self):
        """The deferred checks' device flags on the buffers' device, made before any pass (so a compiled graph
        finds them as inputs instead of creating them)."""
        for flags in (self._finite_flags, self._inexact_flags):
            flags.on(self.step.device)

    def _apply(self, fn, *args, **kwargs):
        out = super()._apply(fn, *args, **kwargs)
        if self._finite_flags.values is None or self._finite_flags.values.device != self.step.device:
            self._new_flags()  # moved (model.cuda()): fresh flags there, as DeviceFlags.on at first use
        return out

    def __setstate__(self, state):
        super().__setstate__(state)
        self._op_key = ops.register(self)  # a copy (copy.deepcopy, unpickling) is a layer of its own

    def forget_history_state(self):
        """Forget which fp8-delayed amax histories are known non-empty (nibble.backends.fp8 reads amax_filled
        back again at the next pass). load_state_dict calls it; call it after editing amax_filled by hand."""
        self._delayed_nonempty = [False, False, False]

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        key, hist = prefix + "scale", state_dict.get(prefix + "amax_history")
        if key not in state_dict and hist is not None:
            # A state_dict saved without the scale: the one its history gives (1 where its max is 0 or
            # non-finite), which is what the next step would compute from that history anyway.
            hist = hist.detach().to(torch.float32)
            state_dict[key] = torch.stack([emulate.delayed_encode_scale(hist[i].amax(), torch.ones((), device=hist.device),
                                                                        emulated.FP8_FMAX[role], self.options["margin"])
                                           for i, role in enumerate(("x", "w", "dy"))])
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self.forget_history_state()

    def _host_value(self, name):
        """int(buffer) without a host sync in steady state: the value is read once and cached under the
        buffer's identity and version counter, which every in-place write (optimizer-free buffers: +=,
        fill_, copy_ of load_state_dict or DDP) bumps, so only a write from outside the layer reads it again."""
        t = getattr(self, name)
        key = (id(t), t.data_ptr(), t._version)
        hit = self._host_cache.get(name)
        if hit is None or hit[0] != key:
            hit = (key, int(t))
            self._host_cache[name] = hit
        return hit[1]

    def host_step(self):
        """The step counter as a Python int (no host sync in steady state)."""
        return self._host_value("step")

    @property
    def seed(self):
        return self._host_value("seed_buffer")

    def reset_parameters(self):
        nn.Linear.reset_parameters(self)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, recipe={self.recipe}")

    def _backend(self, x):
        choice = self.options["backend"]
        if choice == "auto":
            choice = "reference" if x.device.type == "cpu" else "emulated"
        if choice == "emulated":
            return emulated.EmulatedBackend(self.options)
        if self._ext is None:
            self._ext = load_extension()
        return reference.ReferenceBackend(self._ext, self.options)

    def _cuda_kernels(self, x):
        """The module that runs this call on nibble's CUDA kernels (nibble.backends.quartet for quartet,
        nibble.backends.mxfp4 for mxfp4, nibble.backends.decoded for mxfp8 and nvfp4, nibble.backends.fp8 for
        the fp8 recipes), or None: a recipe of CUDA_RECIPES on a CUDA tensor with backend cuda, or auto when the
        extension has the kernels and the shape fits them (else auto warns once per reason and emulates,
        and cuda raises)."""
        choice = self.options["backend"]
        if choice == "cuda" and x.device.type != "cuda":
            raise ValueError(f"layer '{self.layer_name or 'Linear'}': backend 'cuda' needs CUDA tensors, got "
                             f"{x.device.type}; use backend 'auto' or 'reference' for CPU tensors")
        self._cuda_fallback = None
        if self.recipe not in CUDA_RECIPES or x.device.type != "cuda" or choice not in ("auto", "cuda"):
            return None
        module = {"quartet": quartet, "mxfp4": mxfp4, "mxfp8": decoded, "nvfp4": decoded}.get(self.recipe, fp8)
        reason = module.unavailable_for(self, x)
        if reason is None:
            return module
        if choice == "cuda":
            raise RuntimeError(f"layer '{self.layer_name or 'Linear'}': backend 'cuda' cannot run: {reason}")
        self._cuda_fallback = reason  # appended to last_path
        if (self.recipe, reason) not in _WARNED_CUDA_FALLBACK:  # once per process and reason, not once per layer
            _WARNED_CUDA_FALLBACK.add((self.recipe, reason))
            warnings.warn(f"nibble: {self.recipe} layers on CUDA tensors run the torch emulation, not nibble's "
                          f"kernels (first: layer '{self.layer_name or 'Linear'}'): {reason}", RuntimeWarning,
                          stacklevel=3)
        return None

    def _compiled_kernels(self, x):
        """Whether a traced call runs on nibble's CUDA kernels through the custom ops: _cuda_kernels' choice
        without its side effects (a fallback takes the eager path, with its warning)."""
        if self.recipe not in CUDA_RECIPES or not x.is_cuda or self.options["backend"] not in ("auto", "cuda"):
            return False
        module = {"quartet": quartet, "mxfp4": mxfp4, "mxfp8": decoded, "nvfp4": decoded}.get(self.recipe, fp8)
        return module.unavailable_for(self, x) is None

    def _quantize(self, be, x, role, idx, seed=0, rht=False):
        if self.recipe != "fp8-delayed":
            v, _, path = be.plain(x, self.recipe, role, seed, None, rht)
            return v, path
        with torch.no_grad():
            v, amax, path = be.plain(x, self.recipe, role, seed, self._delayed_scale(x, role, idx), rht)
            if self.training or role == "dy":  # evaluation passes (module.eval()) use the history, add nothing
                self._record_amax(idx, amax)
        return v, f"{path} [delayed scaling, {DELAYED_FIRST_STEP[self.options['delayed_first_step']]}]"

    def _delayed_scale(self, x, role, idx):
        """fp8-delayed: s_enc of this pass, a float32 tensor on the buffers' device, decided there (no host sync).
        The history holds the amaxes of the steps before this one, so updating the scale from it first and then
        quantizing is Transformer Engine's order (quantize, record, update) shifted by one step: the same scales,
        and every backend (and DDP's all-reduced history) updates from the same state."""
        fmax, margin = emulated.FP8_FMAX[role], self.options["margin"]
        s = emulate.delayed_encode_scale(self.amax_history[idx].amax(), self.scale[idx], fmax, margin)
        self.scale[idx:idx + 1].copy_(s.reshape(1))
        if self.options["delayed_first_step"] == "own_amax":  # not stored: the update after it decides
            own = emulate.per_tensor_encode_scale(fmax, x.detach().abs().amax().float().to(s.device), margin)
            s = torch.where(self.amax_filled[idx] == 0, own, s)
        return s

    def _record_amax(self, idx, amax):
        """Push this pass's amax (kept as it is, NaN/inf included, as Transformer Engine) into the role's history."""
        h = self.amax_history[idx]
        h.copy_(torch.roll(h, -1))
        h[-1:].copy_(torch.as_tensor(amax, dtype=torch.float32).to(h.device).reshape(1))
        self.amax_filled[idx:idx + 1].add_(1).clamp_(max=h.shape[0])

    def _require_finite(self, sources, results, step=None):
        """Raise NonFiniteError when any tensor of `sources` (what came in: input, weight, incoming gradient)
        or `results` (what the layer made) holds NaN/inf. One reduction and one host sync when all is
        finite; the names are only sorted out on failure. Inputs are checked too because some quantizers
        hide NaN (Quartet's zeroes a non-finite group), which would leave a NaN master weight unseen."""
        mode = _CHECK_FINITE.get(self.options["check_finite"], "sync")  # options may be set by hand to a bool
        if mode == "off":
            return
        if mode == "deferred":
            self._flag_non_finite({**sources, **results}, step)
            return
        ts = [t for t in list(sources.values()) + list(results.values()) if t is not None]
        if bool(torch.stack([torch.isfinite(t).all() for t in ts]).all()):
            return
        bad = lambda d: [f"{k} ({int((~torch.isfinite(v)).sum())} of {v.numel()})" for k, v in d.items()
                         if v is not None and not bool(torch.isfinite(v).all())]
        step = self.host_step() if step is None else int(step)  # backward: the step of its forward
        self._raise_non_finite(step, bad(sources), bad(results), "")

    def _raise_non_finite(self, step, came, made, how):
        where = ("already non-finite on entry: " + ", ".join(f"{c}, {_ORIGIN[c.split(' (')[0]]}" for c in came)
                 if came else "its inputs were finite, so they first appeared in this layer's quantize/GEMM: "
                 + ", ".join(made))
        step = int(step)  # a device scalar where a pass kept the step on the device
        raise NonFiniteError(f"step {step}: non-finite values (NaN/inf) at layer '{self.layer_name or 'Linear'}' "
                             f"(recipe {self.recipe}, path {self.last_path}): {where}{how}")

    def _flag_non_finite(self, tensors, step):
        """check_finite="deferred": one FP32 sum per tensor (NaN/inf make it non-finite; so would finite
        values whose sum overflows FP32, which is worth stopping for too), a bit per non-finite one into
        the layer's device flags, the step of the first; no host sync."""
        named = [(i, t) for i, n in enumerate(_FINITE_NAMES) if (t := tensors.get(n)) is not None]
        if not named:
            return
        dev = named[0][1].device
        sums = torch.stack([t.sum(dtype=torch.float32) for _, t in named])
        weights = _bit_weights(dev, tuple(i for i, _ in named))
        bits = (~torch.isfinite(sums)).long().mul(weights).sum()
        v = self._finite_flags.on(dev)
        step = self.host_step() if step is None else step
        if isinstance(step, torch.Tensor):
            step_t = step.to(device=dev, dtype=torch.int64).reshape(())
        else:
            step_t = torch.full((), int(step), dtype=torch.int64, device=dev)
        first = (v[0] == 0) & (bits != 0)
        v[1:2].copy_(torch.where(first, step_t, v[1]).reshape(1))
        v[0:1].bitwise_or_(bits.reshape(1))

    def _report_flags(self, values, finite):
        """Act on flags read back from the device: raise NonFiniteError (finite) or record and warn about
        inexact GEMM passes (and check them synchronously from now on)."""
        if finite:
            bits, first = values
            if bits:
                self._finite_flags.reset()
                names = [n for i, n in enumerate(_FINITE_NAMES) if bits >> i & 1]
                came = [n for n in names if n in _ORIGIN]
                self._raise_non_finite(first, came, [n for n in names if n not in _ORIGIN],
                                       " (check_finite='deferred': found on the device and reported after the "
                                       "pass; check_finite='sync' raises inside the pass with element counts)")
            return
        rows, first, passes = values
        if rows:
            self._inexact_flags.reset()
            which = [p for p, b in _PASS_BITS.items() if passes & b]
            self.inexact_passes.append((first, which, rows))
            self.options["gemm_check"] = "sync"
            warnings.warn(f"nibble: layer '{self.layer_name or 'Linear'}' (recipe {self.recipe}): from step {first}, "
                          f"{rows} operand rows of the {'/'.join(which)} GEMM(s) spread over more than 14 binades "
                          "and ran the row-scaled FP8 GEMM inexactly (gemm_check='deferred' reads the counts one "
                          "step late); this layer now checks before every GEMM (gemm_check='sync')",
                          RuntimeWarning, stacklevel=3)

    def poll_device_flags(self, wait=False):
        """Read back the deferred checks' flags: without a host sync (whatever finished copying), or with
        one (wait=True). Raises NonFiniteError, warns about inexact GEMM passes."""
        for flags, finite in ((self._finite_flags, True), (self._inexact_flags, False)):
            values = flags.read() if wait else flags.poll()
            if values is not None:
                self._report_flags(values, finite)

    def publish_device_flags(self):
        for flags in (self._finite_flags, self._inexact_flags):
            flags.publish()

    def record_inexact(self, counts, passes, step):
        """gemm_check="deferred": add the violating rows of `counts` (int32 [n, 2], column 0, -1 = not
        counted) of GEMM passes `passes` to the layer's device flags (no host sync)."""
        v = self._inexact_flags.on(counts.device)
        rows = counts[:, 0].clamp(min=0).to(torch.int64).sum()
        bit = sum(_PASS_BITS[p] for p in passes)
        hit = rows > 0
        step = step.to(v.device, torch.int64).reshape(()) if isinstance(step, torch.Tensor) else \
            torch.full_like(v[1], step)  # a device scalar where a pass kept the step on the device
        v[1:2].copy_(torch.where((v[0] == 0) & hit, step, v[1]).reshape(1))
        v[2:3].bitwise_or_(torch.where(hit, torch.full_like(v[2], bit), torch.zeros_like(v[2])).reshape(1))
        v[0:1].add_(rows.reshape(1))

    def forward(self, x):
        compiling = _compiling()
        if not compiling and not capturing():
            self.poll_device_flags()
        elif not compiling and self.recipe in _SEEDED_KERNELS and self.training and torch.is_grad_enabled():
            warnings.warn(f"nibble: layer '{self.layer_name or 'Linear'}' (recipe {self.recipe}) is captured into a CUDA "
                          f"graph: every replay replays the seeds of step {self.host_step()} (its kernels take the "
                          "step's rotation / rounding seeds as arguments), where eager steps would use new ones",
                          RuntimeWarning, stacklevel=2)
        shape = x.shape
        x2 = x.reshape(-1, self.in_features)
        if self.recipe in ("quartet", "nvfp4", "mxfp4", "mxfp8", "fp8-block") and self.training \
                and torch.is_grad_enabled() and x2.shape[0] % _BLOCK_ALONG_K[self.recipe]:
            raise ValueError(f"layer '{self.layer_name}': {x2.shape[0]} tokens is not a multiple of "
                             f"{_BLOCK_ALONG_K[self.recipe]}, the block size of the wgrad GEMM's inner dimension")
        if compiling and ops.REGISTERED and self._compiled_kernels(x2):
            # torch.compile: the custom ops (nibble.ops) run the same kernels and advance the step; the deferred
            # checks' flags accumulate on the device, read by check_finite(model) or poll_device_flags().
            return ops.linear(self, x2).reshape(*shape[:-1], self.out_features).to(x.dtype)
        cuda_module = self._cuda_kernels(x2)
        if cuda_module is not None:
            y = cuda_module.apply(self, x2)  # keeps x's dtype into the kernels
        else:
            y = _RecipeLinearFunction.apply(x2.contiguous().float(), self.weight.float(),
                                            None if self.bias is None else self.bias.float(), self)
            if getattr(self, "_cuda_fallback", None):
                self.last_path += f" (nibble CUDA kernels not used: {self._cuda_fallback})"
        if self.training:
            step = self.host_step()
            with torch.no_grad():
                self.step += 1
            t = self.step
            self._host_cache["step"] = ((id(t), t.data_ptr(), t._version), step + 1)
        self.publish_device_flags()
        return y.reshape(*shape[:-1], self.out_features).to(x.dtype)


_BIT_WEIGHTS = {}


def _compiling():
    """Whether torch.compile is tracing this call (torch >= 2.3; older torch: never)."""
    compiler = getattr(torch, "compiler", None)
    return compiler is not None and hasattr(compiler, "is_compiling") and compiler.is_compiling()


def _bit_weights(device, indices):
    """int64 [len(indices)] of 2^index on `device`, made there once (no host-to-device copy per pass)."""
    key = (str(device), indices)
    if key not in _BIT_WEIGHTS:
        _BIT_WEIGHTS[key] = torch.tensor([1 << i for i in indices], dtype=torch.int64).to(device)
    return _BIT_WEIGHTS[key]


def check_finite(model):
    """Raise NonFiniteError if any nibble layer of `model` has met NaN/inf since its flags were last
    reported (check_finite="deferred"), and warn about GEMM passes gemm_check="deferred" found inexact.
    One host sync for the whole model (all flags in one read). Returns the number of layers checked."""
    layers = [m for m in model.modules() if isinstance(m, Linear)]
    live = [(m, f, fin) for m in layers for f, fin in ((m._finite_flags, True), (m._inexact_flags, False))
            if f.values is not None]
    if live:
        dev = live[0][1].values.device
        host = torch.cat([f.values.to(dev) for _, f, _ in live]).tolist()
        at = 0
        for m, f, fin in live:
            n = len(f.init)
            m._report_flags(host[at:at + n], fin)
            at += n
    return len(layers)


DEFAULT_SKIP = (r"(^|\.)(embed|embeddings|wte|wpe|tok_embeddings)($|\.)", r"(^|\.)(lm_head|head|output)$")


def check_recipe(recipe):
    """Raise ValueError listing the valid names unless `recipe` is one of RECIPES. Every entry point that takes
    a recipe name checks it here first, whether or not it goes on to build a layer."""
    if not isinstance(recipe, str) or recipe not in RECIPES:
        raise ValueError(f"recipe {recipe!r} is unknown; valid recipes: {', '.join(RECIPES)}")


def checked_recipe_options(recipe, recipe_options):
    """`recipe_options` after check_recipe(recipe) and a check that every option name is known."""
    check_recipe(recipe)
    unknown = set(recipe_options) - set(_DEFAULTS)
    if unknown:
        raise ValueError(f"unknown recipe options {sorted(unknown)}; valid: {sorted(_DEFAULTS)}")
    return recipe_options


def convert(model, recipe, skip=DEFAULT_SKIP, **recipe_options):
    """Replace every nn.Linear of `model` (in place) whose qualified name matches none of the `skip`
    regular expressions by a nibble Linear with the same weights. Embeddings are not nn.Linear and stay;
    by default layers named lm_head/head/output are kept high precision too. Returns the model.
    The recipe and its options are checked first, so a misspelled name fails even on a model with no
    nn.Linear left to replace (one converted already)."""
    checked_recipe_options(recipe, recipe_options)
    patterns = [re.compile(p) for p in ([skip] if isinstance(skip, str) else skip)]
    for idx, (name, child) in enumerate(list(model.named_modules())):
        if not isinstance(child, nn.Linear) or any(p.search(name) for p in patterns):
            continue
        new = Linear(child.in_features, child.out_features, bias=child.bias is not None, recipe=recipe,
                     device=child.weight.device, dtype=child.weight.dtype, seed=mix(0x6E6962626C65, idx, 3), **recipe_options)
        with torch.no_grad():
            new.weight.copy_(child.weight)
            if child.bias is not None:
                new.bias.copy_(child.bias)
        new.layer_name = name
        parent = model.get_submodule(name.rsplit(".", 1)[0]) if "." in name else model
        setattr(parent, name.rsplit(".", 1)[-1], new)
    return model
