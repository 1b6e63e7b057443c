"""The torch emulation of every recipe as a backend of nibble.torch: the interface of
nibble.backends.reference as torch ops, so CUDA tensors stay on the GPU (close to, not bit-equal to, the
reference). Needs neither nibble._C nor NumPy."""
import torch

from . import emulate

# The recipes this emulation implements (nibble.torch's list when nibble._C is not built; otherwise the
# extension's, which a test checks against this one).
RECIPES = ("bf16", "fp8-delayed", "fp8-current", "fp8-block", "mxfp8", "nvfp4", "mxfp4", "quartet")
PER_TENSOR = ("bf16", "fp8-delayed", "fp8-current")
FP8_FMAX = {"x": 448.0, "w": 448.0, "dy": 57344.0}  # hybrid: E5M2 for gradients
# fp8-delayed's first step (empty history), as quant::DelayedFirstStep: option value -> the text in every
# backend's path.
DELAYED_FIRST_STEP = {"te": "first step: scale 1 (Transformer Engine)", "own_amax": "first step: own amax"}


class EmulatedBackend:
    """The same rules as torch ops, so CUDA tensors stay on the GPU (close to, not bit-equal to, the reference)."""
    path = "torch-emulated"

    def __init__(self, options):
        self.o = options

    def _gen(self, seed, device):
        g = torch.Generator(device=device)
        g.manual_seed(seed & ((1 << 63) - 1))
        return g

    def plain(self, x, recipe, role, seed, scale=None, rht=False):
        """scale: fp8-delayed's s_enc for this pass (a float32 tensor the layer derives from its state). Returns
        (values, amax, path); amax is x's amax as a tensor for fp8-delayed (what its history records), else 0."""
        x = x.float()
        amax = 0.0
        dy = role == "dy"
        if recipe == "bf16":
            v = x.to(torch.bfloat16).float()
        elif recipe in ("fp8-delayed", "fp8-current"):
            fmt = "e5m2" if dy else "e4m3"
            own = x.abs().amax()  # NaN propagates, as the reference's amax
            if recipe == "fp8-delayed":
                if scale is None:
                    raise ValueError("fp8-delayed needs the layer's delayed scale (scale=...): the torch emulation keeps "
                                     "no history of its own")
                s, amax = scale, own
            else:
                s = emulate.per_tensor_encode_scale(FP8_FMAX[role], own)
            v = emulate.quantize_fp8_per_tensor(x, fmt, s.to(x.device))
        elif recipe == "fp8-block":
            v = emulate.quantize_fp8_block(x, 128 if role == "w" else 1)
        elif recipe in ("mxfp8", "mxfp4"):
            v = emulate.quantize_mx(x, "e4m3" if recipe == "mxfp8" else "e2m1", self.o["mx_scale_rule"])
        elif recipe == "nvfp4":
            v = emulate.quantize_nvfp4(x, 16 if role == "w" else 1, stochastic=dy,
                                       generator=self._gen(seed, x.device) if dy else None, rht=rht)
        else:
            raise ValueError(f"recipe {recipe!r} has no plain quantizer; valid: bf16, fp8-delayed, fp8-current, "
                             "fp8-block, mxfp8, mxfp4, nvfp4")
        return v, amax, f"torch-emulated {recipe} role {role}"

    def quartet_forward(self, x):
        v, m = emulate.quest_forward(x.float(), self.o["hadamard_size"], self.o["rotate"],
                                     self.o["forward_quantizer"])
        absmax = self.o["forward_quantizer"] == "absmax"
        return v, m, "torch-emulated quartet forward" + (" (absmax, prescale 0.75)" if absmax else "")

    def _signs(self, seed, device):
        return emulate.random_signs(self.o["hadamard_size"], self._gen(seed, "cpu"), device)

    def quartet_backward(self, x, seed, stochastic):
        v = emulate.quartet_backward(x.float(), self._signs(seed, x.device), self.o["hadamard_size"],
                                     self.o["rotate"], stochastic, self._gen(seed + 1, x.device))
        return v, "torch-emulated quartet backward"

    def quartet_epilogue(self, g, mask):
        out = (g * emulate.QUARTET_RESCALE) * mask
        if self.o["rotate"]:
            out = emulate.rotate(out, emulate.hadamard_matrix(self.o["hadamard_size"], None, g.device), inverse=True)
        return out
