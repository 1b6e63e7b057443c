"""fp8-delayed in nibble.torch.Linear on CPU tensors: Transformer Engine's delayed scaling (docs/recipes.md).

The definition is the CPU reference's quant::AmaxHistory, reached through nibble._C.quantize: given every amax a
role has recorded so far (oldest first) and the window, it rebuilds the ring step by step and quantizes with
the scale that sequence leaves (scale 1 before any update, or the own amax with first_step="own_amax"; a zero or
non-finite history max keeps the previous scale). The layer keeps only the window and its `scale` buffer, so
each step's operands here are checked against the reference given the whole sequence, bit for bit.
"""
import numpy as np
import pytest
import torch
from torch import nn

import nibble.torch as nt
from nibble.backends import emulate, reference
from conftest import randn

I, O = 64, 32
TE = "delayed scaling, first step: scale 1 (Transformer Engine)"
OWN = "delayed scaling, first step: own amax"


def quantized(ext, t, role, amaxes, window, margin=0, first_step="te"):
    """The reference's fp8-delayed values of t after the history `amaxes` (every amax recorded so far)."""
    d = ext.quantize(t.detach().float().contiguous().numpy(), "fp8-delayed", role,
                     amax_history=np.array(amaxes, dtype=np.float32), window=window, margin=margin,
                     first_step=first_step)
    return torch.from_numpy(np.array(d["values"])), d


def amax(t):
    return float(t.detach().abs().max())


def layer(backend="reference", **opts):
    m = nt.Linear(I, O, recipe="fp8-delayed", backend=backend, seed=3, **opts)
    return m


def same(a, b):
    return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())


def test_first_step_scale_1_then_the_history_bit_for_bit(ext, rng):
    window, margin = 3, 1
    m = layer(window=window, margin=margin)
    hist = {"x": [], "w": [], "dy": []}
    for step, s in enumerate((1.0, 8.0, 0.5, 0.25, 2.0, 4.0)):  # more steps than the window
        x, gy = randn(rng, 16, I, scale=s), randn(rng, 16, O, scale=1.0 / s)
        xg = x.clone().requires_grad_(True)
        m.weight.grad = None
        y = m(xg)
        y.backward(gy)
        xq, dx_ = quantized(ext, x, "x", hist["x"], window, margin)
        wq, _ = quantized(ext, m.weight, "w", hist["w"], window, margin)
        dyq, _ = quantized(ext, gy, "dy", hist["dy"], window, margin)
        assert torch.equal(y, xq @ wq.t() + m.bias.detach()), step
        assert torch.equal(xg.grad, dyq @ wq) and torch.equal(m.weight.grad, dyq.t() @ xq), step
        if step == 0:
            # Scale 1: the values are the tensors' own E4M3 / E5M2 roundings.
            assert torch.equal(xq, emulate.round_minifloat(x, "e4m3"))
            assert torch.equal(dyq, emulate.round_minifloat(gy, "e5m2"))
            assert torch.equal(m.scale, torch.ones(3))
        # The layer's scale is the one this step quantized with (the reference's s_dec is its decode).
        assert float(1.0 / m.scale[0]) == dx_["tensor_scale"], step
        for role, t in (("x", x), ("w", m.weight), ("dy", gy)):
            hist[role].append(amax(t))
        assert torch.equal(m.amax_history[0], torch.tensor(([0.0] * window + hist["x"])[-window:]))
        assert TE in m.last_path and TE in m.last_backward_path, m.last_path
    assert torch.equal(m.amax_filled, torch.full((3,), window))


