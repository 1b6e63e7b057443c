"""Shared fixtures: fresh random data every run (seed printed so a failure can be replayed)."""
import os
import random

import pytest

torch = pytest.importorskip("torch")


@pytest.fixture
def rng():
    seed = int(os.environ.get("NIBBLE_TEST_SEED", random.SystemRandom().randrange(2 ** 31)))
    print(f"NIBBLE_TEST_SEED={seed}")
    g = torch.Generator().manual_seed(seed)
    return g


@pytest.fixture
def nprng(rng):
    """A NumPy generator seeded from rng (the same printed NIBBLE_TEST_SEED replays it)."""
    import numpy as np
    return np.random.default_rng(int(rng.initial_seed()))


@pytest.fixture(scope="module")
def ext():
    import nibble
    return nibble.load_extension()


@pytest.fixture
def cuda_build_ext(ext):
    """The extension, for the tests of its CUDA bindings that need no GPU (argument checks): skips them when it
    was built without CUDA, unless NIBBLE_REQUIRE_CUDA_BUILD=1 (the ctest entry python_cuda_argument_checks,
    which runs them against the CUDA build), where that is a failure."""
    if not ext.has_cuda:
        if os.environ.get("NIBBLE_REQUIRE_CUDA_BUILD") == "1":
            pytest.fail("NIBBLE_REQUIRE_CUDA_BUILD=1 but nibble._C was built without CUDA")
        pytest.skip("nibble._C was built without CUDA")
    return ext


@pytest.fixture
def cuda_ext(ext):
    """The extension, for the GPU tests: skips them when it was built without CUDA or no GPU is visible."""
    if not ext.has_cuda:
        pytest.skip("nibble._C was built without CUDA")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    return ext


def randn(g, *shape, scale=1.0):
    # Heavy-ish tails and a per-row spread, so scales differ between blocks (never zeros).
    x = torch.randn(*shape, generator=g) * scale
    return x * torch.exp(torch.randn(shape[0], 1, generator=g))


def forward_backward(layer, x, gy):
    """Runs `layer` on a fresh leaf copy of x and back-propagates gy, with the parameter gradients cleared
    first (so nothing accumulates across calls). Returns (y, dX, dW, dbias), dbias None without a bias;
    the gradients are copies, safe to keep across later calls."""
    x = x.clone().requires_grad_(True)
    bias = getattr(layer, "bias", None)
    layer.weight.grad = None
    if bias is not None:
        bias.grad = None
    y = layer(x)
    y.backward(gy)
    return y.detach(), x.grad, layer.weight.grad.clone(), None if bias is None else bias.grad.clone()
