"""Module behaviour: state_dict round trip, convert(), NaN reporting, argument errors, and the torch
emulation (the CUDA path) measured against the CPU reference."""
import re

import numpy as np
import pytest
import torch
from torch import nn

import nibble.torch as nt
from nibble.backends import emulate, emulated
from conftest import randn


def test_state_dict_round_trip_restores_delayed_scaling(rng):
    a = nt.Linear(64, 96, recipe="fp8-delayed", backend="reference", window=4)
    for s in (1.0, 3.0, 0.5):
        a(randn(rng, 32, 64, scale=s)).sum().backward()
    b = nt.Linear(64, 96, recipe="fp8-delayed", backend="reference", window=4)
    b.load_state_dict(a.state_dict())
    for k in ("amax_history", "amax_filled", "step", "seed_buffer"):
        assert torch.equal(getattr(a, k), getattr(b, k)), k
    x = randn(rng, 32, 64, scale=0.1)
    xa, xb = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    ya, yb = a(xa), b(xb)
    assert torch.equal(ya, yb)
    ya.sum().backward()
    yb.sum().backward()
    assert torch.equal(xa.grad, xb.grad)
    # A fresh module (empty history) quantizes this small x differently: the state mattered.
    c = nt.Linear(64, 96, recipe="fp8-delayed", backend="reference", window=4)
    c.load_state_dict({k: v for k, v in a.state_dict().items() if k in ("weight", "bias")}, strict=False)
    assert not torch.equal(c(x), ya)


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(50, 64)
        self.block = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 64))
        self.lm_head = nn.Linear(64, 50, bias=False)

    def forward(self, t):
        return self.lm_head(self.block(self.embed(t)))


@pytest.mark.parametrize("recipe", ["quartet", "fp8-current", "nvfp4"])
def test_convert_small_model(recipe, rng):
    m = Tiny()
    tokens = torch.randint(0, 50, (4, 16), generator=rng)
    before = m(tokens).detach()
    nt.convert(m, recipe)
    assert isinstance(m.block[0], nt.Linear) and isinstance(m.block[2], nt.Linear)
    assert type(m.lm_head) is nn.Linear and isinstance(m.embed, nn.Embedding)
    assert m.block[0].layer_name == "block.0" and m.block[0].recipe == recipe
    out = m(tokens)
    rel = float((out.detach() - before).norm() / before.norm())
    assert 0 < rel < 0.5, rel
    out.logsumexp(-1).sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in m.parameters())


def test_convert_skip_pattern():
    m = nt.convert(Tiny(), "bf16", skip=[r"block\.2"])
    assert isinstance(m.block[0], nt.Linear) and type(m.block[2]) is nn.Linear
    assert isinstance(m.lm_head, nt.Linear)  # custom skip list replaces the default


def test_non_finite_names_step_and_layer(rng):
    m = nt.convert(Tiny(), "mxfp4", check_finite="sync")
    m.train()
    tokens = torch.randint(0, 50, (2, 16), generator=rng)
    m(tokens).sum().backward()
    with torch.no_grad():
        m.block[2].weight[3, 5] = float("inf")
    with pytest.raises(nt.NonFiniteError, match=r"step 1: .*layer 'block\.2'"):
        m(tokens)


@pytest.mark.parametrize("where", ["weight", "input"])
def test_deferred_non_finite_check_raises_later_naming_step_and_layer(rng, where):
    # The default check_finite="deferred" raises nothing inside the pass that meets NaN/inf; the layer's
    # next pass (or check_finite(model), which reads every layer's flag at once) raises, naming the step of
    # the first bad pass, the layer and what was non-finite; once reported, the flag is clear.
    m = nt.convert(Tiny(), "mxfp4")
    assert all(l.options["check_finite"] == "deferred" for l in m.modules() if isinstance(l, nt.Linear))
    m.train()
    tokens = torch.randint(0, 50, (2, 16), generator=rng)
    for _ in range(2):
        m(tokens).sum().backward()
    assert nt.check_finite(m) == 2  # clean steps: nothing raised (lm_head stays nn.Linear)
    layer = m.block[2]
    if where == "weight":
        with torch.no_grad():
            layer.weight[3, 5] = float("inf")
        m(tokens).sum().backward()  # step 2 runs to the end
    else:
        layer(torch.full((32, layer.in_features), float("nan"), requires_grad=True)).sum().backward()
    what = {"weight": "weight, put there by an earlier update", "input": "input, made upstream"}[where]
    pattern = rf"step 2: .*layer 'block\.2'.*{what}.*check_finite='deferred'"
    with pytest.raises(nt.NonFiniteError, match=pattern):
        if where == "weight":
            layer(torch.randn(32, layer.in_features, generator=rng))  # the layer's next pass reports it
        else:
            nt.check_finite(m)
    if where == "weight":  # the inf weight made the loss inf: block.0 saw a NaN gradient in the same step
        with pytest.raises(nt.NonFiniteError, match=r"step 2: .*layer 'block\.0'.*incoming gradient"):
            nt.check_finite(m)
    assert nt.check_finite(m) == 2  # each flag is reported once


