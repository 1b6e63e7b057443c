"""nibble's nvfp4 CPU reference against an independent NumPy + ml_dtypes implementation of Transformer Engine's
NVFP4 recipe (TE 2.x: transformer_engine/pytorch/custom_recipes/reference_nvfp4.py and the CUDA cast kernels,
common/cast/nvfp4/core_nvfp4.cuh; docs/recipes.md, nvfp4; docs/spec.md §2), sharing no code with nibble.

TE's formulas, in its order of float32 operations:
  S_enc = 448 * 6 / amax, min(., FLT_MAX); amax 0 (or S_enc 0) -> 1;  S_dec = 1 / S_enc
  block scale d = UE4M3_RNE_satfinite(amax_block * (S_enc * fl(1/6)))
  element encode scale e = min(1 / (fp32(d) * S_dec), FLT_MAX)
  code = E2M1_RNE_satfinite(x * e)  (stochastic on gradients)
  wgrad operands: rotate each 1x16 group by diag(signs) H16 / 4 with TE's fixed sign vector, round to BF16, then
  quantize (TE's RHT is a BF16 GEMM with FP32 accumulation).
Decoded value = (e2m1 * d) * S_dec (nibble's tensor_scale is S_dec).

Codes and decoded values must agree bit for bit (-0 keeps its sign bit: code 0x8, as TE's hardware converter
writes it). The rotation here is float64 matrix arithmetic, exact on the inputs used: every 16-group holds
BF16 values that are integer multiples of one power of two spanning at most 20 bits, so FP32 sums are exact too.
"""
import os

import numpy as np
import pytest

if os.environ.get("NIBBLE_REQUIRE_ML_DTYPES") == "1":
    import ml_dtypes  # tools/python_test.sh installs it: CI must run these tests, not skip them
else:
    ml_dtypes = pytest.importorskip("ml_dtypes")

F32 = np.float32
FLT_MAX = F32(np.finfo(F32).max)
# TE's get_wgrad_sign_vector (transformer_engine/pytorch/tensor/nvfp4_tensor.py), copied as data.
TE_WGRAD_SIGNS = np.array([1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1], dtype=np.float64)
E2M1_GRID = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def sylvester16():
    h = np.ones((1, 1))
    while h.shape[0] < 16:
        h = np.block([[h, h], [h, -h]])
    return h


def te_rht(x):
    """x [R, C] -> each 1x16 group times diag(signs) H16 / 4 (float64, exact here), rounded to BF16."""
    r, c = x.shape
    t = (np.diag(TE_WGRAD_SIGNS) @ sylvester16()) * 0.25
    y = (x.astype(np.float64).reshape(-1, 16) @ t).reshape(r, c)
    return y.astype(ml_dtypes.bfloat16).astype(F32)


def e2m1_codes(v):
    """Saturating RNE float32 -> E2M1 codes (sign bit 3), via ml_dtypes' float4_e2m1fn."""
    v = np.asarray(v, F32)
    return np.clip(v, -6.0, 6.0).astype(ml_dtypes.float4_e2m1fn).view(np.uint8) & 0xF


def e2m1_value(codes):
    mag = E2M1_GRID[codes & 0x7]
    return np.where(codes & 0x8, -mag, mag).astype(F32)


