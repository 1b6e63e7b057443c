"""Quartet with forward_quantizer="absmax" (upstream's ablation) in nibble.torch.Linear, on every backend.

The definition is the CPU reference (nibble._C.quantize(..., "quartet", "x", forward_quantizer="absmax")): codes
E2M1 of 0.75 x on the 2^k grid, k = floor(log2 amax) - 2, values 3/4 of the rotated input (prescale 0.75),
never clipped, every mask bit 1. The layer multiplies its forward GEMM by 16/9, and since the backward
requantizes those 3/4-scaled Wq / Xq, its dgrad and wgrad GEMMs by 16/9 x 4/3 = 64/27.
"""
import numpy as np
import pytest
import torch

import nibble.torch as nt
from nibble import _ext
from nibble.backends import emulate, quartet
from conftest import forward_backward, randn
from fake_cuda_ext import standin

T, I, O = 128, 256, 96
ABSMAX = dict(forward_quantizer="absmax")


def ref_q(ext, t, role="x", **kw):
    d = ext.quantize(t.detach().cpu().float().contiguous().numpy(), "quartet", role, **kw)
    return torch.from_numpy(np.array(d["values"])), (None if d["mask"] is None else np.array(d["mask"])), d


def rel(a, b):
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    return float((a - b).norm() / b.norm())


def gain(a, b):
    """The least-squares factor of a on b: 1 when a is an unbiased estimate of b, 0.75 or 0.5625 when a 3/4
    prescale is left in once or twice."""
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    return float((a * b).sum() / (b * b).sum())


def composition(ext, x, w, gy, seed, step, rotate=True):
    """The layer's three GEMMs from reference quantizations, in the reference layer's float32 order: y without
    bias, dX, dW."""
    xq, mx, dx_ = ref_q(ext, x, rotate=rotate, **ABSMAX)
    wq, mw, _ = ref_q(ext, w, rotate=rotate, **ABSMAX)
    assert dx_["prescale"] == 0.75 and mx.all() and mw.all()
    sb = nt.quartet_backward_seed(seed, step)

    def epilogue(g, mask):
        g = g * (1.0 / 0.75)
        if not rotate:
            return g * ext.quartet_gemm_rescale * torch.from_numpy(mask.astype(np.float32))
        return torch.from_numpy(np.array(ext.quartet_epilogue(g.numpy(), mask.astype(np.uint8), 32)))

    bq = dict(seed=sb, rotate=rotate)
    dx = epilogue(ref_q(ext, gy, "dy", **bq)[0] @ ref_q(ext, wq.t(), "dy", **bq)[0].t(), mx)
    dw = epilogue(ref_q(ext, gy.t(), "dy", **bq)[0] @ ref_q(ext, xq.t(), "dy", **bq)[0].t(), mw)
    return (xq @ wq.t()) * emulate.QUARTET_RESCALE, dx, dw


@pytest.mark.parametrize("rotate", [True, False])
def test_reference_layer_is_the_reference_composition(rotate, rng, ext):
    m = nt.Linear(I, O, recipe="quartet", backend="reference", seed=21, rotate=rotate, **ABSMAX)
    x, gy = randn(rng, T, I), randn(rng, T, O)
    y, dx, dw, _ = forward_backward(m, x, gy)
    y_c, dx_c, dw_c = composition(ext, x, m.weight, gy, 21, 0, rotate)
    assert torch.equal(y, y_c + m.bias.detach())
    assert torch.equal(dx, dx_c) and torch.equal(dw, dw_c)
    assert "absmax, prescale 0.75" in m.last_path, m.last_path


@pytest.mark.parametrize("backend", ["reference", "emulated"])
def test_layer_gemms_are_unbiased_estimates(backend, rng):
    # The 16/9 and 64/27 undo the prescale: each result scales like the exact product (a missing factor
    # would show as 0.75 or 0.5625).
    m = nt.Linear(I, O, recipe="quartet", backend=backend, seed=5, **ABSMAX)
    x, gy = randn(rng, T, I), randn(rng, T, O)
    y, dx, dw, _ = forward_backward(m, x, gy)
    w = m.weight.detach()
    for name, a, b in (("y", y - m.bias.detach(), x @ w.t()), ("dx", dx, gy @ w), ("dw", dw, gy.t() @ x)):
        # Gains measured 0.96-0.99 over seeds; relative errors 0.15-0.4 (4-bit operands, heavy-tailed inputs).
        assert abs(gain(a, b) - 1) < 0.12 and rel(a, b) < 0.6, (name, gain(a, b), rel(a, b))


