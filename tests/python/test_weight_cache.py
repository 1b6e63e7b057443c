"""weight_cache on every CUDA backend (fp8-current, fp8-delayed, fp8-block, quartet, mxfp4, mxfp8, nvfp4), through the
CPU stand-in of the extension: a layer inside weight_cache gives the same bits as one that quantizes its weight on
every pass, makes fewer kernel calls from the second micro-batch on, and quantizes again after an in-place update.
fp8-delayed runs with delayed_first_step="own_amax": its weight scale is then the weight's own amax's from the first
step on (with "te" the first micro-batch's copy has scale 1, which a fresh quantization at the second would not
have: Transformer Engine's reuse does the same)."""
import numpy as np
import pytest
import torch

import nibble.torch as nt
from nibble.backends import decoded, fp8, mxfp4, quartet
from conftest import forward_backward, randn
from fake_cuda_ext import install_standin

T, I, O = 128, 256, 128
BACKEND = {"quartet": quartet, "mxfp4": mxfp4, "mxfp8": decoded, "nvfp4": decoded, "fp8-current": fp8,
           "fp8-delayed": fp8, "fp8-block": fp8}
OPTIONS = {"fp8-delayed": dict(delayed_first_step="own_amax")}


@pytest.fixture
def fake(ext, monkeypatch):
    return install_standin(ext, monkeypatch, BACKEND)


def layer(recipe, w, b):
    m = nt.Linear(I, O, recipe=recipe, backend="cuda", seed=11, **OPTIONS.get(recipe, {}))
    with torch.no_grad():
        m.weight.copy_(w)
        m.bias.copy_(b)
    return m


def bf16_valued(t):
    return t.bfloat16().float()  # mxfp8's kernels read BF16: BF16 values make both layers' inputs exact


@pytest.mark.parametrize("recipe", sorted(BACKEND))
def test_weight_cache_equals_fresh_quantization_with_fewer_calls(recipe, rng, ext, fake):
    w = bf16_valued(randn(rng, O, I, scale=I ** -0.5) * torch.linspace(0.1, 4.0, O)[:, None])
    b = bf16_valued(randn(rng, 1, O)[0])
    cached_layer, plain = layer(recipe, w, b), layer(recipe, w, b)
    xs = [bf16_valued(randn(rng, T, I)) for _ in range(3)]
    gy = bf16_valued(randn(rng, T, O))
    with nt.weight_cache(cached_layer):
        for k, x in enumerate(xs):
            fake.calls.clear()
            got = forward_backward(cached_layer, x, gy)
            n_cached = len(fake.calls)
            fake.calls.clear()
            want = forward_backward(plain, x, gy)
            n_plain = len(fake.calls)
            for name, a, c in zip(("y", "dx", "dw", "db"), got, want):
                assert torch.equal(a, c), (recipe, k, name)
            assert ("W cached (weight_cache)" in cached_layer.last_path) == (k > 0), cached_layer.last_path
            assert (n_cached < n_plain) == (k > 0), (k, n_cached, n_plain)
        with torch.no_grad():  # an optimizer-like in-place update: the next pass quantizes the new weight
            cached_layer.weight.mul_(0.5)
            plain.weight.mul_(0.5)
        for a, c in zip(forward_backward(cached_layer, xs[0], gy), forward_backward(plain, xs[0], gy)):
            assert torch.equal(a, c)
        assert "W cached" not in cached_layer.last_path
    assert cached_layer._weight_copies is None
    forward_backward(cached_layer, xs[1], gy)
    assert "cached" not in cached_layer.last_path


def test_cached_weight_changes_the_result_when_stale(rng, ext, fake):
    # The check above could pass if the cache were never used; here a weight changed behind the version counter
    # (through .data, which torch does not count) keeps the stale copy: proof that the copy is reused.
    w = randn(rng, O, I, scale=I ** -0.5)
    m = layer("mxfp4", w, torch.zeros(O))
    x, gy = randn(rng, T, I), randn(rng, T, O)
    with nt.weight_cache(m):
        y0 = forward_backward(m, x, gy)[0]
        m.weight.data.copy_(w * 2.0)
        y1 = forward_backward(m, x, gy)[0]
    assert torch.equal(y0, y1)  # the stale copy was used
    y2 = forward_backward(m, x, gy)[0]
    assert np.allclose(y2.numpy(), 2.0 * y0.numpy(), rtol=1e-5, atol=1e-6)
