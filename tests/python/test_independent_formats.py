"""nibble's CPU reference quantizers against an independent implementation of docs/spec.md §1-3.

The expectation here is written from docs/spec.md's formulas with NumPy and ml_dtypes (JAX's FP8/FP4/E8M0
dtypes: its float32 -> float8_e4m3fn / float8_e5m2 / float4_e2m1fn casts are round-to-nearest-even),
sharing no code with nibble. Saturation ("satfinite") is a clip to the format's max before the cast,
which equals saturating RNE. Scale exponents are found by exact comparisons in float64, not by
floating-point log2. Every recipe is compared bit for bit on the decoded values (`values`: element x
block scale x tensor scale, as nibble's GEMMs see them), on fresh random data plus edge blocks: all
zeros, float32 subnormals, NaN, elements placed exactly on every rounding tie of the element format, and
whole tensors scaled by 2^-100 .. 2^100.

The CUDA kernels are bit-exact against the same CPU reference (tests/kernels, label gpu), so this also
pins them to an outside definition. QuEST and the backward quantizer are checked here on unrotated
groups; the Hadamard itself is checked in test_independent_hadamard.py, to float32 rounding (its
butterfly order is nibble's own).
"""
import os

import numpy as np
import pytest

if os.environ.get("NIBBLE_REQUIRE_ML_DTYPES") == "1":
    import ml_dtypes  # tools/python_test.sh installs it: CI must run these tests, not skip them
else:
    ml_dtypes = pytest.importorskip("ml_dtypes")

F32 = np.float32
E4M3, E5M2, E2M1 = ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.float4_e2m1fn
BF16 = ml_dtypes.bfloat16
FMAX = {E4M3: 448.0, E5M2: 57344.0, E2M1: 6.0}
EMAX = {E4M3: 8, E2M1: 2}  # exponent of the element format's largest power of two (OCP MX rule)


def cast_sat(v, dtype):
    """Saturating RNE cast of float32/float64 v to dtype, back as float32; NaN stays NaN."""
    v = np.asarray(v)
    fmax = FMAX[dtype]
    out = np.clip(v, -fmax, fmax).astype(dtype).astype(F32)
    return np.where(np.isnan(v), F32(np.nan), out).astype(F32)


def floor_log2(a):
    """floor(log2 a) for finite a > 0 (float64 array), exactly (frexp: a = m 2^e, m in [0.5, 1))."""
    return np.frexp(np.asarray(a, dtype=np.float64))[1] - 1


def pow2(k):
    return np.ldexp(np.float64(1.0), np.asarray(k, dtype=np.int64))


