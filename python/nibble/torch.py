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

import torch
from torch import nn

from ._ext import extension, load_extension, recipe_names
from .backends import decoded, emulated, fp8, mxfp4, quartet, reference
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
                 mx_scale_rule="default", margin=0, window=1024, backend="auto", check_finite=True)


class NonFiniteError(FloatingPointError):
    """A training step produced NaN or inf; the message names the step and the layer."""


class _RecipeLinearFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, layer):
        be, recipe = layer._backend(x), layer.recipe
        ctx.layer, ctx.be, ctx.step = layer, be, int(layer.step)
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
            # One sign seed per layer per step for both rotations (as src/engine/quartet_layer.cu), so
            # the CUDA backend quantizes dY once into its row-wise and column-wise copies.
            xq, wq, mx, mw = ctx.saved_tensors
            sr = layer.options["backward_rounding"] == "stochastic"
            seed_b = quartet_backward_seed(layer.seed, step)
            a, p = be.quartet_backward(dy, seed_b, sr)                     # dY along O
            b, _ = be.quartet_backward(wq.t().contiguous(), seed_b, sr)    # Wq^T along O, same signs
            dx = be.quartet_epilogue(a @ b.t(), mx)
            a, _ = be.quartet_backward(dy.t().contiguous(), seed_b, sr)    # dY^T along T
            b, _ = be.quartet_backward(xq.t().contiguous(), seed_b, sr)    # Xq^T along T, same signs
            dw = be.quartet_epilogue(a @ b.t(), mw)
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
    mxfp4 | te (alias round-up) | ocp), margin and window
    (fp8-delayed), backend (auto | reference | emulated | cuda; auto = reference on CPU tensors; on CUDA
    tensors cuda = nibble's own kernels and cuBLASLt for the recipes CUDA_RECIPES (nibble.backends.quartet,
    fp8, mxfp4, and nibble.backends.decoded for mxfp8 and nvfp4: exact BF16 decodes
    for BF16 GEMMs, as Hopper has no MXFP8 / NVFP4 GEMM; auto falls back to emulated with a warning when
    the extension lacks them or the shape does not fit them), emulated for the other recipes),
    check_finite (raise NonFiniteError naming step and layer). Buffers (in the state_dict):
    amax_history [3, window] (roles x, w, dy; newest last), amax_filled [3], step, seed.
    """

    def __init__(self, in_features, out_features, bias=True, recipe="quartet", device=None, dtype=None,
                 seed=None, **recipe_options):
        super().__init__()
        if recipe not in RECIPES:
            raise ValueError(f"recipe {recipe!r} is unknown; valid recipes: {', '.join(RECIPES)}")
        unknown = set(recipe_options) - set(_DEFAULTS)
        if unknown:
            raise ValueError(f"unknown recipe options {sorted(unknown)}; valid: {sorted(_DEFAULTS)}")
        self.options = {**_DEFAULTS, **recipe_options}
        rule = self.options["mx_scale_rule"]
        if rule not in ("default", "te", "round-up", "ocp"):
            raise ValueError(f"mx_scale_rule {rule!r} is unknown; valid: default, te (alias round-up), ocp")
        # One name per rule from here on (the default is docs/recipes.md's: te for mxfp8, ocp for mxfp4).
        self.options["mx_scale_rule"] = ("te" if recipe == "mxfp8" else "ocp") if rule == "default" else \
            ("te" if rule == "round-up" else rule)
        if self.options["backward_rounding"] not in ("nearest", "stochastic"):
            raise ValueError("backward_rounding must be nearest or stochastic")
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
        self.register_buffer("step", torch.zeros((), dtype=torch.long, device=device))
        s = int(torch.randint(0, 2 ** 62, ()).item()) if seed is None else int(seed)
        self.register_buffer("seed_buffer", torch.tensor(s, dtype=torch.long, device=device))
        self.layer_name = ""  # set by convert(); used in error messages
        self.last_path = self.last_backward_path = None
        self._ext = None
        self.forget_history_state()

    def forget_history_state(self):
        """Forget which fp8-delayed amax histories are known non-empty (nibble.backends.fp8 reads amax_filled
        back again at the next pass). load_state_dict calls it; call it after editing amax_filled by hand."""
        self._delayed_nonempty = [False, False, False]

    def _load_from_state_dict(self, *args, **kwargs):
        super()._load_from_state_dict(*args, **kwargs)
        self.forget_history_state()

    @property
    def seed(self):
        return int(self.seed_buffer)

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

    def _quantize(self, be, x, role, idx, seed=0, rht=False):
        history = None
        if self.recipe == "fp8-delayed":
            n = int(self.amax_filled[idx])
            # An empty history is seeded with the tensor's own amax (the reference's one-shot rule).
            history = self.amax_history[idx, self.amax_history.shape[1] - n:] if n else None
        v, amax, path = be.plain(x, self.recipe, role, seed, history, rht)
        if self.recipe == "fp8-delayed" and (self.training or role == "dy"):
            # Evaluation passes (module.eval()) use the history but do not add to it.
            with torch.no_grad():
                # A non-finite amax takes its step's slot as 0 (AmaxHistory's rule).
                rec = amax if amax == amax and abs(amax) != float("inf") else 0.0
                self.amax_history[idx] = torch.roll(self.amax_history[idx], -1)
                self.amax_history[idx, -1] = rec
                self.amax_filled[idx] = min(int(self.amax_filled[idx]) + 1, self.amax_history.shape[1])
        return v, path

    def _require_finite(self, sources, results, step=None):
        """Raise NonFiniteError when any tensor of `sources` (what came in: input, weight, incoming gradient)
        or `results` (what the layer made) holds NaN/inf. One reduction and one host sync when all is
        finite; the names are only sorted out on failure. Inputs are checked too because some quantizers
        hide NaN (Quartet's zeroes a non-finite group), which would leave a NaN master weight unseen."""
        if not self.options["check_finite"]:
            return
        ts = [t for t in list(sources.values()) + list(results.values()) if t is not None]
        if bool(torch.stack([torch.isfinite(t).all() for t in ts]).all()):
            return
        bad = lambda d: [f"{k} ({int((~torch.isfinite(v)).sum())} of {v.numel()})" for k, v in d.items()
                         if v is not None and not bool(torch.isfinite(v).all())]
        came, made = bad(sources), bad(results)
        origin = {"input": "made upstream of this layer", "weight": "put there by an earlier update",
                  "bias": "put there by an earlier update", "incoming gradient": "made by the layers after it"}
        where = ("already non-finite on entry: " + ", ".join(f"{c}, {origin[c.split(' (')[0]]}" for c in came)
                 if came else "its inputs were finite, so they first appeared in this layer's quantize/GEMM: "
                 + ", ".join(made))
        step = int(self.step if step is None else step)  # backward: the step of its forward
        raise NonFiniteError(f"step {step}: non-finite values (NaN/inf) at layer '{self.layer_name or 'Linear'}' "
                             f"(recipe {self.recipe}, path {self.last_path}): {where}")

    def forward(self, x):
        shape = x.shape
        x2 = x.reshape(-1, self.in_features)
        if self.recipe in ("quartet", "nvfp4", "mxfp4", "mxfp8", "fp8-block") and self.training \
                and torch.is_grad_enabled() and x2.shape[0] % _BLOCK_ALONG_K[self.recipe]:
            raise ValueError(f"layer '{self.layer_name}': {x2.shape[0]} tokens is not a multiple of "
                             f"{_BLOCK_ALONG_K[self.recipe]}, the block size of the wgrad GEMM's inner dimension")
        cuda_module = self._cuda_kernels(x2)
        if cuda_module is not None:
            y = cuda_module.apply(self, x2)  # keeps x's dtype into the kernels
        else:
            y = _RecipeLinearFunction.apply(x2.contiguous().float(), self.weight.float(),
                                            None if self.bias is None else self.bias.float(), self)
            if getattr(self, "_cuda_fallback", None):
                self.last_path += f" (nibble CUDA kernels not used: {self._cuda_fallback})"
        if self.training:
            with torch.no_grad():
                self.step += 1
        return y.reshape(*shape[:-1], self.out_features).to(x.dtype)


DEFAULT_SKIP = (r"(^|\.)(embed|embeddings|wte|wpe|tok_embeddings)($|\.)", r"(^|\.)(lm_head|head|output)$")


def convert(model, recipe, skip=DEFAULT_SKIP, **recipe_options):
    """Replace every nn.Linear of `model` (in place) whose qualified name matches none of the `skip`
    regular expressions by a nibble Linear with the same weights. Embeddings are not nn.Linear and stay;
    by default layers named lm_head/head/output are kept high precision too. Returns the model."""
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
