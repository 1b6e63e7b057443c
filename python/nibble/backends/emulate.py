"""Recipe quantizers written with torch tensor ops: the fast path for CUDA tensors.

Same rules as nibble's CPU reference (docs/spec.md §2-3, include/nibble/quant/*.hpp), same order of scaling and
rounding, but float summation orders differ (Hadamard as a matmul, QuEST's std) and random bits come
from torch's generator instead of Philox, so results match the reference closely, not bit for bit;
tests/python/test_module.py (test_emulated_layer_close_to_reference_layer) measures how closely. Every result says "torch-emulated".
"""
import math

import torch

# (mantissa bits, min normal exponent, max finite) of each element format.
FORMATS = {"e4m3": (3, -6, 448.0), "e5m2": (2, -14, 57344.0), "e2m1": (1, 0, 6.0)}
EMAX = {"e4m3": 8, "e2m1": 2}
QUEST_CLIP_PER_SIGMA = 0.48707976
QUARTET_PRESCALE = 0.75
QUARTET_RESCALE = 16.0 / 9.0
NVFP4_RHT_SIGN_MASK = 0xD7E8  # Transformer Engine's wgrad sign vector, bit j set -> -1


def floor_log2(a):
    """floor(log2 |a|) for finite non-zero a, exact (frexp: a = m 2^e, m in [0.5, 1))."""
    return torch.frexp(a)[1].to(torch.float32) - 1.0


def round_minifloat(v, fmt, stochastic=False, generator=None):
    """RNE (or stochastic) rounding of float32 v to an element format, satfinite; NaN stays NaN."""
    mbits, emin, fmax = FORMATS[fmt]
    a = v.abs()
    e = torch.clamp(floor_log2(torch.where(a > 0, a, torch.ones_like(a))), min=float(emin))
    ulp = torch.pow(2.0, e - mbits)
    t = a / ulp  # exact: ulp is a power of two
    if stochastic:
        u = torch.rand(t.shape, generator=generator, device=t.device, dtype=t.dtype)
        q = torch.floor(t + u)
    else:
        q = torch.round(t)  # half to even
    q = torch.clamp(q * ulp, max=fmax)
    return torch.where(torch.isnan(v), v, torch.copysign(q, v))


def _finite(x):
    return torch.isfinite(x) & (x > 0)


def per_tensor_encode_scale(fmax, amax, margin=0):
    """s_enc = fmax 2^-margin / amax; amax 0/inf/NaN -> 1 (float32 math, as the reference)."""
    amax = torch.as_tensor(amax, dtype=torch.float32)
    s = torch.full_like(amax, fmax * 2.0 ** -margin) / amax  # fmax 2^-margin is exact; full_like: no host copy
    s = torch.where(torch.isfinite(s), s, torch.full_like(s, torch.finfo(torch.float32).max))
    return torch.where(_finite(amax), s, torch.ones_like(s))


def delayed_encode_scale(history_max, previous, fmax, margin=0):
    """fp8-delayed's scale update (quant::AmaxHistory, Transformer Engine's DelayedScaling): s_enc = fmax 2^-margin /
    history_max when history_max is finite and > 0, else `previous` (a zero or non-finite history max keeps the
    scale). Tensors on one device; no host sync."""
    history_max = history_max.to(torch.float32)
    return torch.where(_finite(history_max), per_tensor_encode_scale(fmax, history_max, margin), previous)


def quantize_fp8_per_tensor(x, fmt, encode_scale, stochastic=False, generator=None):
    dec = 1.0 / encode_scale
    return round_minifloat(x * encode_scale, fmt, stochastic, generator) * dec


def fp8_block_scale_exponent(amax):
    """k of an fp8-block block (s_enc = 2^k, the largest with amax 2^k <= 448); 0 for amax 0/inf/NaN."""
    ok = _finite(amax)
    k = floor_log2(torch.where(ok, 448.0 / torch.where(ok, amax, torch.ones_like(amax)), torch.ones_like(amax)))
    k = torch.where(amax * torch.pow(2.0, k) > 448.0, k - 1, k).clamp(-127, 127)
    return torch.where(ok, k, torch.zeros_like(k))