def test_check_finite_option_values():
    for value, mode in (("deferred", "deferred"), (True, "sync"), ("sync", "sync"), (False, "off"), ("off", "off")):
        assert nt.Linear(64, 64, recipe="fp8-current", check_finite=value).options["check_finite"] == mode
    with pytest.raises(ValueError, match="check_finite 'yes' is unknown; valid: deferred"):
        nt.Linear(64, 64, recipe="fp8-current", check_finite="yes")
    with pytest.raises(ValueError, match="gemm_check 'later' is unknown"):
        nt.Linear(64, 64, recipe="mxfp4", gemm_check="later")


def test_host_step_follows_the_buffer_without_reading_it_each_pass(rng, monkeypatch):
    layer = nt.Linear(64, 64, recipe="fp8-current", seed=7)
    layer.train()
    x = torch.randn(32, 64, generator=rng)
    reads = []
    real = torch.Tensor.__int__
    monkeypatch.setattr(torch.Tensor, "__int__", lambda t: reads.append(1) or real(t))
    assert layer.host_step() == 0 and len(reads) == 1
    for k in range(3):
        layer(x)
    assert layer.host_step() == 3 and int(layer.step) == 3 and len(reads) == 2  # the last read is the test's own
    with torch.no_grad():
        layer.step += 4  # a write from outside the layer: read again once
    assert layer.host_step() == 7 and layer.host_step() == 7 and len(reads) == 3
    layer.load_state_dict(dict(layer.state_dict(), seed_buffer=torch.tensor(99)))
    assert layer.seed == 99


def test_argument_errors():
    with pytest.raises(ValueError, match="recipe 'fp5' is unknown"):
        nt.Linear(64, 64, recipe="fp5")
    with pytest.raises(ValueError, match="in_features 40 is not a multiple of 32"):
        nt.Linear(40, 64, recipe="quartet")
    with pytest.raises(ValueError, match="unknown recipe options"):
        nt.Linear(64, 64, recipe="quartet", rounding="x")
    layer = nt.Linear(64, 64, recipe="quartet")
    with pytest.raises(ValueError, match="tokens is not a multiple of 32"):
        layer(torch.randn(10, 64))


@pytest.mark.parametrize("recipe,role", [("bf16", "x"), ("fp8-current", "x"), ("fp8-current", "dy"),
                                         ("fp8-block", "x"), ("fp8-block", "w"), ("mxfp8", "x"), ("mxfp4", "x"),
                                         ("nvfp4", "x"), ("nvfp4", "w")])
def test_emulation_matches_reference(recipe, role, rng, ext):
    x = randn(rng, 128, 256)
    ref = torch.from_numpy(np.array(ext.quantize(x.numpy(), recipe, role, rounding="nearest")["values"]))
    opts = dict(nt._DEFAULTS)
    emu, _, _ = emulated.EmulatedBackend(opts).plain(x, recipe, role, 0)
    # Elementwise rounding with the same scales: identical to the bit.
    assert torch.equal(emu, ref), float((emu != ref).float().mean())


def test_emulation_quartet_close_to_reference(rng, ext):
    x = randn(rng, 128, 256)
    d = ext.quantize(x.numpy(), "quartet", "x")
    v, m = emulate.quest_forward(x)
    ref = torch.from_numpy(np.array(d["values"]))
    # The Hadamard runs as a matmul (another summation order): rare rounding flips only.
    assert float((v != ref).float().mean()) < 2e-3
    assert float((m != torch.from_numpy(np.array(d["mask"])).bool()).float().mean()) < 2e-3
    h = emulate.hadamard_matrix(32)
    np.testing.assert_allclose(np.array(ext.hadamard(x.numpy(), 32)), emulate.rotate(x, h).numpy(),
                               rtol=1e-5, atol=1e-5 * float(x.abs().max()))


@pytest.mark.parametrize("recipe", nt.RECIPES)
def test_emulated_layer_close_to_reference_layer(recipe, rng):
    x, gy = randn(rng, 128, 256), randn(rng, 128, 128)
    out = {}
    for be in ("reference", "emulated"):
        layer = nt.Linear(256, 128, recipe=recipe, backend=be, seed=11)
        with torch.no_grad():
            layer.weight.copy_(torch.linspace(-1, 1, 256 * 128).reshape(128, 256).sin())
        xx = x.clone().requires_grad_(True)
        layer(xx).backward(gy)
        out[be] = (xx.grad, layer.weight.grad)
    for a, b in zip(out["reference"], out["emulated"]):
        rel = float((a - b).norm() / b.norm())
        # Random bits differ (Philox vs torch) where the recipe rounds stochastically or rotates randomly:
        # two independent 4-bit backward estimates then differ by ~sqrt(2) x their own error (~0.2 each).
        assert rel < (0.6 if recipe in ("quartet", "nvfp4") else 1e-3), (recipe, rel)


def test_recipe_names_come_from_the_extension(ext):
    # One list of recipe names, the C++ quant layer's (recipe_list.hpp): nibble.torch takes it from nibble._C,
    # and the torch emulation (the list used when nibble._C is not built) implements every one of them.
    assert isinstance(ext.recipe_names, tuple) and len(ext.recipe_names) == len(set(ext.recipe_names)) > 0
    assert nt.RECIPES == ext.recipe_names
    assert ext.recipes == ", ".join(ext.recipe_names)
    assert emulated.RECIPES == ext.recipe_names
    with pytest.raises(ValueError, match="valid recipes: " + ", ".join(ext.recipe_names)):
        nt.Linear(64, 64, recipe="fp6")
