"""The package where PyTorch is not installed (tools/pip_test.sh runs this in a fresh virtual env with NumPy
and pytest only): the extension loads, the CPU reference quantizes NumPy arrays, and nibble.torch says
what to install."""
import importlib.util

import numpy as np
import pytest

import nibble

E2M1_GRID = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def test_this_environment_has_no_torch():
    # Everything below is only meaningful without torch.
    assert importlib.util.find_spec("torch") is None


def test_load_extension_gives_the_cpu_reference():
    ext = nibble.load_extension()
    assert "mxfp4" in ext.recipe_names and "quartet" in ext.recipe_names


def test_mxfp4_from_numpy_rounds_to_the_nearest_e2m1_value():
    # One 32-block with amax 6 (6.1 at most): the OCP scale is 2^(floor(log2 amax) - 2) = 1, so each element
    # becomes the nearest E2M1 value (past 6: 6). Inputs are grid values moved by at most 0.1, a fifth of the
    # smallest gap, so the nearest value is the one drawn: an answer derived without the library.
    rng = np.random.default_rng()
    pick = E2M1_GRID[rng.integers(0, len(E2M1_GRID), size=32)] * rng.choice([-1.0, 1.0], size=32)
    pick[0] = 6.0
    x = (pick + rng.uniform(-0.1, 0.1, size=32)).reshape(1, 32)
    q = nibble.quantize(x, "mxfp4", mx_scale_rule="ocp")  # float64 in: copied to float32
    assert q["original"].dtype == np.float32 and q["original"].shape == (1, 32)
    np.testing.assert_array_equal(q["original"][0], pick.astype(np.float32), err_msg=str(x))  # -0 == 0
    assert q["produced_by"]


def test_quantize_refuses_a_vector_with_the_fix():
    with pytest.raises(ValueError, match=r"2-D array.*reshape"):
        nibble.quantize(np.ones(32, np.float32), "mxfp4")


def test_nibble_torch_names_torch_and_how_to_install_it():
    with pytest.raises(ImportError) as e:
        import nibble.torch  # noqa: F401
    assert type(e.value) is ImportError  # not the bare ModuleNotFoundError of `import torch`
    assert "PyTorch" in str(e.value) and "pip install torch" in str(e.value)
