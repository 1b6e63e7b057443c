"""nibble's block Hadamard rotations against docs/spec.md §3's definition, built here with NumPy.

docs/spec.md §3: H_n is the n x n Sylvester Hadamard matrix (H_1 = [1], H_2n = [[H_n, H_n], [H_n, -H_n]], i.e.
H[i, j] = (-1)^popcount(i & j)) scaled by 1/sqrt(n), applied block-wise along columns; random signs are
applied BEFORE the transform, x -> (x * s) H (the reverse order would be a fixed rotation); the Quartet
backward epilogue is dX = (G * 16/9 masked) H^T with the signs undone after it. nibble computes these with
float32 butterflies, this file with float64 matrix products, so they agree to float32 rounding (a few ulps
of the block's norm), not bit for bit; the sign order and the Sylvester ordering are exact checks.
"""
import numpy as np
import pytest


def sylvester(n):
    i = np.arange(n)
    popcount = np.vectorize(lambda v: bin(v).count("1"))
    return np.where(popcount(i[:, None] & i[None, :]) % 2 == 0, 1.0, -1.0)


def blockwise(x, m):
    r, c = x.shape
    n = m.shape[0]
    return (x.reshape(r, c // n, n).astype(np.float64) @ m).reshape(r, c)


def close_to_float32(got, want):
    """Within a few float32 ulps of each block's scale (butterflies round at every stage)."""
    got = np.asarray(got, np.float64)
    tol = 8 * np.finfo(np.float32).eps * (np.abs(want).max() + 1e-30)
    np.testing.assert_allclose(got, want, rtol=0, atol=tol)


@pytest.mark.parametrize("n", [16, 32, 64, 128])
def test_unsigned_rotation_is_the_normalised_sylvester_matrix(ext, nprng, n):
    x = nprng.standard_normal((6, 4 * n)).astype(np.float32)
    h = sylvester(n) / np.sqrt(n)
    close_to_float32(ext.hadamard(x, size=n), blockwise(x, h))
    close_to_float32(ext.hadamard(x, size=n, inverse=True), blockwise(x, h.T))


@pytest.mark.parametrize("signs,n", [("seeded", 32), ("seeded", 16), ("nvfp4", 16)])
def test_signs_are_applied_before_the_transform(ext, nprng, signs, n):
    seed = int(nprng.integers(2 ** 32))
    h = sylvester(n) / np.sqrt(n)
    # Row j of the rotated identity is s_j H[j, :] when the signs come first ((x * s) H); with the signs
    # after (x H * s) it would be H[j, :] * s, and row 0 would carry the sign pattern itself.
    rows = np.asarray(ext.hadamard(np.eye(n, dtype=np.float32), size=n, signs=signs, seed=seed), np.float64)
    s = np.sign(rows[:, 0] * h[:, 0])
    assert set(np.unique(s)) <= {-1.0, 1.0}
    close_to_float32(rows, s[:, None] * h)
    assert (s < 0).any(), "a sign vector without -1 would not test the order"
    # The same vector for every block and every row; inverse undoes it: x = ((x * s) H) H^T * s.
    x = nprng.standard_normal((5, 3 * n)).astype(np.float32)
    y = ext.hadamard(x, size=n, signs=signs, seed=seed)
    close_to_float32(y, blockwise(x * np.tile(s, 3), h))
    back = ext.hadamard(np.asarray(y, np.float32), size=n, signs=signs, seed=seed, inverse=True)
    close_to_float32(back, x.astype(np.float64))


def test_seeded_signs_depend_on_the_seed(ext):
    eye = np.eye(32, dtype=np.float32)
    a = np.asarray(ext.hadamard(eye, size=32, signs="seeded", seed=1))
    b = np.asarray(ext.hadamard(eye, size=32, signs="seeded", seed=2))
    assert not np.array_equal(a, b)
    np.testing.assert_array_equal(a, ext.hadamard(eye, size=32, signs="seeded", seed=1))


def test_quartet_backward_epilogue(ext, nprng):
    n, seed = 32, int(nprng.integers(2 ** 32))
    g = nprng.standard_normal((4, 2 * n)).astype(np.float32)
    mask = (nprng.random(g.shape) < 0.9).astype(np.uint8)
    h = sylvester(n) / np.sqrt(n)
    s = np.sign(np.asarray(ext.hadamard(np.eye(n, dtype=np.float32), size=n, signs="seeded", seed=seed))[:, 0])
    want = blockwise(g.astype(np.float64) * (16.0 / 9.0) * mask, h.T) * np.tile(s, 2)
    close_to_float32(ext.quartet_epilogue(g, mask, size=n, signs="seeded", seed=seed), want)
