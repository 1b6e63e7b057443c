"""nibble's CUDA backends as torch custom ops, so torch.compile traces a model with nibble layers without
graph breaks.

    nibble::linear_forward(x, weight, bias, amax_history, amax_filled, scale, step, seed, finite_flags,
                           inexact_flags, layer, recipe, need_dx, need_dw, need_db, training)
        -> (y, saved0..saved5, step_at, host, new amax_history, amax_filled, scale, step, finite_flags,
            inexact_flags)
    nibble::linear_backward(dy, saved0..saved5, step_at, host, amax_history, amax_filled, scale, finite_flags,
                            inexact_flags, layer, recipe, in_features, need_dx, need_dw, need_db,
                            x_dtype, w_dtype, b_dtype)
        -> (dx, dw, db, new amax_history, amax_filled, scale, finite_flags, inexact_flags)

The ops run the same code as the eager autograd functions of nibble.backends (Fp8CudaFunction,
QuartetCudaFunction, Mxfp4CudaFunction, DecodedCudaFunction), so a compiled step runs the eager step's kernels.
Every piece of module state a pass reads or writes is an argument: the fp8-delayed amax history, fill counts
and scales, the step counter, the seed and the two device-flag tensors of the deferred checks. The ops are
functional (torch registers autograd formulas only for those): they return the new state, which linear()
(forward) and the autograd formula (backward) copy into the layer's tensors; state a recipe never writes
comes back as an empty tensor (amax_history, amax_filled and scale for every recipe but fp8-delayed). What
stays on the layer is host-side configuration (recipe options), diagnostics (last_path, last_backward_path),
weight_cache's copies and which fp8-delayed histories are known non-empty, reached through `layer`, an
integer key into a registry of live layers (register()).
Saved tensors: the forward's copies for backward, six slots per recipe family (saved_specs); a slot the
recipe or the gradients do not use is an empty uint8 tensor. step_at is the step of the forward (a device
scalar, for the deferred checks); host is [step, seed] on the CPU for the recipes whose kernels take seeds as
arguments (quartet, nvfp4), else empty: their forward reads the step on the host, from the layer's cached
copy when the step buffer is as the layer last saw it, else by one device-to-host copy (under torch.compile,
once per forward of such a layer; the other recipes read nothing back).

The registration needs torch.library.custom_op (torch >= 2.4); with older torch, REGISTERED is False and
layers run the autograd functions only (which is what eager mode runs on every version).
"""
import itertools
import weakref

import torch

from . import _ext
from .backends import decoded, fp8, mxfp4, quartet
from .seeds import mix

REGISTERED = False  # set by _register() when torch has torch.library.custom_op
_FUNCTIONS = {"fp8": fp8.Fp8CudaFunction, "quartet": quartet.QuartetCudaFunction, "mxfp4": mxfp4.Mxfp4CudaFunction,
              "decoded": decoded.DecodedCudaFunction}
_SEEDED = ("quartet", "nvfp4")  # recipes whose kernels take the step's seeds as arguments
SLOTS = 6  # saved tensors per forward

_LAYERS = weakref.WeakValueDictionary()
_KEYS = itertools.count(1)


def register(layer):
    """A key for `layer` that the ops take as their `layer` argument (a constant in a compiled graph)."""
    key = next(_KEYS)
    _LAYERS[key] = layer
    return key


def _layer(key):
    layer = _LAYERS.get(key)
    if layer is None:
        raise RuntimeError(f"nibble ops: layer key {key} names no live nibble.torch.Linear (a graph compiled for a "
                           "model that was deleted); compile the model that runs")
    return layer


def family(recipe):
    """The backend family running `recipe` on the CUDA kernels (a key of _FUNCTIONS)."""
    if recipe in fp8.RECIPES:
        return "fp8"
    if recipe in decoded.RECIPES:
        return "decoded"
    if recipe in ("quartet", "mxfp4"):
        return recipe
    raise ValueError(f"recipe {recipe!r} has no CUDA kernels; CUDA recipes: quartet, mxfp4, {', '.join(fp8.RECIPES)}, "
                     f"{', '.join(decoded.RECIPES)}")


def _fp8_scale_count(recipe, role, rows, cols):
    """Entries of the column-wise copy's scale tensor of a [rows, cols] operand (fp8-block: cuBLASLt's layout)."""
    if recipe != "fp8-block":
        return 1  # per tensor: s_dec, shared by both copies
    ext = _ext.extension()
    return ext.fp8_block_scale_count("128x128" if role == "w" else "1x128", int(rows), int(cols), "colwise")