def quantize_fp8_block(x, block_rows):
    """fp8-block: 1x128 (block_rows 1) or 128x128 blocks, E4M3, s_enc = 2^floor(log2(448/amax))."""
    r, c = x.shape
    g = x.reshape(r // block_rows, block_rows, c // 128, 128)
    k = fp8_block_scale_exponent(g.abs().amax(dim=(1, 3), keepdim=True))
    q = round_minifloat(g * torch.pow(2.0, k), "e4m3") * torch.pow(2.0, -k)
    return q.reshape(r, c)


def mx_scale_exponent(amax, fmt, rule="ocp"):
    """E8M0 exponent k of an MX block (None where the block holds NaN/inf). rule: ocp | te (alias round-up) |
    default (te for E4M3 = mxfp8, ocp for E2M1 = mxfp4, as quant::default_mx_scale_rule)."""
    if rule == "default":
        rule = "te" if fmt == "e4m3" else "ocp"
    safe = torch.where(amax > 0, amax, torch.ones_like(amax))
    ea = floor_log2(safe)
    if rule == "ocp":
        k = ea - EMAX[fmt]
    else:  # te: smallest k with amax <= fmax 2^k (TE's float product differs only where it is subnormal)
        fmax = FORMATS[fmt][2]
        k = torch.ceil(torch.log2(safe / fmax))
        k = torch.where(safe > fmax * torch.pow(2.0, k), k + 1, k)
        k = torch.where(safe <= fmax * torch.pow(2.0, k - 1), k - 1, k)
    k = torch.where(amax > 0, k, torch.full_like(k, -127.0))
    return k.clamp(-127, 127)


def quantize_mx(x, fmt, rule="ocp", stochastic=False, generator=None):
    r, c = x.shape
    g = x.reshape(r, c // 32, 32)
    amax = g.abs().amax(dim=2, keepdim=True)
    k = mx_scale_exponent(amax, fmt, rule)
    q = round_minifloat(g * torch.pow(2.0, -k), fmt, stochastic, generator) * torch.pow(2.0, k)
    q = torch.where(torch.isfinite(amax), q, torch.full_like(q, float("nan")))
    return q.reshape(r, c)


_HADAMARD_CACHE = {}


def hadamard_matrix(n, signs=None, device="cpu"):
    """(diag(signs) H_n) / sqrt(n): rows of x times it give (x * s) H. The unsigned matrix is built once per
    (n, device) and kept, so the GPU path does not copy it from the host at every call."""
    key = (n, str(torch.device(device)))
    h = _HADAMARD_CACHE.get(key)
    if h is None:
        h = torch.ones(1, 1, dtype=torch.float64)
        while h.shape[0] < n:
            h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
        h = (h / math.sqrt(n)).to(torch.float32).to(device)
        _HADAMARD_CACHE[key] = h
    if signs is not None:
        h = signs.to(device=h.device, dtype=torch.float32).reshape(n, 1) * h  # exact: signs are +-1
    return h


def rotate(x, h, inverse=False):
    """Block-wise rotation along the last dim by matrix h (forward x h, inverse x h^T)."""
    n = h.shape[0]
    shape = x.shape
    y = x.reshape(-1, n) @ (h.t() if inverse else h)
    return y.reshape(shape)


def nvfp4_signs(device):
    key = ("nvfp4-signs", str(torch.device(device)))
    if key not in _HADAMARD_CACHE:
        _HADAMARD_CACHE[key] = torch.tensor([-1.0 if (NVFP4_RHT_SIGN_MASK >> j) & 1 else 1.0 for j in range(16)],
                                            device=device)
    return _HADAMARD_CACHE[key]


def quantize_nvfp4(x, block_rows, stochastic=False, generator=None, rht=False):
    """nvfp4 (Transformer Engine's recipe, docs/recipes.md): S_enc = min(6*448/amax, FLT_MAX) (1 for amax 0 or
    inf), S_dec = 1/S_enc; UE4M3 block scale = RN(amax_b * (S_enc * fl(1/6))); elements E2M1(x * min(1/(d S_dec),
    FLT_MAX)). With rht the fixed-sign 16-point Hadamard is applied along columns first and its output rounded
    to BF16; returns values in that rotated domain."""
    if rht:
        x = rotate(x, hadamard_matrix(16, nvfp4_signs(x.device), x.device)).to(torch.bfloat16).float()
    r, c = x.shape
    fmax = torch.finfo(torch.float32).max
    amax = x.abs().amax()
    s_enc = (torch.full_like(amax, 6.0 * 448.0) / amax).clamp(max=fmax)
    s_enc = torch.where((amax == 0) | (s_enc == 0) | torch.isnan(amax), torch.ones_like(s_enc), s_enc)
    s_dec = torch.ones_like(s_enc) / s_enc
    g = x.reshape(r // block_rows, block_rows, c // 16, 16)
    bamax = g.abs().amax(dim=(1, 3), keepdim=True)
    sc = round_minifloat(bamax * (s_enc * torch.full_like(s_enc, 1.0 / 6.0)), "e4m3")  # UE4M3 == E4M3 here
    e = (torch.ones_like(sc) / (sc * s_dec)).clamp(max=fmax)
    q = round_minifloat(g * e, "e2m1", stochastic, generator)
    return ((q * sc) * s_dec).reshape(r, c)


def quest_forward(x, hadamard_size=32, rotate_on=True, quantizer="quest"):
    """Quartet forward: Hadamard (no signs) along columns, QuEST (or absmax) per 1x32 group.
    Returns (values in the rotated domain, trust mask as bool); absmax's values are 3/4 of it (prescale 0.75,
    so a GEMM of two absmax operands is multiplied by 16/9)."""
    if rotate_on:
        x = rotate(x, hadamard_matrix(hadamard_size, None, x.device))
    r, c = x.shape
    g = x.reshape(r, c // 32, 32)
    if quantizer == "absmax":
        # Upstream's ablation (quant::absmax_forward_group): the backward's 3/4-prescaled quantizer, nearest,
        # never clips, every element trusted; a NaN/inf group decodes to NaN (E8M0 0xFF), as the reference.
        amax = g.abs().amax(dim=2, keepdim=True)
        q = absmax_groups(g, amax)
        q = torch.where(torch.isfinite(amax), q, torch.full_like(q, float("nan")))
        return q.reshape(r, c), torch.ones(r, c, dtype=torch.bool, device=x.device)
    sigma = g.std(dim=2, unbiased=False, keepdim=True)
    k = floor_log2(QUEST_CLIP_PER_SIGMA * sigma + 1e-8).clamp(-127, 127)
    v = g * torch.pow(2.0, -k)
    mask = v.abs() < 6.0
    q = round_minifloat(v.clamp(-6.0, 6.0), "e2m1") * torch.pow(2.0, k)
    bad = ~torch.isfinite(sigma)
    q = torch.where(bad, torch.zeros_like(q), q)
    mask = mask & ~bad
    return q.reshape(r, c), mask.reshape(r, c)


def random_signs(n, generator, device):
    return (torch.randint(0, 2, (n,), generator=generator, device="cpu") * 2 - 1).to(torch.float32).to(device)


def quartet_backward(x, signs, hadamard_size=32, rotate_on=True, stochastic=False, generator=None):
    """Quartet backward quantizer: random-sign Hadamard along columns, k = floor(log2 amax) - 2,
    codes of 0.75 x 2^-k. Returns values in the rotated, prescaled domain (3/4 of the input)."""
    if rotate_on:
        x = rotate(x, hadamard_matrix(hadamard_size, signs, x.device))
    r, c = x.shape
    g = x.reshape(r, c // 32, 32)
    amax = g.abs().amax(dim=2, keepdim=True)
    q = absmax_groups(g, amax, stochastic, generator)
    q = torch.where(torch.isfinite(amax), q, torch.zeros_like(q))
    return q.reshape(r, c)


def absmax_groups(g, amax, stochastic=False, generator=None):
    """The 3/4-prescaled absmax quantizer of 1x32 groups g [..., 32] with amax [..., 1] (quant::quartet_backward_group):
    k = floor(log2 amax) - 2, codes E2M1((0.75 g) 2^-k) (below 6, never clipped); returns codes 2^k (about 3/4 of g;
    zeros for an all-zero group; the caller decides what a NaN/inf group becomes)."""
    k = torch.where(amax > 0, floor_log2(torch.where(amax > 0, amax, torch.ones_like(amax))) - 2,
                    torch.full_like(amax, -127.0)).clamp(min=-127)
    return round_minifloat((QUARTET_PRESCALE * g) * torch.pow(2.0, -k), "e2m1", stochastic, generator) * torch.pow(2.0, k)
