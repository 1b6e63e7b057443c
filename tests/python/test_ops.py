"""nibble.ops (the custom ops torch.compile traces) against the eager autograd functions, on the CPU.

The ops' bodies (forward_impl, backward_impl) run with the CPU stand-in of the kernels (fake_cuda_ext.py) on
CPU tensors, next to the backends' autograd functions on a copy of the same layer: outputs, gradients, saved
tensors, the fp8-delayed state and the deferred checks' flags must match bit for bit, and every output must
have the shape and dtype the fake implementations (forward_specs, backward_output_specs) promise. Torch here may
lack torch.library.custom_op (the registration itself is tested on the GPU machine, test_cuda_compile.py).
"""
import copy

import pytest
import torch

import nibble.torch as nt
from nibble import ops
from nibble.backends import decoded, fp8, mxfp4, quartet
from conftest import randn
from fake_cuda_ext import install_standin

T, I, O = 128, 128, 256  # multiples of every recipe's block (fp8-block: 128 along tokens too)
MODULES = {"quartet": quartet, "mxfp4": mxfp4, "mxfp8": decoded, "nvfp4": decoded, "fp8-current": fp8,
           "fp8-delayed": fp8, "fp8-block": fp8}


@pytest.fixture
def fake(ext, monkeypatch):
    return install_standin(ext, monkeypatch)


def layers(recipe, rng, **opts):
    a = nt.Linear(I, O, recipe=recipe, backend="cuda", seed=11, **opts)
    with torch.no_grad():
        a.weight.copy_(randn(rng, O, I, scale=0.05).bfloat16())
        a.bias.copy_(torch.randn(O, generator=rng).bfloat16())
    a.layer_name = "twin"
    b = copy.deepcopy(a)
    assert b._op_key != a._op_key and ops._layer(b._op_key) is b
    return a, b


def eager_step(layer, x, gy, need_dx):
    """The autograd function's pass, as Linear.forward runs it on a CUDA tensor (then the step advances)."""
    xr = x.clone().requires_grad_(need_dx)
    layer.weight.grad = layer.bias.grad = None
    y = MODULES[layer.recipe].apply(layer, xr)
    y.backward(gy)
    with torch.no_grad():
        layer.step += 1
    return y.detach(), xr.grad, layer.weight.grad, layer.bias.grad


def state_of(layer):
    return (layer.amax_history, layer.amax_filled, layer.scale, layer._finite_flags.on(layer.step.device),
            layer._inexact_flags.on(layer.step.device))


def assert_no_alias(outputs, inputs):
    """torch's rule for custom ops (checked at run time by newer torch): no output is an input or shares its
    memory, and no two outputs do."""
    seen = []
    for k, t in enumerate(outputs):
        for u in [v for v in inputs if v is not None] + seen:
            assert t is not u and not (t.numel() and u.numel() and t.data_ptr() == u.data_ptr()), f"output {k}"
        seen.append(t)


def op_step(layer, x, gy, need_dx):
    """The custom ops' bodies as the registered ops call them: forward, state written back, backward."""
    recipe, w, b = layer.recipe, layer.weight.detach(), layer.bias.detach()
    state = state_of(layer)
    out = ops.forward_impl(x, w, b, *state[:3], layer.step, layer.seed_buffer, *state[3:], layer._op_key, recipe,
                           need_dx, True, True, layer.training)
    want = ops.forward_specs(x, w, *state[:3], recipe, need_dx, True)
    assert_no_alias(out, (x, w, b, *state, layer.step, layer.seed_buffer))
    assert [(tuple(t.shape), t.dtype, t.device) for t in out] == [(tuple(s), d, v) for s, d, v in want]
    with torch.no_grad():
        ops.write_state(recipe, state, out[9:12] + out[13:15])
        layer.step.copy_(out[12])
    back = ops.backward_impl(gy, out[1:7], out[7], out[8], *state, layer._op_key, recipe, I, need_dx, True, True,
                             x.dtype, w.dtype, b.dtype)
    want = ops.backward_output_specs(gy, *state[:3], recipe, I, need_dx, True, True, x.dtype, w.dtype, b.dtype)
    assert_no_alias(back, (gy, *out[1:9], *state))
    assert [(tuple(t.shape), t.dtype, t.device) for t in back] == [(tuple(s), d, v) for s, d, v in want]
    ops.write_state(recipe, state, back[3:])
    return out[0], back[0] if need_dx else None, back[1], back[2]


