"""nibble's CPU reference (nibble._C) as a backend of nibble.torch; nibble.backends.emulated is the same
interface as torch ops. (The CUDA paths through nibble's own kernels, nibble.backends.quartet, fp8, mxfp4
and decoded, have their own autograd functions, since their operands stay quantized on the device.)

Both expose the same small interface, returning tensors on the input's device:
  plain(x, recipe, role, seed, history, rht)      -> values in the GEMM's domain (rotated where rht)
  quartet_forward(x)                               -> (values in the rotated domain, bool trust mask)
  quartet_backward(x, seed, stochastic)            -> rotated, 3/4-prescaled values
  quartet_epilogue(g, mask)                        -> inverse rotation of (g * 16/9 masked)
`path` names what produced the numbers ("cpu-reference" or "torch-emulated").
"""
import torch


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

    def plain(self, x, recipe, role, seed, history=None, rht=False):
        d = self.ext.quantize(_np(x), recipe, role, seed=seed, rounding="by-recipe",
                              mx_scale_rule=self.o["mx_scale_rule"], nvfp4_rht=rht, margin=self.o["margin"],
                              amax_history=None if history is None else _np(history.reshape(1, -1))[0],
                              window=self.o["window"])
        return self._back(d["values"], x), float(d["amax"]), d["produced_by"]

    def quartet_forward(self, x):
        d = self.ext.quantize(_np(x), "quartet", "x", hadamard_size=self.o["hadamard_size"],
                              rotate=self.o["rotate"], forward_quantizer=self.o["forward_quantizer"])
        # absmax stores 3/4 of the values (prescale 0.75); the layer's GEMMs want the rotated domain.
        v = d["values"] if d["prescale"] == 1.0 else d["values"] / d["prescale"]
        return self._back(v, x), self._back(d["mask"], x).bool(), d["produced_by"]

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