def test_zero_and_non_finite_history_keep_the_previous_scale(ext, rng):
    window = 2
    m = layer(window=window, check_finite="off")
    zeros, bad = torch.zeros(16, I), randn(rng, 16, I)
    bad[2, 7] = float("nan")
    small = [randn(rng, 16, I, scale=1e-3) for _ in range(3)]
    steps = [randn(rng, 16, I), zeros, zeros, zeros, bad] + small
    hx, hw, scales = [], [], []
    for step, x in enumerate(steps):
        with torch.no_grad():
            y = m(x)
        xq, _ = quantized(ext, x, "x", hx, window)
        wq, _ = quantized(ext, m.weight, "w", hw, window)
        assert same(y, xq @ wq.t() + m.bias.detach()), step
        hx.append(amax(x))
        hw.append(amax(m.weight))
        scales.append(float(m.scale[0]))
    held = scales[1]  # from the history [a0]
    assert held == float(emulate.per_tensor_encode_scale(448.0, torch.tensor(hx[0]))) and scales[0] == 1.0
    # Steps 3 and 4 see an all-zero window, steps 5 and 6 the NaN: the scale stays; step 7 is past them.
    assert scales[1:7] == [held] * 6, scales
    assert scales[7] > 100 * held
    assert np.isnan(hx[4]) and not bool(torch.isnan(m.amax_history[0]).any())  # it has left the window


def test_own_amax_first_step(ext, rng):
    m = layer(window=4, delayed_first_step="own_amax")
    hx = []
    for step in range(3):
        x = randn(rng, 16, I, scale=10.0 ** step)
        with torch.no_grad():
            y = m(x)
        xq, _ = quantized(ext, x, "x", hx, 4, first_step="own_amax")
        wq, _ = quantized(ext, m.weight, "w", [amax(m.weight)] * step, 4, first_step="own_amax")
        assert torch.equal(y, xq @ wq.t() + m.bias.detach()), step
        if step == 0:
            # The own amax: what current scaling gives; the layer's scale is not set by it.
            cur, _ = quantized(ext, x, "x", [amax(x)], 4)
            assert torch.equal(xq, cur) and torch.equal(m.scale, torch.ones(3))
            te = layer(window=4)
            te.load_state_dict({k: v for k, v in m.state_dict().items() if k in ("weight", "bias")}, strict=False)
            with torch.no_grad():
                assert not torch.equal(te(x), y)  # scale 1 quantizes this x differently
        hx.append(amax(x))
        assert OWN in m.last_path, m.last_path


@pytest.mark.parametrize("first_step", ["te", "own_amax"])
def test_emulated_equals_reference_layer(first_step, rng):
    # FP8 per-tensor rounding is bit-equal in the emulation, and the scale state machine is shared: same
    # scales, histories and (float32 GEMMs in the same order) results, through zero and NaN steps.
    layers = {be: layer(be, window=3, margin=2, check_finite="off", delayed_first_step=first_step)
              for be in ("reference", "emulated")}
    layers["emulated"].load_state_dict(layers["reference"].state_dict())
    bad = randn(rng, 16, I)
    bad[0, 0] = float("inf")
    for step, x in enumerate([randn(rng, 16, I), torch.zeros(16, I), randn(rng, 16, I, scale=3.0), bad,
                              randn(rng, 16, I), randn(rng, 16, I, scale=0.01), randn(rng, 16, I)]):
        gy = randn(rng, 16, O)
        out = {}
        for be, m in layers.items():
            xg = x.clone().requires_grad_(True)
            m.weight.grad = None
            y = m(xg)
            y.backward(gy)
            out[be] = (y.detach(), xg.grad, m.weight.grad)
        for a, b in zip(out["reference"], out["emulated"]):
            assert same(a, b), step
        for k in ("amax_history", "amax_filled", "scale"):
            assert same(getattr(layers["reference"], k).float(), getattr(layers["emulated"], k).float()), (step, k)
    label = TE if first_step == "te" else OWN
    assert layers["emulated"].last_path.startswith("torch-emulated fp8-delayed") and label in layers["emulated"].last_path
    assert layers["reference"].last_path.startswith("cpu-reference fp8 per-tensor delayed scaling")