def blocks(x, rows, cols):
    """[R, C] -> [R/rows, C/cols, rows*cols] views of each block's elements."""
    r, c = x.shape
    return x.reshape(r // rows, rows, c // cols, cols).transpose(0, 2, 1, 3).reshape(r // rows, c // cols, -1)


def unblocks(b, shape, rows, cols):
    r, c = shape
    return b.reshape(r // rows, c // cols, rows, cols).transpose(0, 2, 1, 3).reshape(r, c)


# ---- the recipes, from docs/spec.md §2-3 ------------------------------------------------------------------

def fp8_per_tensor(x, dtype, amax=None, margin=0):
    """fp8-current / fp8-delayed: s_enc = fmax 2^-margin / amax (float32); amax 0/inf/NaN -> 1."""
    amax = F32(np.abs(x).max() if amax is None else amax)
    if amax > 0 and np.isfinite(amax):
        s_enc = F32(F32(FMAX[dtype] * 2.0 ** -margin) / amax)
    else:
        s_enc = F32(1.0)
    dec = F32(F32(1.0) / s_enc)
    return (cast_sat(x * s_enc, dtype) * dec).astype(F32)


def fp8_block(x, rows):
    """fp8-block: per rows x 128 block s_enc = 2^k, the largest k with amax 2^k <= 448 (k in [-127, 127])."""
    b = blocks(x, rows, 128)
    amax = np.abs(b).astype(np.float64).max(axis=-1)
    ok = (amax > 0) & np.isfinite(amax)
    a = np.where(ok, amax, 1.0)
    k = floor_log2(448.0 / a)
    k = np.where(a * pow2(k) > 448.0, k - 1, k)
    k = np.where(a * pow2(k + 1) <= 448.0, k + 1, k)
    k = np.clip(np.where(ok, k, 0), -127, 127)
    q = cast_sat(b * pow2(k)[..., None], E4M3)
    return unblocks((q * pow2(-k)[..., None]).astype(F32), x.shape, rows, 128)


def mx_exponent(amax, dtype, rule):
    """MX block scale exponent. ocp: floor(log2 amax) - emax (OCP MX v1.0). te (Transformer Engine 2.x
    float_to_e8m0(amax * max_norm_rcp)): v = fl32(amax * fl32(1/fmax)), k = ceil(log2 v), clamped; v = 0 -> -127."""
    a = np.where(amax > 0, amax, 1.0)
    if rule == "ocp":
        k = floor_log2(a) - EMAX[dtype]
    else:
        with np.errstate(under="ignore"):
            v = a.astype(F32) * F32(1.0 / FMAX[dtype])     # one float32 multiply, subnormals kept
        m, e = np.frexp(v.astype(np.float64))             # v = m 2^e, m in [0.5, 1)
        k = np.where(v > 0, np.where(m == 0.5, e - 1, e), -127)
    return np.clip(np.where(amax > 0, k, -127), -127, 127)


def mx(x, dtype, rule="ocp"):
    """mxfp8 / mxfp4: 1x32 blocks, E8M0 scale 2^k; NaN or inf in a block -> NaN scale (the block decodes NaN)."""
    b = blocks(x, 1, 32).astype(np.float64)
    amax = np.abs(b).max(axis=-1)
    nan_scale = ~np.isfinite(amax)
    k = mx_exponent(np.where(nan_scale, 1.0, amax), dtype, rule)
    q = cast_sat(np.where(nan_scale[..., None], 0.0, b) / pow2(k)[..., None], dtype)
    v = np.where(nan_scale[..., None], np.nan, q * pow2(k)[..., None])
    return unblocks(v.astype(F32), x.shape, 1, 32)


def nvfp4(x, block_rows):
    """nvfp4, Transformer Engine's op order (test_independent_nvfp4.py checks it in depth): S_enc = 2688 / amax,
    block code UE4M3 = RN(amax_b * (S_enc * fl(1/6))), element RN_E2M1(x * min(1 / (d_b * S_dec), FLT_MAX))."""
    amax = F32(np.abs(x).max())
    with np.errstate(divide="ignore", over="ignore"):
        s_enc = np.minimum(F32(2688.0) / amax, F32(np.finfo(F32).max)) if np.isfinite(amax) else F32(1.0)
        s_enc = F32(1.0) if amax == 0 or s_enc == 0 else F32(s_enc)
        s_dec = F32(F32(1.0) / s_enc)
        b = blocks(x, block_rows, 16)
        amax_b = np.abs(b).max(axis=-1).astype(F32)
        d = cast_sat((amax_b * F32(s_enc * (F32(1.0) / F32(6.0)))).astype(F32), E4M3)  # UE4M3: non-negative E4M3
        e = np.minimum(F32(1.0) / (d * s_dec).astype(F32), F32(np.finfo(F32).max)).astype(F32)
        q = cast_sat((b * e[..., None]).astype(F32), E2M1)
    return unblocks(((q * d[..., None]).astype(F32) * s_dec).astype(F32), x.shape, block_rows, 16)


def quest(x):
    """QuEST forward (unrotated): sums in index order in float32, s = 2^floor(log2(0.48707976 sigma + 1e-8))."""
    g = blocks(x, 1, 32)
    total = np.zeros(g.shape[:2], F32)
    for i in range(32):
        total = (total + g[..., i]).astype(F32)
    mean = (total / F32(32.0)).astype(F32)
    ss = np.zeros(g.shape[:2], F32)
    with np.errstate(over="ignore", invalid="ignore"):  # may overflow to inf: the non-finite sigma below
        for i in range(32):
            d = (g[..., i] - mean).astype(F32)
            ss = (ss + d * d).astype(F32)
    sigma = np.sqrt((ss / F32(32.0)).astype(F32)).astype(F32)
    # docs/spec.md §3 leaves a non-finite sigma (NaN/inf in the group, or a sum of squares past float32) undefined;
    # nibble gives such a group the E8M0 NaN scale and no trusted element, as MX does a NaN block.
    bad = ~np.isfinite(sigma)
    t = (F32(0.48707976) * np.where(bad, F32(1.0), sigma) + F32(1e-8)).astype(F32)
    k = np.clip(floor_log2(t), -127, 127)
    v = g.astype(np.float64) / pow2(k)[..., None]
    q = np.where(bad[..., None], np.nan, cast_sat(v, E2M1) * pow2(k)[..., None])
    mask = (np.abs(v) < 6.0) & ~bad[..., None]
    return unblocks(q.astype(F32), x.shape, 1, 32), unblocks(mask.astype(np.uint8), x.shape, 1, 32)


def quartet_backward(x):
    """Quartet backward quantizer (unrotated, nearest): k = floor(log2 amax) - 2, codes RN_E2M1(0.75 x 2^-k)."""
    g = blocks(x, 1, 32)
    amax = np.abs(g).astype(np.float64).max(axis=-1)
    k = np.clip(floor_log2(np.where(amax > 0, amax, 1.0)) - 2, -127, 127)
    pre = (F32(0.75) * g).astype(F32)
    q = cast_sat(pre.astype(np.float64) / pow2(k)[..., None], E2M1) * pow2(k)[..., None]
    # A block of zeros has no log2 amax (docs/spec.md §3 leaves it open): nibble writes code 0 (+0) for every
    # element there, where this rule would keep the sign of a -0 input.
    q = np.where((amax == 0)[..., None], 0.0, q)
    return unblocks(q.astype(F32), x.shape, 1, 32)


# ---- test data ------------------------------------------------------------------------------------

def tie_points(dtype):
    """Every midpoint between adjacent non-negative values of the element format (RNE ties)."""
    codes = np.arange(256 if dtype is not E2M1 else 16, dtype=np.uint8)
    vals = np.unique(codes.view(dtype).astype(np.float64) if dtype is not E2M1 else
                     np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], dtype=np.float64))
    vals = vals[np.isfinite(vals) & (vals >= 0) & (vals <= FMAX[dtype])]
    return (vals[:-1] + vals[1:]) / 2