def te_nvfp4(x, block_rows, rht=False):
    """TE's NVFP4 quantization of x [R, C] (blocks of block_rows x 16 along C): codes, UE4M3 codes, S_dec, values."""
    x = np.asarray(x, F32)
    if rht:
        x = te_rht(x)
    r, c = x.shape
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        amax = F32(np.abs(x).max())
        s_enc = np.minimum(F32(448.0 * 6.0) / amax, FLT_MAX).astype(F32)
        if amax == 0 or s_enc == 0 or np.isnan(amax):
            s_enc = F32(1.0)
        s_dec = F32(F32(1.0) / s_enc)
        b = x.reshape(r // block_rows, block_rows, c // 16, 16).transpose(0, 2, 1, 3)
        amax_b = np.abs(b).max(axis=(-1, -2)).astype(F32)
        y = (amax_b * F32(s_enc * (F32(1.0) / F32(6.0)))).astype(F32)
        d8 = np.clip(y, 0.0, 448.0).astype(ml_dtypes.float8_e4m3fn)
        d = d8.astype(F32)
        scale_codes = d8.view(np.uint8)
        e = np.minimum(F32(1.0) / (d * s_dec).astype(F32), FLT_MAX).astype(F32)
        scaled = (b * e[..., None, None]).astype(F32)
    codes = e2m1_codes(scaled)
    values = ((e2m1_value(codes) * d[..., None, None]).astype(F32) * s_dec).astype(F32)
    back = lambda a: a.transpose(0, 2, 1, 3).reshape(r, c)
    return back(codes), scale_codes.reshape(-1), s_dec, back(values), back(scaled), d


def bf16(v):
    return np.asarray(v, F32).astype(ml_dtypes.bfloat16).astype(F32)


def te_inputs(rng, rows, cols, exponent_range=(-60, 60)):
    """BF16 values; each row (of 16-wide groups) is integers m in [128, 255] times 2^(E_row + j), j in [-12, 0],
    so a group spans at most 20 bits (exact rotations); E_row per row over exponent_range; plus outliers
    (j = 0 with m = 255), zero groups, signed zeros and exact E2M1 ties (rows scaled so S_dec is a power of two)."""
    m = rng.integers(128, 256, size=(rows, cols)).astype(np.float64)
    j = rng.integers(-12, 1, size=(rows, cols))
    e_row = rng.integers(exponent_range[0], exponent_range[1] + 1, size=(rows, 1))
    sign = np.where(rng.random((rows, cols)) < 0.5, -1.0, 1.0)
    x = sign * m * np.exp2(e_row + j - 7)
    x[rng.random((rows, cols)) < 0.01] *= 0.0  # scattered zeros (some -0.0)
    x[1, 16:32] = 0.0                           # an all-zero group
    x[2, 0:16] = np.where(np.arange(16) % 2, -0.0, 0.0)
    return x.astype(F32)


def tie_tensor(rng, rows, cols):
    """Tensor amax 2688 * 2^k (S_dec = 2^-k exactly) and groups of t * d for E2M1 midpoints t and UE4M3 d."""
    k = int(rng.integers(-20, 21))
    ties = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
    x = np.zeros((rows, cols))
    d_choices = np.array([1.0, 1.125, 1.25, 1.375, 1.5, 1.625, 1.75, 1.875])
    for r in range(rows):
        for g in range(cols // 16):
            d = d_choices[rng.integers(0, 8)] * 2.0 ** int(rng.integers(1, 7))  # block scale d / 2^7: normal UE4M3
            grp = rng.choice(ties, size=16) * d * np.where(rng.random(16) < 0.5, -1.0, 1.0)
            grp[0] = 6.0 * d  # block amax 6 d: block scale d (up to TE's multiply by fl(1/6))
            x[r, 16 * g:16 * g + 16] = grp
    x = x * 2.0 ** -k
    x[0, 0] = 2688.0 * 2.0 ** (7 - k)  # the tensor amax
    return bf16(x)


def assert_bits(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    if got.dtype == np.float32:
        got, want = got.view(np.uint32), want.view(np.uint32)
    bad = np.argwhere(got != want)
    assert bad.size == 0, f"{what}: {len(bad)} of {got.size} differ, first at {tuple(bad[0])}: " \
                          f"got {got[tuple(bad[0])]:#x}, want {want[tuple(bad[0])]:#x}"


def check(ext, x, role, rht, what):
    block_rows = 16 if role == "w" else 1
    got = ext.quantize(x, "nvfp4", role=role, rounding="nearest", nvfp4_rht=rht)
    codes, scale_codes, s_dec, values, _, _ = te_nvfp4(x, block_rows, rht)
    assert np.float32(got["tensor_scale"]).view(np.uint32) == s_dec.view(np.uint32), (what, got["tensor_scale"], s_dec)
    assert_bits(np.asarray(got["scale_codes"]).reshape(-1), scale_codes, f"{what} block scale codes")
    assert_bits(np.asarray(got["codes"]), codes, f"{what} element codes")
    assert_bits(np.asarray(got["values"], F32), values, f"{what} decoded values")
    return codes, scale_codes


def test_te_sign_vector_and_ml_dtypes_conventions():
    """The independent pieces behave as TE's: -0 keeps its sign bit, E2M1 ties go to even, BF16 rounds to even."""
    assert e2m1_codes([-0.0, 0.25, 0.75, 2.5, 5.0, -7.0, 1e30]).tolist() == [0x8, 0x0, 0x2, 0x4, 0x6, 0xF, 0x7]
    assert bf16([1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8]).tolist() == [1.0, 1.0 + 2 ** -6]
    t = (np.diag(TE_WGRAD_SIGNS) @ sylvester16()) * 0.25
    np.testing.assert_array_equal(t @ t.T, np.eye(16) * 1.0)  # orthonormal: signs before H


@pytest.mark.parametrize("role", ["x", "w", "dy"])
def test_nvfp4_codes_and_values_equal_te(ext, nprng, role):
    x = te_inputs(nprng, 64, 128)
    codes, scale_codes = check(ext, x, role, False, f"nvfp4 {role}")
    # The inputs reach the interesting cases: zero-scale blocks (the 1x16 ones: a row far below the tensor
    # amax) with saturated codes, and saturated outliers.
    assert ((codes & 7) == 7).any()
    if role != "w":
        assert (scale_codes == 0).any()


@pytest.mark.parametrize("role", ["x", "dy"])
def test_nvfp4_wgrad_operands_with_rht_equal_te(ext, nprng, role):
    """The wgrad operands X^T and dY^T (given here already transposed: groups run along their rows): TE's RHT
    (its sign vector, BF16 output) then 1x16 quantization."""
    xt = te_inputs(nprng, 64, 128, exponent_range=(-30, 30))
    check(ext, xt, role, True, f"nvfp4 {role}^T with RHT")
    # BF16 rounding of the rotated values matters: quantizing the unrounded rotation differs somewhere.
    y64 = (xt.astype(np.float64).reshape(-1, 16) @ ((np.diag(TE_WGRAD_SIGNS) @ sylvester16()) * 0.25)).reshape(xt.shape)
    assert (y64.astype(F32) != te_rht(xt)).mean() > 0.2


def test_nvfp4_extreme_exponents_and_ties_equal_te(ext, nprng):
    for lo, hi in [(-60, -55), (55, 60), (-60, 60)]:
        check(ext, te_inputs(nprng, 32, 64, (lo, hi)), "x", False, f"exponents 2^{lo}..2^{hi}")
    x = tie_tensor(nprng, 32, 64)
    codes, _, s_dec, _, scaled, d = te_nvfp4(x, 1)
    ties = np.isin(np.abs(scaled), [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
    assert ties.sum() > 100, "the tie tensor must put many products exactly on E2M1 midpoints"
    check(ext, x, "x", False, "exact ties")
    check(ext, x, "w", False, "exact ties 16x16")


def test_nvfp4_stochastic_rounding_is_unbiased_with_binomial_variance(ext, nprng):
    """dY's stochastic rounding: for each element the code is the upper neighbour of x * e with probability
    p = its fractional distance, independently per seed. Checked on the round-up indicator over many seeds:
    the total deviation from sum(p) within 5 sigma, and the pooled variance within 5% of sum p(1 - p).
    Nearest rounding (variance 0), a fixed p = 1/2, or p measured against the wrong scale all fail."""
    x = bf16(nprng.standard_normal((32, 64)) * np.exp2(nprng.integers(-8, 9, size=(32, 1))))
    x[0, 0] = 2688.0 * 4.0
    codes_n, _, s_dec, _, scaled, d = te_nvfp4(x, 1)
    a = np.abs(scaled).astype(np.float64)
    lo_idx = np.clip(np.searchsorted(E2M1_GRID, a, side="right") - 1, 0, 7)
    hi_idx = np.minimum(lo_idx + 1, 7)
    gap = E2M1_GRID[hi_idx] - E2M1_GRID[lo_idx]
    p = np.where(gap > 0, (a - E2M1_GRID[lo_idx]) / np.where(gap > 0, gap, 1.0), 0.0)
    seeds = 300
    ups = np.zeros((seeds,) + x.shape)
    for s in range(seeds):
        got = ext.quantize(x, "nvfp4", role="dy", rounding="stochastic", seed=1000 + s)
        c = np.asarray(got["codes"])
        mag = c & 7
        assert np.all((mag == lo_idx) | (mag == hi_idx)), "stochastic codes must be one of the two neighbours"
        ups[s] = (mag == hi_idx) & (hi_idx != lo_idx)
        if s == 0:
            assert_bits(np.asarray(got["scale_codes"]).reshape(-1), te_nvfp4(x, 1)[1], "stochastic block scales")
    moving = p > 0
    assert moving.sum() > x.size // 2
    dev = ups.sum(axis=0) - seeds * p
    z = dev[moving].sum() / np.sqrt((seeds * p * (1 - p))[moving].sum())
    assert abs(z) < 5, z
    var_ratio = ups.var(axis=0, ddof=1)[moving].sum() / (p * (1 - p))[moving].sum()
    assert abs(var_ratio - 1.0) < 0.05, var_ratio
    # Per element too: no element strays beyond 6 sigma of its binomial.
    sd = np.sqrt(seeds * p * (1 - p))
    assert np.all(np.abs(dev[moving]) < 6 * sd[moving] + 1), np.abs(dev[moving] / (sd[moving] + 1e-12)).max()