def test_emulated_forward_quantizer_equals_reference(rng, ext):
    x = randn(rng, 64, I)
    x[0, :32] = 0.0  # an all-zero group
    x[1, 40] = float("nan")  # a NaN group: NaN values (E8M0 0xFF), still trusted
    x[2, :32] = torch.tensor([6.0 * 2.0 ** k for k in range(-16, 16)])  # exact powers of two and E2M1 ties
    want, mask, _ = ref_q(ext, x, rotate=False, **ABSMAX)
    got, got_mask = emulate.quest_forward(x, 32, False, "absmax")
    assert bool(((got == want) | (got.isnan() & want.isnan())).all()) and bool(got_mask.all()) and mask.all()
    assert bool(got[1, 32:64].isnan().all()) and bool((got[0, :32] == 0).all())
    # With the Hadamard (a matmul in the emulation) rare rounding flips remain.
    x = randn(rng, 64, I)
    want, _, _ = ref_q(ext, x, **ABSMAX)
    got, got_mask = emulate.quest_forward(x, 32, True, "absmax")
    assert float((got != want).float().mean()) < 2e-3 and bool(got_mask.all())


def test_emulated_layer_close_to_reference_layer(rng):
    x, gy = randn(rng, T, I), randn(rng, T, O)
    out = {}
    for rotate in (False, True):
        for be in ("reference", "emulated"):
            m = nt.Linear(I, O, recipe="quartet", backend=be, seed=8, rotate=rotate, **ABSMAX)
            with torch.no_grad():
                m.weight.copy_(torch.linspace(-1, 1, I * O).reshape(O, I).sin())
                m.bias.copy_(torch.linspace(-1, 1, O))
            out[rotate, be] = forward_backward(m, x, gy)
    # No rotation: no random signs, so the backward is deterministic too; only float orders differ.
    for a, b in zip(out[False, "reference"], out[False, "emulated"]):
        assert rel(a, b) < 1e-5
    assert rel(out[True, "reference"][0], out[True, "emulated"][0]) < 1e-2


# ------------------------------------------------------------------------------ CUDA glue (CPU stand-in)


def test_cuda_orchestration_against_reference_with_cpu_standin(rng, ext):
    fake = standin(ext)
    seed, step = 99, 2
    x, w, gy = randn(rng, T, I), randn(rng, O, I), randn(rng, T, O)
    opts = {**nt._DEFAULTS, **ABSMAX}
    y, xp, wp, path = quartet.forward(fake, x, w, opts, 0)
    dx, dw, _ = quartet.backward(fake, gy, xp, wp, opts, nt.quartet_backward_seed(seed, step), torch.float32,
                                 torch.float32, 0)
    y_c, dx_c, dw_c = composition(ext, x, w, gy, seed, step)
    assert rel(y, y_c) < 1e-6 and rel(dx, dx_c) < 1e-5 and rel(dw, dw_c) < 1e-5, (rel(y, y_c), rel(dx, dx_c))
    alphas = {g["pass_"]: g["alpha"] for g in fake.gemms}
    assert alphas["fprop"] == pytest.approx(16 / 9, rel=1e-7)
    assert alphas["dgrad"] == alphas["wgrad"] == pytest.approx(64 / 27, rel=1e-7)
    assert "fake fused forward" in path


def test_cuda_autograd_function_with_cpu_standin(rng, ext, monkeypatch):
    monkeypatch.setattr(_ext, "_loaded", standin(ext))
    holder = nt.Linear(I, O, recipe="quartet", backend="reference", seed=31, **ABSMAX)
    ref = nt.Linear(I, O, recipe="quartet", backend="reference", seed=31, **ABSMAX)
    ref.load_state_dict(holder.state_dict())
    x, gy = randn(rng, T, I).requires_grad_(True), randn(rng, T, O)
    y = quartet.QuartetCudaFunction.apply(x, holder.weight, holder.bias, holder)
    y.backward(gy)
    y_r, dx_r, dw_r, _ = forward_backward(ref, x.detach(), gy)
    for name, a, b in (("y", y, y_r), ("dx", x.grad, dx_r), ("dw", holder.weight.grad, dw_r)):
        assert rel(a, b) < 1e-5, (name, rel(a, b))


# ---------------------------------------------------------------------------------------------- GPU


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gpu_absmax_layer_matches_reference(dtype, rng, cuda_ext):
    cu = nt.Linear(512, 384, recipe="quartet", backend="cuda", seed=5, device="cuda", dtype=dtype, **ABSMAX)
    ref = nt.Linear(512, 384, recipe="quartet", backend="reference", seed=5, **ABSMAX)
    ref.load_state_dict({k: v.detach().float().cpu() if v.is_floating_point() else v.cpu()
                         for k, v in cu.state_dict().items()})
    x, gy = randn(rng, 256, 512).to(dtype), randn(rng, 256, 384).to(dtype)
    got = forward_backward(cu, x.cuda(), gy.cuda())
    want = forward_backward(ref, x.float(), gy.float())
    assert "absmax" in cu.last_path and "fprop GEMM emulated-exact (fp8)" in cu.last_path, cu.last_path
    # Bit-equal quantized operands: only the GEMMs' FP32 accumulation (and BF16 roundings) differ.
    bf16_out = dtype == torch.bfloat16 or "BF16 output" in cu.last_path + cu.last_backward_path
    tight = 2.0 ** -5 if bf16_out else 2.0 ** -7
    for name, a, b in zip(("y", "dx", "dw"), got, want):
        assert rel(a, b) < tight, (name, rel(a, b))