def matrix(rng, rows, cols, dtype, block=32):
    """Random rows of varied magnitude, then edge blocks: zeros, subnormals, exact ties at a block scale."""
    x = (rng.standard_normal((rows, cols)) * np.exp(rng.standard_normal((rows, 1)) * 3)).astype(F32)
    # Some tensors far from 1 (2^-100 .. 2^100): tiny scale exponents, -0 from underflowed subnormals,
    # and QuEST sums of squares past float32's range.
    tensor_scale = 2.0 ** int(rng.integers(-100, 101)) if rng.random() < 0.5 else 1.0
    x[0, :block] = 0.0                                           # an all-zero block
    x[1, :block] = rng.standard_normal(block) * 2.0 ** -140     # float32 subnormals
    if rows > 2:
        ties = tie_points(dtype)
        n = min(block - 1, ties.size)
        sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
        # The block's max is the format's top power of two times 2^3, so its scale is 2^3 under the OCP
        # rule and every tie * 2^3 is an exact midpoint of the scaled elements.
        row = np.zeros(block)
        row[0] = 2.0 ** EMAX.get(dtype, 8) * 8.0
        row[1:1 + n] = ties[rng.permutation(ties.size)[:n]] * 8.0 * sign
        x[2, :block] = row.astype(F32)
    with np.errstate(over="ignore", under="ignore"):
        return (x * F32(tensor_scale)).astype(F32)


