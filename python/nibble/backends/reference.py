"""nibble's CPU reference (nibble._C) as a backend of nibble.torch; nibble.backends.emulated is the same
interface as torch ops. (The CUDA paths through nibble's own kernels, nibble.backends.quartet, fp8, mxfp4
and decoded, have their own autograd functions, since their operands stay quantized on the device.)

Both expose the same small interface, returning tensors on the input's device:
  plain(x, recipe, role, seed, scale, rht)        -> (values in the GEMM's domain (rotated where rht), amax, path);
                                                      scale: fp8-delayed's s_enc, which the layer derives
  quartet_forward(x)                               -> (values in the rotated domain (absmax: 3/4 of it, prescale
                                                      0.75), bool trust mask)
  quartet_backward(x, seed, stochastic)            -> rotated, 3/4-prescaled values
  quartet_epilogue(g, mask)                        -> inverse rotation of (g * 16/9 masked)
`path` names what produced the numbers ("cpu-reference" or "torch-emulated").
"""
import torch

FP8_FMAX = {"e4m3": 448.0, "e5m2": 57344.0}


def amax_for_scale(fmax, scale):
    """An amax a with per_tensor_encode_scale(fmax, a) == scale in float32 (quant::per_tensor_encode_scale:
    fl(fmax / a), FLT_MAX where that overflows): a one-slot history that makes the reference quantize with
    exactly `scale`. Any scale the update rule produces, fl(fmax' / m), has one within a few ulps of fmax /
    scale (1 and FLT_MAX included)."""
    import numpy as np  # only the reference backend needs NumPy (the CUDA path does not)
    f, s = np.float32(fmax), np.float32(scale)
    if not (np.isfinite(s) and s > 0):
        raise ValueError(f"fp8-delayed scale {scale!r} must be finite and > 0 (the layer's `scale` buffer)")
    a0 = f / s
    cands = [a0]
    up = down = a0
    for _ in range(4):
        up, down = np.nextafter(up, np.float32(np.inf)), np.nextafter(down, np.float32(0))
        cands += [up, down]
    cands.append(np.float32(np.finfo(np.float32).smallest_subnormal))  # fmax / a overflows: FLT_MAX
    with np.errstate(over="ignore", divide="ignore"):
        for a in cands:
            if a > 0 and np.isfinite(a):
                q = f / a
                if (q if np.isfinite(q) else np.finfo(np.float32).max) == s:
                    return a
    raise ValueError(f"fp8-delayed scale {float(scale)!r} is not fmax / amax for any float32 amax (fmax {fmax}); "
                     "it was not made by the layer's update rule: reset the `scale` buffer (1) or reload a checkpoint")


def _np(t):
    return t.detach().to("cpu", torch.float32).contiguous().numpy()


def _from_np(a, like):
    import numpy as np  # only the reference backend needs NumPy (the CUDA path does not)
    return torch.from_numpy(np.array(a, copy=True)).to(like.device)


class ReferenceBackend:
    """nibble's CPU reference through nibble._C (host copies for non-CPU tensors)."""
    path = "cpu-reference"

    def __init__(self, ext, options):
        self.ext, self.o = ext, options

    def _back(self, a, like):
        return _from_np(a, like)

    def plain(self, x, recipe, role, seed, scale=None, rht=False):
        """scale: fp8-delayed's s_enc for this pass (the layer keeps the state, Transformer Engine's rules, and
        derives it); the reference quantizes with exactly that scale through a one-slot history."""
        kw = dict(margin=self.o["margin"])
        if recipe == "fp8-delayed":
            if scale is None:
                raise ValueError("fp8-delayed needs the layer's delayed scale (scale=...)")
            import numpy as np
            fmax = FP8_FMAX["e5m2" if role == "dy" else "e4m3"]
            kw = dict(amax_history=np.array([amax_for_scale(fmax, float(scale))], dtype=np.float32), window=1,
                      margin=0)
        d = self.ext.quantize(_np(x), recipe, role, seed=seed, rounding="by-recipe",
                              mx_scale_rule=self.o["mx_scale_rule"], nvfp4_rht=rht, **kw)
        path = d["produced_by"]
        if recipe == "fp8-delayed":
            path = path.replace(" (history)", " (s_enc: the layer's delayed scale)")
        return self._back(d["values"], x), float(d["amax"]), path

    def quartet_forward(self, x):
        # absmax's values are 3/4 of the rotated domain (prescale 0.75): the layer multiplies its GEMMs back.
        d = self.ext.quantize(_np(x), "quartet", "x", hadamard_size=self.o["hadamard_size"],
                              rotate=self.o["rotate"], forward_quantizer=self.o["forward_quantizer"])
        return self._back(d["values"], x), self._back(d["mask"], x).bool(), d["produced_by"]

    def quartet_backward(self, x, seed, stochastic):
        d = self.ext.quantize(_np(x), "quartet", "dy", seed=seed, hadamard_size=self.o["hadamard_size"],
                              rotate=self.o["rotate"], rounding="stochastic" if stochastic else "nearest")
        return self._back(d["values"], x), d["produced_by"]

    def quartet_epilogue(self, g, mask):
        if not self.o["rotate"]:
            return g * self.ext.quartet_gemm_rescale * mask
        out = self.ext.quartet_epilogue(_np(g), mask.to("cpu", torch.uint8).contiguous().numpy(),
                                        self.o["hadamard_size"])
        return self._back(out, g)