def test_eval_uses_the_current_scale_and_records_nothing(ext, rng):
    # Evaluation quantizes with the scale the history gives now (what the next training step would use) and
    # adds nothing: afterwards the layer trains on exactly as a twin that never evaluated.
    m = layer(window=4)
    hx, hw = [], []
    for _ in range(2):
        x = randn(rng, 16, I, scale=float(torch.rand((), generator=rng)) * 4)
        with torch.no_grad():
            m(x)
        hx.append(amax(x))
        hw.append(amax(m.weight))
    twin = layer(window=4)
    twin.load_state_dict(m.state_dict())
    before = {k: v.clone() for k, v in m.state_dict().items()}
    m.eval()
    x = randn(rng, 16, I, scale=100.0)
    with torch.no_grad():
        y = m(x)
    xq, _ = quantized(ext, x, "x", hx, 4)
    wq, _ = quantized(ext, m.weight, "w", hw, 4)
    assert torch.equal(y, xq @ wq.t() + m.bias.detach())
    for k in ("amax_history", "amax_filled", "step"):
        assert torch.equal(getattr(m, k), before[k]), k
    m.train()
    x = randn(rng, 16, I)
    with torch.no_grad():
        assert torch.equal(m(x), twin(x))
    for k, v in m.state_dict().items():
        assert torch.equal(v, twin.state_dict()[k]), k


def test_state_dict_without_scale_loads_and_derives_it(ext, rng):
    # A checkpoint saved before the `scale` buffer existed: loading derives it from the history (fmax 2^-margin /
    # max per role, 1 where the history is all zero), and the layer continues as one that had it all along.
    a = nn.Sequential(layer(window=3, margin=1))
    for _ in range(2):
        x, gy = randn(rng, 16, I), randn(rng, 16, O)
        xg = x.clone().requires_grad_(True)
        a(xg).backward(gy)
    sd = a.state_dict()
    old = {k: v for k, v in sd.items() if k != "0.scale"}
    with torch.no_grad():
        old["0.amax_history"] = old["0.amax_history"].clone()
        old["0.amax_history"][2].zero_()  # dY: an all-zero history
    b = nn.Sequential(layer(window=3, margin=1))
    with torch.no_grad():
        b[0].scale.fill_(7.0)
    b.load_state_dict(old)  # strict
    hist = old["0.amax_history"]
    for i, fmax in enumerate((448.0, 448.0, 57344.0)):
        want = 1.0 if i == 2 else float(np.float32(fmax / 2) / np.float32(hist[i].max()))
        assert float(b[0].scale[i]) == want, (i, float(b[0].scale[i]), want)
    c = nn.Sequential(layer(window=3, margin=1))
    c.load_state_dict(dict(sd, **{"0.amax_history": old["0.amax_history"]}))
    x = randn(rng, 16, I, scale=2.0)
    with torch.no_grad():
        assert torch.equal(b(x), c(x))


def test_options_are_checked_and_converted():
    with pytest.raises(ValueError, match="delayed_first_step 'first' is unknown; valid: te .*own_amax"):
        layer(delayed_first_step="first")
    model = nt.convert(nn.Sequential(nn.Linear(I, O)), "fp8-delayed", skip=(), delayed_first_step="own_amax")
    assert model[0].options["delayed_first_step"] == "own_amax"
    assert nt.Linear(I, O, recipe="fp8-delayed").options["delayed_first_step"] == "te"


def test_amax_for_scale_reproduces_every_scale(rng):
    fmax = np.float32(448.0)
    amaxes = [np.float32(v) for v in (torch.rand(200, generator=rng).double() * 40 - 20).exp2().tolist()]
    for a in amaxes + [np.float32(1e-44), np.float32(448.0), np.float32(3e38)]:
        with np.errstate(over="ignore"):
            s = fmax / a
        s = s if np.isfinite(s) else np.finfo(np.float32).max
        got = reference.amax_for_scale(448.0, s)
        with np.errstate(over="ignore"):
            q = fmax / got
        assert (q if np.isfinite(q) else np.finfo(np.float32).max) == s, (a, s, got)
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="must be finite and > 0"):
            reference.amax_for_scale(448.0, bad)