def assert_same_bits(got, want, what):
    got, want = np.asarray(got, F32), np.asarray(want, F32)
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    if not same.all():
        i = np.argwhere(~same)[0]
        pytest.fail(f"{what}: {int((~same).sum())} of {same.size} values differ; first at {tuple(i)}: "
                    f"nibble {got[tuple(i)]!r} vs independent {want[tuple(i)]!r}")


# ---- the comparisons -----------------------------------------------------------------------------

@pytest.mark.parametrize("role,dtype", [("x", E4M3), ("dy", E5M2)])
def test_fp8_current(ext, nprng, role, dtype):
    x = matrix(nprng, 8, 256, dtype)
    got = ext.quantize(x, "fp8-current", role=role, rounding="nearest")
    assert_same_bits(got["values"], fp8_per_tensor(x, dtype), f"fp8-current {role}")


def test_fp8_current_scale_one_for_zero_tensor(ext):
    x = np.zeros((2, 64), F32)
    got = ext.quantize(x, "fp8-current")
    assert got["tensor_scale"] == 1.0
    assert_same_bits(got["values"], fp8_per_tensor(x, E4M3), "fp8-current of zeros")


def test_fp8_delayed_uses_history_max(ext, nprng):
    x = matrix(nprng, 4, 128, E4M3)
    hist = np.array([3.0, 250.0, 17.5], F32)
    got = ext.quantize(x, "fp8-delayed", amax_history=hist, margin=1)
    assert_same_bits(got["values"], fp8_per_tensor(x, E4M3, amax=hist.max(), margin=1), "fp8-delayed")


@pytest.mark.parametrize("role,dtype", [("x", E4M3), ("dy", E5M2)])
def test_fp8_delayed_first_step_and_steady_state(ext, nprng, role, dtype):
    """Transformer Engine DelayedScaling: scale 1 before any amax is recorded; one-shot = steady state."""
    x = matrix(nprng, 4, 128, dtype)
    first = ext.quantize(x, "fp8-delayed", role=role, amax_history=np.zeros(0, F32))
    assert first["tensor_scale"] == 1.0
    assert_same_bits(first["values"], (cast_sat(x, dtype)).astype(F32), f"fp8-delayed {role} first step")
    own = ext.quantize(x, "fp8-delayed", role=role, amax_history=np.zeros(0, F32), first_step="own_amax")
    assert_same_bits(own["values"], fp8_per_tensor(x, dtype), f"fp8-delayed {role} first step, own amax")
    steady = ext.quantize(x, "fp8-delayed", role=role)
    assert_same_bits(steady["values"], fp8_per_tensor(x, dtype), f"fp8-delayed {role} steady state")
    assert "steady state" in steady["produced_by"]


@pytest.mark.parametrize("last", [0.0, np.inf, np.nan])
def test_fp8_delayed_keeps_previous_scale(ext, nprng, last):
    """A zero or non-finite history max keeps the previous scale (TE's fused amax and scale update)."""
    x = matrix(nprng, 4, 128, E4M3)
    hist = np.array([5.0, 40.0, last], F32)       # window 1: only `last` is left in the history
    got = ext.quantize(x, "fp8-delayed", amax_history=hist, window=1, margin=2)
    assert_same_bits(got["values"], fp8_per_tensor(x, E4M3, amax=40.0, margin=2), f"fp8-delayed after {last}")


@pytest.mark.parametrize("role,rows", [("x", 1), ("w", 128)])
def test_fp8_block(ext, nprng, role, rows):
    x = matrix(nprng, 128, 256, E4M3, block=128)
    got = ext.quantize(x, "fp8-block", role=role)
    assert_same_bits(got["values"], fp8_block(x, rows), f"fp8-block {role}")