@pytest.mark.parametrize("need_dx", [True, False])
@pytest.mark.parametrize("recipe", nt.CUDA_RECIPES)
def test_op_bodies_equal_the_autograd_functions(recipe, need_dx, rng, ext, fake):
    a, b = layers(recipe, rng)
    for step in range(2):  # fp8-delayed: the first step's scale 1, then the history's
        x, gy = randn(rng, T, I).bfloat16(), randn(rng, T, O).bfloat16()
        if step == 1:
            x[3, 5] = float("nan")  # the deferred check flags it, with the step, in both paths
        want = eager_step(a, x, gy, need_dx)
        got = op_step(b, x, gy, need_dx)
        for name, g, w in zip(("y", "dx", "dw", "db"), got, want):
            assert (g is None) == (w is None), name
            if w is not None:
                assert g.dtype == w.dtype and torch.equal(torch.nan_to_num(g), torch.nan_to_num(w)), (step, name)
        for name, t, u in zip(("amax_history", "amax_filled", "scale", "finite flags", "inexact flags"),
                              state_of(b), state_of(a)):
            assert torch.equal(torch.nan_to_num(t), torch.nan_to_num(u)), (step, name, t, u)
        assert int(b.step) == int(a.step) == step + 1
        assert b.last_path == a.last_path and b.last_backward_path == a.last_backward_path
    assert b._finite_flags.values.tolist()[1] == 1  # the NaN's step
    if recipe == "fp8-delayed":
        assert not torch.equal(b.scale, torch.ones(3))


@pytest.mark.parametrize("recipe", nt.CUDA_RECIPES)
def test_op_bodies_in_eval_leave_step_and_forward_histories(recipe, rng, ext, fake):
    _, b = layers(recipe, rng)
    b.eval()
    x = randn(rng, T, I).bfloat16()
    state = [t.clone() for t in state_of(b)]
    out = ops.forward_impl(x, b.weight.detach(), b.bias.detach(), *state_of(b)[:3], b.step, b.seed_buffer,
                           *state_of(b)[3:], b._op_key, recipe, False, False, False, False)
    if recipe == "fp8-delayed":  # evaluation passes read the history and add nothing (the update may set the scale)
        assert torch.equal(out[9], state[0]) and torch.equal(out[10], state[1])
    else:
        assert all(t.numel() == 0 for t in out[9:12])
    assert all(t.numel() == 0 for t, s in zip(out[1:7], ops.saved_specs(recipe, T, I, O, False, False)) if s is None)
    assert torch.equal(out[7], b.step) and int(out[12]) == int(b.step) + 1  # the wrapper copies it only in training


def test_fake_specs_under_fake_tensor_mode(ext, fake):
    fake_tensor = pytest.importorskip("torch._subclasses.fake_tensor")
    b = nt.Linear(I, O, recipe="fp8-block", backend="cuda")
    mode = fake_tensor.FakeTensorMode()
    x, w, hist, filled, scale = (mode.from_tensor(t) for t in (torch.empty(T, I, dtype=torch.bfloat16), b.weight.detach(),
                                                               b.amax_history, b.amax_filled, b.scale))
    with mode:
        got = ops._make(ops.forward_specs(x, w, hist, filled, scale, "fp8-block", True, True))
    assert all(isinstance(t, fake_tensor.FakeTensor) for t in got)
    assert got[0].shape == (T, O) and got[0].dtype == torch.bfloat16
    assert got[1].shape == (I, T) and got[3].shape == (I, O)
    assert got[2].numel() == fake.fp8_block_scale_count("1x128", T, I, "colwise")
    assert got[4].numel() == fake.fp8_block_scale_count("128x128", O, I, "colwise")


def test_registration_follows_the_torch_api_and_keys_name_live_layers():
    assert ops.REGISTERED == (hasattr(torch.library, "custom_op") and hasattr(torch.library, "register_autograd"))
    layer = nt.Linear(128, 128, recipe="fp8-current")
    key = layer._op_key
    assert ops._layer(key) is layer
    del layer
    import gc
    gc.collect()
    with pytest.raises(RuntimeError, match="names no live nibble.torch.Linear"):
        ops._layer(key)


def test_family_names_each_cuda_recipe_and_refuses_others():
    assert {ops.family(r) for r in nt.CUDA_RECIPES} == {"fp8", "quartet", "mxfp4", "decoded"}
    with pytest.raises(ValueError, match="has no CUDA kernels"):
        ops.family("bf16")


def test_cpu_reference_layer_is_unchanged_by_the_registration(rng):
    layer = nt.Linear(128, 128, recipe="fp8-current")
    x = randn(rng, 128, 128).requires_grad_(True)
    layer(x).sum().backward()
    assert "cuda" not in layer.last_path and x.grad is not None and int(layer.step) == 1
    assert layer._finite_flags.values.device.type == "cpu"