def saved_specs(recipe, t, i, o, need_dx, need_dw):
    """(shape, dtype) of each saved slot of a forward of x [t, i], w [o, i], or None where the slot is unused."""
    u8, f32 = torch.uint8, torch.float32
    fam = family(recipe)
    if fam == "fp8":  # X^T and its scales (wgrad), W^T and its scales (dgrad)
        per_tensor = recipe != "fp8-block"
        xs = ((_fp8_scale_count(recipe, "x", t, i),), f32) if need_dw or per_tensor else None
        ws = ((_fp8_scale_count(recipe, "w", o, i),), f32) if need_dx or per_tensor else None
        return [((i, t), u8) if need_dw else None, xs, ((i, o), u8) if need_dx else None, ws, None, None]
    if fam == "quartet":  # the forward planes of X and W: codes, E8M0 scales, packed trust masks
        return [((t, i // 2), u8), ((t, i // 32), u8), ((t * i // 8,), u8),
                ((o, i // 2), u8), ((o, i // 32), u8), ((o * i // 8,), u8)]
    if fam == "mxfp4":  # X^T planes (wgrad), W^T planes (dgrad)
        return [((i, t // 2), u8) if need_dw else None, ((i, t // 32), u8) if need_dw else None,
                ((i, o // 2), u8) if need_dx else None, ((i, o // 32), u8) if need_dx else None, None, None]
    if recipe == "mxfp8":  # X^T and W^T: E4M3 codes, E8M0 scales
        return [((i, t), u8) if need_dw else None, ((i, t // 32), u8) if need_dw else None, None,
                ((i, o), u8) if need_dx else None, ((i, o // 32), u8) if need_dx else None, None]
    br = decoded.NVFP4_BLOCK_ROWS  # nvfp4: X^T and W^T: E2M1 codes, UE4M3 scales, FP32 global decode scale
    x = [((i, t // 2), u8), ((i // br["x"], t // 16), u8), ((1,), f32)] if need_dw else [None] * 3
    w = [((i, o // 2), u8), ((i // br["w"], o // 16), u8), ((1,), f32)] if need_dx else [None] * 3
    return x + w


def _empty(device):
    return torch.empty(0, dtype=torch.uint8, device=device)


def forward_specs(x, weight, amax_history, amax_filled, scale, recipe, need_dx, need_dw):
    """(shape, dtype, device) of every output of linear_forward (empty uint8 for unused slots and unwritten state)."""
    (t, i), o, dev = x.shape, weight.shape[0], x.device
    e = ((0,), torch.uint8, dev)
    slots = [(s[0], s[1], dev) if s is not None else e for s in saved_specs(recipe, t, i, o, need_dx, need_dw)]
    host = ((2,) if recipe in _SEEDED else (0,), torch.int64, torch.device("cpu"))
    step = ((), torch.int64, dev)
    return ([((t, o), x.dtype, dev)] + slots + [step, host] + _state_like(recipe, amax_history, amax_filled, scale, dev)
            + [step] + _flag_specs(dev))


def _flag_specs(dev):
    return [((2,), torch.int64, dev), ((3,), torch.int64, dev)]


class _Flags:
    """A DeviceFlags stand-in holding the op's flag tensor."""

    def __init__(self, values):
        self.values = values

    def on(self, device):
        return self.values


class _LayerView:
    """What the backends read and write of a Linear, with its state tensors replaced by the op's arguments.
    Attributes it does not hold (options, recipe, layer_name, weight, the weight cache, fp8-delayed's known
    histories) are the layer's; attributes written (last_path, last_backward_path) land on the layer."""

    def __init__(self, layer, state, training, step, seed):
        hist, filled, scale, finite, inexact = state
        own = dict(_layer=layer, amax_history=hist, amax_filled=filled, scale=scale, training=training,
                   _finite_flags=_Flags(finite), _inexact_flags=_Flags(inexact), _step=step, _seed=seed)
        for k, v in own.items():
            object.__setattr__(self, k, v)

    def __getattr__(self, name):
        return getattr(object.__getattribute__(self, "_layer"), name)

    def __setattr__(self, name, value):
        setattr(self._layer, name, value)

    def host_step(self):
        """The step: a Python int for the seeded recipes, else the forward's step as a device scalar."""
        return self._step

    @property
    def seed(self):
        return self._seed

    def _require_finite(self, *args):
        return type(self._layer)._require_finite(self, *args)

    def _flag_non_finite(self, *args):
        return type(self._layer)._flag_non_finite(self, *args)

    def _raise_non_finite(self, *args):
        return type(self._layer)._raise_non_finite(self, *args)

    def record_inexact(self, *args):
        return type(self._layer).record_inexact(self, *args)


class _Ctx:
    """The part of an autograd context the backends' forward and backward use."""

    def __init__(self, needs_input_grad, saved=()):
        self.needs_input_grad = needs_input_grad
        self.saved_tensors = tuple(saved)

    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors


def _host_int(layer, t, name):
    """int(t) for a layer buffer `t`: the layer's cached copy when `t` is that buffer unchanged, else one read."""
    if t is getattr(layer, name):
        return layer._host_value(name)
    return int(t)


def _state(recipe, amax_history, amax_filled, scale, finite_flags, inexact_flags):
    """Fresh copies of the state a pass may write (fp8-delayed's history, fill counts and scales; the flags)."""
    delayed = recipe == "fp8-delayed"
    hist, filled, scale = ((t.clone() if delayed else t) for t in (amax_history, amax_filled, scale))
    return hist, filled, scale, finite_flags.clone(), inexact_flags.clone()


def _new_state(recipe, state):
    """The state outputs: what the pass may have written, empty where nothing can have been."""
    hist, filled, scale, finite, inexact = state
    if recipe != "fp8-delayed":
        # Three distinct tensors: a custom op's outputs may not alias one another (torch checks it).
        hist, filled, scale = (_empty(finite.device) for _ in range(3))
    return hist, filled, scale, finite, inexact


def forward_impl(x, weight, bias, amax_history, amax_filled, scale, step, seed, finite_flags, inexact_flags,
                 layer, recipe, need_dx, need_dw, need_db, training):
    """linear_forward's body: the backend's autograd forward on a view of the layer holding the op's tensors."""
    real = _layer(layer)
    if recipe != real.recipe:
        raise ValueError(f"nibble ops: layer '{real.layer_name}' has recipe {real.recipe}, the op was given {recipe}")
    step_at = step.clone()
    seeded = recipe in _SEEDED
    host_step = _host_int(real, step, "step") if seeded else step_at
    host_seed = _host_int(real, seed, "seed_buffer") if seeded else None
    state = _state(recipe, amax_history, amax_filled, scale, finite_flags, inexact_flags)
    view = _LayerView(real, state, training, host_step, host_seed)
    fam = family(recipe)
    ctx = _Ctx((need_dx, need_dw, need_db, False, False))
    args = (x, weight, bias, view) + (() if fam == "quartet" else (True,))
    y = _FUNCTIONS[fam].forward(ctx, *args)
    saved = list(ctx.saved_tensors) + [None] * (SLOTS - len(ctx.saved_tensors))
    specs = saved_specs(recipe, x.shape[0], x.shape[1], weight.shape[0], need_dx, need_dw)
    for k, (t, spec) in enumerate(zip(saved, specs)):
        got = None if t is None else (tuple(t.shape), t.dtype)
        if got != (None if spec is None else (tuple(spec[0]), spec[1])):
            raise AssertionError(f"nibble ops: {recipe} forward saved {got} in slot {k}; its fake implementation "
                                 f"says {spec}")
    saved = [_empty(x.device) if t is None else t for t in saved]
    host = torch.tensor([host_step, host_seed] if seeded else [], dtype=torch.int64)
    hist, filled, scale, finite, inexact = _new_state(recipe, state)
    return (y, *saved, step_at, host, hist, filled, scale, step + 1, finite, inexact)


def _backward_ctx(recipe, view, step_at, host, saved, needs, shapes, dtypes):
    """The forward's context as the backend's backward reads it, rebuilt from the op's arguments."""
    fam = family(recipe)
    ctx = _Ctx(needs, saved)
    ctx.layer, ctx.dtypes = view, dtypes
    if recipe in _SEEDED:
        step, seed = host.tolist()
        ctx.step = step
        object.__setattr__(view, "_seed", seed)
    else:
        ctx.step = step_at
    if fam == "fp8":
        ctx.kinds = tuple((fp8.HYBRID_FORMAT[r], "per_tensor") if recipe != "fp8-block" else
                          ("e4m3", "blk128x128" if r == "w" else "vec128") for r in ("x", "w"))
    else:
        ctx.shapes = shapes
    if fam == "decoded":
        ctx.seeds = (mix(seed, step, 1), mix(seed, step, 2)) if recipe == "nvfp4" and (needs[0] or needs[1]) \
            else None
    return ctx


_SAVED_USED = {"fp8": 4, "quartet": 6, "mxfp4": 4, "decoded": 6}  # slots each family's autograd function saves


def backward_impl(dy, saved, step_at, host, amax_history, amax_filled, scale, finite_flags, inexact_flags, layer,
                  recipe, in_features, need_dx, need_dw, need_db, x_dtype, w_dtype, b_dtype):
    """linear_backward's body: (dx, dw, db) (empty where not asked for) and the new state."""
    real = _layer(layer)
    (t, o), i = dy.shape, in_features
    specs = saved_specs(recipe, t, i, o, need_dx, need_dw)
    saved = [None if spec is None else s for s, spec in zip(saved, specs)]
    state = _state(recipe, amax_history, amax_filled, scale, finite_flags, inexact_flags)
    view = _LayerView(real, state, True, step_at, None)
    fam = family(recipe)
    ctx = _backward_ctx(recipe, view, step_at, host, saved[:_SAVED_USED[fam]], (need_dx, need_dw, need_db),
                        (t, i, o), (x_dtype, w_dtype, b_dtype if need_db else None))
    dx, dw, db = _FUNCTIONS[fam].backward(ctx, dy)[:3]
    return tuple(_empty(dy.device) if g is None else g for g in (dx, dw, db)) + _new_state(recipe, state)


def backward_specs(dy, in_features, need_dx, need_dw, need_db, x_dtype, w_dtype, b_dtype):
    """(shape, dtype, device) of dx, dw, db as linear_backward returns them (empty uint8 where not asked for)."""
    (t, o), dev = dy.shape, dy.device
    e = ((0,), torch.uint8, dev)
    return [((t, in_features), x_dtype, dev) if need_dx else e, ((o, in_features), w_dtype, dev) if need_dw else e,
            ((o,), b_dtype, dev) if need_db else e]


def _state_like(recipe, amax_history, amax_filled, scale, dev):
    """(shape, dtype, device) of the new fp8-delayed state outputs (empty for the other recipes)."""
    if recipe != "fp8-delayed":
        return [((0,), torch.uint8, dev)] * 3
    return [(tuple(t.shape), t.dtype, dev) for t in (amax_history, amax_filled, scale)]


def write_state(recipe, tensors, new):
    """Copy an op's new state into the layer's tensors (amax_history, amax_filled, scale, finite, inexact)."""
    with torch.no_grad():
        for k, (t, n) in enumerate(zip(tensors, new)):
            if k >= 3 or recipe == "fp8-delayed":
                t.copy_(n)


def linear(layer, x):
    """y = x W^T (+ b) of a nibble Linear on its CUDA kernels through the custom ops (x: [tokens, in_features])."""
    grad = torch.is_grad_enabled()
    need_dx = grad and x.requires_grad
    need_dw = grad and layer.weight.requires_grad
    need_db = grad and layer.bias is not None and layer.bias.requires_grad
    dev = x.device
    state = (layer.amax_history, layer.amax_filled, layer.scale, layer._finite_flags.on(dev),
             layer._inexact_flags.on(dev))
    out = torch.ops.nibble.linear_forward(x, layer.weight, layer.bias, *state[:3], layer.step, layer.seed_buffer,
                                          *state[3:], layer._op_key, layer.recipe, need_dx, need_dw, need_db,
                                          layer.training)
    new = out[9:12] + out[13:15]
    write_state(layer.recipe, state, new)
    if layer.training:
        with torch.no_grad():
            layer.step.copy_(out[12])
    return out[0]


def _register():
    global REGISTERED
    from typing import Optional
    Tensor = torch.Tensor

    @torch.library.custom_op("nibble::linear_forward", mutates_args=())
    def linear_forward(x: Tensor, weight: Tensor, bias: Optional[Tensor], amax_history: Tensor,
                       amax_filled: Tensor, scale: Tensor, step: Tensor, seed: Tensor, finite_flags: Tensor,
                       inexact_flags: Tensor, layer: int, recipe: str, need_dx: bool, need_dw: bool,
                       need_db: bool, training: bool) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor,
                                                               Tensor, Tensor, Tensor, Tensor, Tensor, Tensor,
                                                               Tensor, Tensor, Tensor]:
        return forward_impl(x, weight, bias, amax_history, amax_filled, scale, step, seed, finite_flags,
                            inexact_flags, layer, recipe, need_dx, need_dw, need_db, training)

    @linear_forward.register_fake
    def _(x, weight, bias, amax_history, amax_filled, scale, step, seed, finite_flags, inexact_flags, layer,
          recipe, need_dx, need_dw, need_db, training):
        return _make(forward_specs(x, weight, amax_history, amax_filled, scale, recipe, need_dx, need_dw))

    @torch.library.custom_op("nibble::linear_backward", mutates_args=())
    def linear_backward(dy: Tensor, s0: Tensor, s1: Tensor, s2: Tensor, s3: Tensor, s4: Tensor, s5: Tensor,
                        step_at: Tensor, host: Tensor, amax_history: Tensor, amax_filled: Tensor, scale: Tensor,
                        finite_flags: Tensor, inexact_flags: Tensor, layer: int, recipe: str, in_features: int,
                        need_dx: bool, need_dw: bool, need_db: bool, x_dtype: torch.dtype, w_dtype: torch.dtype,
                        b_dtype: torch.dtype) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor,
                                                       Tensor]:
        return backward_impl(dy, (s0, s1, s2, s3, s4, s5), step_at, host, amax_history, amax_filled, scale,
                             finite_flags, inexact_flags, layer, recipe, in_features, need_dx, need_dw, need_db,
                             x_dtype, w_dtype, b_dtype)

    @linear_backward.register_fake
    def _(dy, s0, s1, s2, s3, s4, s5, step_at, host, amax_history, amax_filled, scale, finite_flags, inexact_flags,
          layer, recipe, in_features, need_dx, need_dw, need_db, x_dtype, w_dtype, b_dtype):
        return _make(backward_output_specs(dy, amax_history, amax_filled, scale, recipe, in_features, need_dx, need_dw,
                                         need_db, x_dtype, w_dtype, b_dtype))

    def setup_context(ctx, inputs, output):
        x, weight, bias, hist, filled, scale, step, seed, finite, inexact, layer, recipe, need_dx, need_dw, \
            need_db, training = inputs
        ctx.save_for_backward(*output[1:9])
        # Read and written again by the backward (dY's amax, the deferred checks' flags), after the forward's
        # new state was copied in: kept as the layer's tensors, not saved (saving would pin their version).
        ctx.state = (hist, filled, scale, finite, inexact)
        ctx.config = (layer, recipe, x.shape[1], need_dx, need_dw, need_db, x.dtype, weight.dtype,
                      weight.dtype if bias is None else bias.dtype)

    def backward(ctx, dy, *unused):
        layer, recipe, i, need_dx, need_dw, need_db, x_dtype, w_dtype, b_dtype = ctx.config
        if not (need_dx or need_dw or need_db):
            return (None,) * 16
        out = torch.ops.nibble.linear_backward(dy.contiguous(), *ctx.saved_tensors, *ctx.state, layer, recipe, i,
                                               need_dx, need_dw, need_db, x_dtype, w_dtype, b_dtype)
        write_state(recipe, ctx.state, out[3:])
        return (out[0] if need_dx else None, out[1] if need_dw else None, out[2] if need_db else None) + (None,) * 13

    linear_forward.register_autograd(backward, setup_context=setup_context)
    REGISTERED = True


def backward_output_specs(dy, amax_history, amax_filled, scale, recipe, in_features, need_dx, need_dw, need_db,
                        x_dtype, w_dtype, b_dtype):
    """(shape, dtype, device) of every output of linear_backward."""
    return (backward_specs(dy, in_features, need_dx, need_dw, need_db, x_dtype, w_dtype, b_dtype)
            + _state_like(recipe, amax_history, amax_filled, scale, dy.device) + _flag_specs(dy.device))


def _make(specs):
    return tuple(torch.empty(s, dtype=d, device=v) for s, d, v in specs)


if hasattr(torch.library, "custom_op") and hasattr(torch.library, "register_autograd"):
    _register()