@pytest.mark.parametrize("recipe,dtype", [("mxfp8", E4M3), ("mxfp4", E2M1)])
@pytest.mark.parametrize("rule", ["default", "ocp", "te", "round-up"])
def test_mx(ext, nprng, recipe, dtype, rule):
    x = matrix(nprng, 16, 256, dtype)
    x[3, 32:64] = np.nan                      # a NaN block: E8M0 NaN scale
    x[4, 64] = np.float32(np.nan)             # one NaN among finite values
    x[5, :32] = nprng.standard_normal(32) * 2.0 ** 120  # near the top of E8M0
    x[6, :32] = nprng.standard_normal(32) * 2.0 ** 60   # extreme exponents
    x[6, 32:64] = nprng.standard_normal(32) * 2.0 ** -60
    x[7, :32] = (nprng.standard_normal(32) * 300).astype(np.float32).astype(np.float64)
    x[7, 0] = 500.0                                      # OCP saturates it, te does not
    # amaxes around fmax * 2^-127, where te's product is a float32 subnormal
    edge = np.float32(FMAX[dtype] * 2.0 ** -127)
    x[8, :32] = np.nextafter(edge, np.float32(1)) * np.linspace(-1, 1, 32)
    x[8, 32:64] = edge * np.float32(1.001) * np.linspace(-1, 1, 32)
    x[9, :] = x[9, :].astype(BF16).astype(F32)           # BF16-representable inputs
    x = x.astype(F32)
    got = ext.quantize(x, recipe, mx_scale_rule=rule)
    want_rule = {"default": "te" if recipe == "mxfp8" else "ocp", "round-up": "te"}.get(rule, rule)
    assert_same_bits(got["values"], mx(x, dtype, want_rule), f"{recipe} {rule}")
    assert f"({want_rule} scale)" in got["produced_by"]


@pytest.mark.parametrize("role,block_rows", [("x", 1), ("w", 16)])
def test_nvfp4(ext, nprng, role, block_rows):
    x = matrix(nprng, 32, 128, E2M1, block=16)
    got = ext.quantize(x, "nvfp4", role=role, rounding="nearest", nvfp4_rht=False)
    assert_same_bits(got["values"], nvfp4(x, block_rows), f"nvfp4 {role}")


def test_quartet_forward_quest(ext, nprng):
    x = matrix(nprng, 16, 256, E2M1)
    got = ext.quantize(x, "quartet", role="x", rotate=False, forward_quantizer="quest")
    want, mask = quest(x)
    assert_same_bits(got["values"], want, "quartet QuEST forward")
    np.testing.assert_array_equal(np.asarray(got["mask"]), mask)


def test_quartet_backward_nearest(ext, nprng):
    x = matrix(nprng, 16, 256, E2M1)
    got = ext.quantize(x, "quartet", role="dy", rotate=False, rounding="nearest")
    assert got["prescale"] == np.float32(0.75)
    assert_same_bits(got["values"], quartet_backward(x), "quartet backward")


def test_independent_casts_see_the_ties():
    """The reference above rounds ties to even: 0.25 -> 0, 0.75 -> 1, 2.5 -> 2, 5 -> 4 (E2M1), and E4M3's
    largest tie (464 -> 448) stays finite only through the clip."""
    np.testing.assert_array_equal(cast_sat(np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0]), E2M1),
                                  np.array([0, 1, 1, 2, 2, 4, 4, 6], F32))
    np.testing.assert_array_equal(cast_sat(np.array([464.0, 1e9, -1e9]), E4M3), np.array([448, 448, -448], F32))
    assert tie_points(E2M1).tolist() == [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]


def test_quartet_forward_absmax(ext, nprng):
    """Upstream's absmax ablation (Quartet quest=False, QuTLASS abs_max): scale 2^(floor(log2 amax) - 2) / 0.75,
    never clips, no trust mask; stored as codes of 0.75 x on the 2^k grid with prescale 0.75."""
    x = matrix(nprng, 16, 256, E2M1)
    x[5, :32] = nprng.standard_normal(32) * 2.0 ** 60
    x[6, :32] = nprng.standard_normal(32) * 2.0 ** -60
    x[7, 0] = x[7, 1:32].max() * 50.0                   # an outlier (would clip under QuEST)
    x[9, :] = x[9, :].astype(BF16).astype(F32)
    x = x.astype(F32)
    got = ext.quantize(x, "quartet", role="x", rotate=False, forward_quantizer="absmax")
    assert got["prescale"] == np.float32(0.75)
    assert np.asarray(got["mask"]).all()
    assert_same_bits(got["values"], quartet_backward(x), "quartet absmax forward")
