"""The mxfp8 and nvfp4 CUDA backend of nibble.torch (nibble.backends.decoded: nibble._C's MXFP8 / NVFP4 quantizers,
their exact BF16 decodes and cuBLASLt's BF16 GEMM; the exact emulation of docs/spec.md §4 on Hopper).

Without a GPU: the extension says whether the entry points were compiled, their argument checks (all but the
device one) run on CPU tensors, backend selection, and the Python glue runs against the CPU stand-in of the
kernels (fake_cuda_ext.py: the reference's quantized values): values and gradients equal the reference
backend's (both input dtypes; both MX scale rules; nvfp4's stochastic rounding with the reference's seeds over
several steps, and its Hadamard on the wgrad operands only), only the copies a gradient needs are made, paths
are labelled, bad shapes raise. With a GPU (and a CUDA build): every quantizer copy (all roles, both scale
rules, nearest and stochastic, FP32 and BF16 inputs) equals the CPU reference bit for bit, the BF16 decodes are
exact, and the layer equals the reference backend within the BF16 GEMMs' accumulation bounds.
"""
import numpy as np
import pytest
import torch

import nibble.torch as nt
from nibble import seeds
from nibble.backends import decoded
from conftest import forward_backward, randn
from fake_cuda_ext import install_standin, standin

ENTRY_POINTS = {"quantize_mxfp8_cuda", "decode_mxfp8_bf16_cuda", "quantize_nvfp4_cuda", "decode_nvfp4_bf16_cuda"}
T, I, O = 128, 256, 96
RECIPES = ("mxfp8", "nvfp4")
CASES = [("mxfp8", "ocp"), ("mxfp8", "round-up"), ("nvfp4", "ocp")]  # mx_scale_rule only matters for mxfp8


def rel(a, b):
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    return float((a - b).norm() / b.norm())


def ref_values(ext, t, recipe, role="x", rule="default", **kw):
    d = ext.quantize(t.detach().cpu().float().contiguous().numpy(), recipe, role, mx_scale_rule=rule, **kw)
    return torch.from_numpy(np.array(d["values"]))


def bf16_exact(t):
    return t.bfloat16().float()


def pair(rng, recipe, dtype=torch.float32, device="cpu", seed=5, i=I, o=O, **opts):
    """A cuda-backend layer and a reference-backend layer (CPU, float32) with the same parameters. The weight gets a
    per-row spread, so quantizing W along I or W^T along O gives different values (a mixed-up copy shows). mxfp8's
    kernel reads BF16, so its weights are BF16 values (the layer would round FP32 ones, and say so)."""
    cu = nt.Linear(i, o, recipe=recipe, backend="cuda", seed=seed, device=device, dtype=dtype, **opts)
    with torch.no_grad():
        w = randn(rng, o, i, scale=i ** -0.5)
        cu.weight.copy_(bf16_exact(w) if recipe == "mxfp8" else w)
        if recipe == "mxfp8":
            cu.bias.copy_(bf16_exact(cu.bias))
    ref = nt.Linear(i, o, recipe=recipe, backend="reference", seed=seed, **opts)
    ref.load_state_dict({k: v.detach().float().cpu() if v.is_floating_point() else v.cpu()
                         for k, v in cu.state_dict().items()})
    return cu, ref


def inputs(rng, recipe, dtype, t=T, i=I, o=O):
    x, gy = randn(rng, t, i), randn(rng, t, o)
    if recipe == "mxfp8":
        x, gy = bf16_exact(x), bf16_exact(gy)
    return x.to(dtype), gy.to(dtype)


@pytest.fixture
def fake(ext, monkeypatch):
    """The CPU stand-in as nibble's extension, and backend-cuda mxfp8 / nvfp4 layers routed to nibble.backends.decoded
    on CPU tensors (reference-backend layers stay on the reference)."""
    return install_standin(ext, monkeypatch, {r: decoded for r in RECIPES})


# ---------------------------------------------------------------------------------------------- CPU


def test_extension_reports_the_entry_points(ext):
    present = {n for n in ENTRY_POINTS if hasattr(ext, n)}
    assert present == (ENTRY_POINTS if ext.has_cuda else set()), present


def test_bindings_check_arguments_before_the_device(cuda_build_ext):
    ext = cuda_build_ext
    qm, dm = ext.quantize_mxfp8_cuda, ext.decode_mxfp8_bf16_cuda
    qn, dn = ext.quantize_nvfp4_cuda, ext.decode_nvfp4_bf16_cuda
    u8 = lambda *s: torch.zeros(*s, dtype=torch.uint8)  # noqa: E731
    g = lambda: torch.zeros(1)  # noqa: E731
    xb = torch.zeros(64, 128, dtype=torch.bfloat16)
    x = torch.zeros(64, 128)
    bf = lambda *s: torch.zeros(*s, dtype=torch.bfloat16)  # noqa: E731
    cases = [
        (lambda: qm(x, u8(64, 128), u8(64, 4)), r"quantize_mxfp8_cuda: x has dtype float32; expected bfloat16"),
        (lambda: qm(bf(40, 128), u8(40, 128), u8(40, 4)), r"x has shape \[40, 128\]; rows and cols must be positive "
                                                          r"multiples of 32"),
        (lambda: qm(bf(64, 256)[:, ::2], u8(64, 128), u8(64, 4)), r"x is not contiguous"),
        (lambda: qm(xb), r"neither the rowwise nor the colwise copy is requested"),
        (lambda: qm(xb, u8(64, 128)), r"pass codes and scales of a copy together"),
        (lambda: qm(xb, u8(64, 64), u8(64, 4)), r"rowwise_codes has shape \[64, 64\]; expected \[64, 128\]"),
        (lambda: qm(xb, colwise_codes=u8(128, 64), colwise_scales=u8(128, 4)),
         r"colwise_scales has shape \[128, 4\]; expected \[128, 2\]"),
        (lambda: qm(xb, u8(64, 128), u8(64, 4), scale_rule="floor"), r"scale_rule 'floor' is unknown"),
        (lambda: qm(xb, u8(64, 128), u8(64, 4), u8(128, 64), u8(128, 2)), r"quantize_mxfp8_cuda: x is on the CPU"),
        (lambda: dm(u8(64, 128), u8(64, 4), bf(128, 64)), r"out has shape \[128, 64\]; expected \[64, 128\]"),
        (lambda: dm(u8(64, 128), u8(64, 4), bf(128, 64), transpose_out=True), r"decode_mxfp8_bf16_cuda: codes is on"),
        (lambda: dm(u8(64, 128), u8(64, 4), torch.zeros(64, 128)), r"out has dtype float32; expected bfloat16"),
        (lambda: qn(x.double(), u8(64, 64), u8(64, 8), g()), r"quantize_nvfp4_cuda: x has dtype float64"),
        (lambda: qn(torch.zeros(64, 40), u8(64, 20), u8(64, 2), g()), r"x has shape \[64, 40\]; .*multiple of 16"),
        (lambda: qn(torch.zeros(40, 128), u8(40, 64), u8(40, 8), g(), u8(128, 20), u8(128, 2), g()),
         r"x has 40 rows; the colwise copy .* multiple of 16"),
        (lambda: qn(torch.zeros(40, 128), u8(40, 64), u8(40, 8), g(), block_rows=16),
         r"x has 40 rows; 16x16 weight blocks need a multiple of 16"),
        (lambda: qn(x, u8(64, 64), u8(64, 8), g(), block_rows=8), r"block_rows 8 is not supported"),
        (lambda: qn(x, u8(64, 64), u8(64, 8)), r"pass codes, scales and global_scale of a copy together"),
        (lambda: qn(x, u8(64, 64), u8(64, 8), g(), block_rows=16), r"rowwise_scales has shape \[64, 8\]; expected "
                                                                    r"\[4, 8\]"),
        (lambda: qn(x, u8(64, 64), u8(64, 8), torch.zeros(2)), r"rowwise_global_scale has shape \[2\]; expected \[1\]"),
        (lambda: qn(x, colwise_codes=u8(64, 64), colwise_scales=u8(64, 8), colwise_global_scale=g()),
         r"colwise_codes has shape \[64, 64\]; expected \[128, 32\]"),
        (lambda: (lambda s: qn(x, u8(64, 64), u8(64, 8), s, u8(128, 32), u8(128, 4), s))(g()),
         r"rowwise_global_scale and colwise_global_scale are the same float"),
        (lambda: qn(x, u8(64, 64), u8(64, 8), g(), u8(128, 32), u8(128, 4), g(), stochastic=True, seed=3),
         r"quantize_nvfp4_cuda: x is on the CPU"),
        (lambda: qn(xb, u8(64, 64), u8(4, 8), g(), block_rows=16), r"x is on the CPU"),  # bf16 passes DLPack
        (lambda: dn(u8(64, 64), u8(64, 8), bf(64, 128), block_rows=16),
         r"scales has shape \[64, 8\]; expected \[4, 8\]"),
        (lambda: dn(u8(64, 20), u8(64, 2), bf(64, 40)), r"codes has shape \[64, 20\] .*multiple of 16"),
        (lambda: dn(u8(64, 64), u8(64, 8), bf(64, 128)), r"decode_nvfp4_bf16_cuda: codes is on the CPU"),
    ]
    for call, msg in cases:
        with pytest.raises(ValueError, match=msg):
            call()


def test_backend_selection(ext):
    assert set(RECIPES) <= set(nt.CUDA_RECIPES)
    nt.Linear(128, 256, recipe="mxfp8", backend="cuda")  # accepted (runs on CUDA tensors)
    nt.Linear(48, 80, recipe="nvfp4", backend="cuda")
    with pytest.raises(ValueError, match="in_features 48 is not a multiple of 32, the block size of recipe mxfp8"):
        nt.Linear(48, 64, recipe="mxfp8", backend="cuda")
    with pytest.raises(ValueError, match="out_features 40 is not a multiple of 16, the block size of recipe nvfp4"):
        nt.Linear(64, 40, recipe="nvfp4", backend="cuda")
    with pytest.raises(ValueError, match="backend 'cuda' needs CUDA tensors, got cpu"):
        nt.Linear(64, 64, recipe="nvfp4", backend="cuda")(torch.randn(32, 64))
    layer = nt.Linear(64, 64, recipe="mxfp8")  # auto on CPU tensors: the reference
    layer(torch.randn(32, 64))
    assert layer.last_path.startswith("cpu-reference mxfp8")
    assert decoded.unsupported_reason(None).startswith("nibble._C is not built")
    if ext.has_cuda:
        assert decoded.unsupported_reason(ext) is None
    else:
        assert "without CUDA" in decoded.unsupported_reason(ext)

    class Old:  # a CUDA build from before bind_cuda_mx_nv.cpp
        has_cuda = True
    assert "no MXFP8 / NVFP4 CUDA bindings" in decoded.unsupported_reason(Old())


@pytest.mark.parametrize("recipe,rule", CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_layer_equals_reference_with_cpu_standin(recipe, rule, dtype, rng, ext, fake):
    cu, ref = pair(rng, recipe, dtype, mx_scale_rule=rule)
    for step in range(3):  # nvfp4: fresh stochastic-rounding seeds every step, as the reference's
        x, gy = inputs(rng, recipe, dtype)
        y, dx, dw, db = forward_backward(cu, x, gy)
        y_r, dx_r, dw_r, db_r = forward_backward(ref, x.float(), gy.float())
        assert (y.dtype, dx.dtype, dw.dtype, db.dtype) == (dtype,) * 4
        # The stand-in's quantized values are the reference's and its GEMMs run in float64: only the
        # reference's float32 GEMMs and (with BF16 tensors) the BF16 outputs differ.
        tol = 1e-6 if dtype == torch.float32 else 2.0 ** -8
        for name, a, b in (("y", y, y_r), ("dx", dx, dx_r), ("dw", dw, dw_r), ("db", db, db_r)):
            assert rel(a, b) < tol, (step, name, rel(a, b))
    fp, bp = cu.last_path, cu.last_backward_path
    assert fp.startswith(f"cuda {recipe} forward") and f": X fake {recipe}" in fp, fp
    assert "fprop GEMM emulated-exact (bf16)" in fp, fp
    converted = recipe == "mxfp8" and dtype == torch.float32  # its kernel reads BF16 (the values here are BF16's)
    assert ("(X float32 -> BF16, W float32 -> BF16: the MXFP8 kernel reads BF16)" in fp) == converted, fp
    assert bp.startswith(f"cuda {recipe} backward") and ": dY" in bp and f"fake {recipe}" in bp, bp
    assert "dgrad GEMM emulated-exact (bf16)" in bp and "wgrad GEMM emulated-exact (bf16)" in bp, bp
    if recipe == "nvfp4":
        assert fp.count("x s_A s_B (FP32 global scales)") == 1 and bp.count("x s_A s_B") == 2, (fp, bp)
    for g in fake.gemms:
        assert (g["a_dtype"], g["b_dtype"], g["a_scale_mode"], g["operands"]) == ("bf16", "bf16", "none",
                                                                                  "emulated-exact (bf16)"), g
        want = torch.float32 if recipe == "nvfp4" or dtype == torch.float32 else torch.bfloat16
        assert g["out_dtype"] == want, g


def test_nvfp4_calls_use_the_reference_seeds_and_hadamard_flags(rng, ext, fake):
    cu, _ = pair(rng, "nvfp4", seed=11)
    x, gy = inputs(rng, "nvfp4", torch.float32)
    fake.calls.clear()
    forward_backward(cu, x, gy)  # step 0
    sd, sw = seeds.mix(11, 0, 1), seeds.mix(11, 0, 2)
    quant = [c for c in fake.calls if c.startswith("nvfp4")]
    assert quant == ["nvfp4 1x16 row+col rht-col", "nvfp4 16x16 row+col", f"nvfp4 1x16 row+col sr {sd}/{sw} rht-col"], \
        quant  # dY and dY^T in one launch, each copy with its own seed
    assert "dY and dY^T (RHT), one launch" in cu.last_backward_path


def test_one_seed_for_both_dy_copies_would_show(rng, ext, fake):
    """Why dY^T has its own seed in the one launch: rounding it with the dgrad seed changes dW."""
    cu, ref = pair(rng, "nvfp4", seed=3)
    x, gy = inputs(rng, "nvfp4", torch.float32)
    _, _, dw_r, _ = forward_backward(ref, x, gy)
    sd = seeds.mix(3, 0, 1)
    dyt = ref_values(ext, gy.t(), "nvfp4", "dy", seed=sd, nvfp4_rht=True)
    xt = ref_values(ext, x.t(), "nvfp4", "x", nvfp4_rht=True)
    assert rel(dyt.double() @ xt.double().t(), dw_r) > 1e-3


def test_wrong_copy_would_show(rng, ext, fake):
    """The equality test can fail. mxfp8: W quantized along I (the forward's copy) instead of W^T along O changes
    dX. nvfp4 (whose 16x16 W blocks make W^T's copy W's transpose): wgrad operands without the Hadamard change dW."""
    # Under the ocp rule: with power-of-two scales that never clip (the default te rule) an E4M3 element
    # depends on its block only below E4M3's subnormal threshold (2^-15 of the block max), too rare to move dX.
    cu, ref = pair(rng, "mxfp8", mx_scale_rule="ocp")
    x, gy = inputs(rng, "mxfp8", torch.float32)
    _, dx_r, _, _ = forward_backward(ref, x, gy)
    wq_along_i, dyq = (ref_values(ext, ref.weight, "mxfp8", "w", rule="ocp"),
                       ref_values(ext, gy, "mxfp8", "dy", rule="ocp"))
    assert rel(dyq.double() @ wq_along_i.double(), dx_r) > 1e-3
    cu, ref = pair(rng, "nvfp4")
    x, gy = inputs(rng, "nvfp4", torch.float32)
    _, _, dw_r, _ = forward_backward(ref, x, gy)
    dyt = ref_values(ext, gy.t(), "nvfp4", "dy", seed=seeds.mix(5, 0, 2))
    assert rel(dyt.double() @ ref_values(ext, x.t(), "nvfp4", "x").double().t(), dw_r) > 1e-3


@pytest.mark.parametrize("recipe", RECIPES)
def test_only_the_copies_a_gradient_needs(recipe, rng, ext, fake):
    cu, _ = pair(rng, recipe)
    x, gy = inputs(rng, recipe, torch.float32)

    def copies():
        return [c.split(" sr")[0].split(" rht")[0].split(" ")[-1] for c in fake.calls if c.startswith(recipe)]

    fake.calls.clear()
    with torch.no_grad():
        cu(x)
    assert copies() == ["row"] * 2, fake.calls
    assert sum(c.startswith("decode") for c in fake.calls) == 2 and len(fake.gemms) == 1
    fake.calls.clear()
    forward_backward(cu, x, gy)
    assert copies() == ["row+col"] * 3, fake.calls  # nvfp4's dY: one launch, a seed per copy
    cu.weight.requires_grad_(False)  # frozen weight: no X^T, no wgrad; dY only row-wise
    fake.calls.clear()
    xx = x.clone().requires_grad_(True)
    cu(xx).backward(gy)
    assert copies() == ["row", "row+col", "row"], fake.calls
    assert "wgrad" not in cu.last_backward_path
    cu.weight.requires_grad_(True)  # input without gradient: no W^T, no dgrad; dY only column-wise
    fake.calls.clear()
    cu(x).backward(gy)
    assert copies() == ["row+col", "row", "col"], fake.calls
    assert "dgrad" not in cu.last_backward_path and cu.weight.grad is not None


def test_mxfp8_rounds_other_dtypes_to_bf16_and_says_so(rng, ext, fake):
    cu, ref = pair(rng, "mxfp8")
    x, gy = randn(rng, T, I), randn(rng, T, O)  # FP32 values that BF16 does not hold
    y, dx, dw, _ = forward_backward(cu, x, gy)
    assert "(X float32 -> BF16, W float32 -> BF16: the MXFP8 kernel reads BF16)" in cu.last_path, cu.last_path
    assert "(dY float32 -> BF16: the MXFP8 kernel reads BF16)" in cu.last_backward_path
    y_r, dx_r, dw_r, _ = forward_backward(ref, bf16_exact(x), bf16_exact(gy))  # what the kernels quantize
    assert rel(y, y_r) < 1e-6 and rel(dx, dx_r) < 1e-6 and rel(dw, dw_r) < 1e-6


@pytest.mark.parametrize("recipe", RECIPES)
def test_token_counts(recipe, rng, ext, fake):
    cu, ref = pair(rng, recipe)
    x, gy = inputs(rng, recipe, torch.float32, t=40)  # not a multiple of 32 (mxfp8) nor 16 (nvfp4)
    with torch.no_grad():
        assert rel(cu(x), ref(x)) < 1e-6  # inference: any number of tokens
    if recipe == "mxfp8":
        assert "40 rows padded to 64 for the kernel's 32-row tiles" in cu.last_path, cu.last_path
    block = 32 if recipe == "mxfp8" else 16
    with pytest.raises(ValueError, match=f"40 tokens is not a multiple of {block}"):
        cu(x)  # training with gradients (Linear's own check)
    cu.eval()
    with pytest.raises(ValueError, match=rf"40 tokens is not a multiple of {block}, .*needs X\^T in 1x{block} blocks"):
        cu(x)  # eval mode, but the weight's gradient is still wanted
    cu.weight.requires_grad_(False)
    xx, step = x.clone().requires_grad_(True), int(cu.step)  # the no-grad forward above was a training step
    cu(xx).backward(gy)  # dX alone: dY row-wise only, any number of tokens
    kw = dict(seed=seeds.mix(5, step, 1)) if recipe == "nvfp4" else {}
    wtq = ref_values(ext, ref.weight.t(), recipe, "w")
    dx_ref = ref_values(ext, gy, recipe, "dy", **kw).double() @ wtq.double().t()
    assert rel(xx.grad, dx_ref) < 1e-6 and "wgrad" not in cu.last_backward_path


@pytest.mark.parametrize("recipe", RECIPES)
def test_non_finite_input_names_layer_and_step(recipe, rng, ext, fake):
    cu, _ = pair(rng, recipe)
    cu.layer_name = "blocks.0.up"
    cu.options["check_finite"] = "sync"  # raises inside the pass, naming counts
    x, _ = inputs(rng, recipe, torch.float32)
    x[0, 0] = float("nan")
    with pytest.raises(nt.NonFiniteError, match=rf"step 0: .*layer 'blocks\.0\.up' \(recipe {recipe}, path cuda "
                                                rf"{recipe} forward"):
        cu(x)


# ---------------------------------------------------------------------------------------------- GPU


E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=torch.float64)


def e4m3_table():
    """Every E4M3 byte -> float64, independently of nibble: bias 7, 3 mantissa bits, S.1111.111 = NaN."""
    b = torch.arange(256)
    e, m = (b >> 3) & 15, (b & 7).double()
    mag = torch.where(e == 0, m * 2.0 ** -9, (1 + m / 8) * torch.pow(2.0, (e - 7).double()))
    mag = torch.where((b & 0x7F) == 0x7F, torch.full_like(mag, float("nan")), mag)
    return torch.where(b >= 128, -mag, mag)


E4M3 = e4m3_table()


def decode_mxfp8(codes, scales):
    """E4M3 codes [r, c] with E8M0 scales [r, c/32] -> float32 (2^(s - 127), 255 = NaN)."""
    v = E4M3[codes.cpu().long()]
    s = scales.cpu().long()
    k = torch.pow(2.0, (s - 127).double())
    k = torch.where(s == 255, torch.full_like(k, float("nan")), k)
    return (v * k.repeat_interleave(32, dim=1)).float()


def decode_nvfp4(codes, scales, global_scale, block_rows):
    """E2M1 codes [r, c/2] (low nibble = even column, bit 3 = sign), UE4M3 scales [r/block_rows, c/16] ->
    (code * block scale as float32, the same times the global scale in float32: the reference's value_at)."""
    c = codes.cpu().long()
    nib = torch.stack([c & 0xF, c >> 4], dim=2).reshape(c.shape[0], -1)
    v = torch.where(nib & 8 != 0, -E2M1[nib & 7], E2M1[nib & 7])
    sc = E4M3[scales.cpu().long()].repeat_interleave(block_rows, dim=0).repeat_interleave(16, dim=1)
    unscaled = (v * sc).float()  # exact: at most 6 significant bits
    return unscaled, unscaled * global_scale.cpu().float()


def same_bits(a, b):
    """Equal element by element, NaN matching NaN and the sign of zero included."""
    a, b = a.cpu(), b.cpu()
    nan = torch.isnan(a) & torch.isnan(b)
    return bool((nan | ((a == b) & (torch.signbit(a) == torch.signbit(b)))).all())


def sample_input(rng, rows, cols):
    """Random rows with per-row spread, plus an all-zero block, a block of tiny values and negative zeros."""
    x = randn(rng, rows, cols)
    x[0, :32] = 0.0
    x[1, 32:64] *= 2.0 ** -60
    x[2, :cols:7] = -0.0
    return x


def poisoned(*shape, dtype=torch.uint8):
    return torch.full(shape, 0xEE if dtype == torch.uint8 else float("nan"), dtype=dtype, device="cuda")


@pytest.mark.parametrize("stochastic", [False, True])
@pytest.mark.parametrize("rule", ("ocp", "round-up"))
def test_gpu_mxfp8_quantizer_and_decode_bit_exact(rule, stochastic, rng, cuda_ext):
    rows, cols, seed = 96, 320, 0x1234
    x = sample_input(rng, rows, cols).bfloat16()
    rounding = dict(rounding="stochastic" if stochastic else "nearest", seed=seed)
    want, want_t = ref_values(cuda_ext, x, "mxfp8", rule=rule, **rounding), \
        ref_values(cuda_ext, x.t(), "mxfp8", rule=rule, **rounding)
    rc, rs, cc, cs = poisoned(rows, cols), poisoned(rows, cols // 32), poisoned(cols, rows), poisoned(cols, rows // 32)
    cuda_ext.quantize_mxfp8_cuda(x.cuda(), rc, rs, cc, cs, scale_rule=rule, stochastic=stochastic, seed=seed)
    assert same_bits(decode_mxfp8(rc, rs), want) and same_bits(decode_mxfp8(cc, cs), want_t)
    for codes, scales, w in ((rc, rs, want), (cc, cs, want_t)):
        out = poisoned(*codes.shape, dtype=torch.bfloat16)
        cuda_ext.decode_mxfp8_bf16_cuda(codes, scales, out)
        assert same_bits(out.float(), w)  # exact: every value of these inputs is a normal BF16
        out_t = poisoned(codes.shape[1], codes.shape[0], dtype=torch.bfloat16)
        cuda_ext.decode_mxfp8_bf16_cuda(codes, scales, out_t, transpose_out=True)
        assert same_bits(out_t.float().t(), w)
    rc2, rs2 = poisoned(rows, cols), poisoned(rows, cols // 32)
    cuda_ext.quantize_mxfp8_cuda(x.cuda(), rc2, rs2, scale_rule=rule, stochastic=stochastic, seed=seed)
    assert torch.equal(rc2, rc) and torch.equal(rs2, rs)  # a row-wise copy alone: the same bytes


@pytest.mark.parametrize("role", ("x", "w", "dy"))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gpu_nvfp4_quantizer_and_decode_bit_exact(role, dtype, rng, cuda_ext):
    rows, cols, seed = 96, 320, 0x5EED
    x = sample_input(rng, rows, cols).to(dtype)
    br, rht = decoded.NVFP4_BLOCK_ROWS[role], decoded.NVFP4_COLWISE_RHT[role]
    kw = dict(seed=seed, rounding="stochastic" if role == "dy" else "nearest")
    copies = {"row": (x, False), "col": (x.t(), rht)}
    planes = {"row": (poisoned(rows, cols // 2), poisoned(rows // br, cols // 16), poisoned(1, dtype=torch.float32)),
              "col": (poisoned(cols, rows // 2), poisoned(cols // br, rows // 16), poisoned(1, dtype=torch.float32))}
    cuda_ext.quantize_nvfp4_cuda(x.cuda(), *planes["row"], *planes["col"], block_rows=br, stochastic=role == "dy",
                                 seed=seed, rowwise_rht=False, colwise_rht=rht)
    for name, (src, r) in copies.items():
        d = cuda_ext.quantize(src.float().contiguous().numpy(), "nvfp4", "w" if br == 16 else "x", nvfp4_rht=r, **kw)
        codes, scales, glob = planes[name]
        assert float(glob) == d["tensor_scale"], (name, float(glob), d["tensor_scale"])
        unscaled, values = decode_nvfp4(codes, scales, glob, br)
        assert same_bits(values, torch.from_numpy(np.array(d["values"]))), name
        out = poisoned(*unscaled.shape, dtype=torch.bfloat16)
        cuda_ext.decode_nvfp4_bf16_cuda(codes, scales, out, block_rows=br)
        assert same_bits(out.float(), unscaled), name  # exact, without the global scale


@pytest.mark.parametrize("recipe,rule", CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gpu_layer_matches_reference(recipe, rule, dtype, rng, cuda_ext):
    cu, ref = pair(rng, recipe, dtype, device="cuda", i=512, o=384, mx_scale_rule=rule)
    for step in range(2):
        x, gy = inputs(rng, recipe, dtype, t=256, i=512, o=384)
        y, dx, dw, db = forward_backward(cu, x.cuda(), gy.cuda())
        y_r, dx_r, dw_r, db_r = forward_backward(ref, x.float(), gy.float())
        assert y.is_cuda and (y.dtype, dx.dtype, dw.dtype, db.dtype) == (dtype,) * 4
        fp, bp = cu.last_path, cu.last_backward_path
        assert fp.startswith(f"cuda {recipe} forward") and "fprop GEMM emulated-exact (bf16)" in fp, fp
        assert "dgrad GEMM emulated-exact (bf16)" in bp and "wgrad GEMM emulated-exact (bf16)" in bp, bp
        # Forward element by element: bit-equal quantized operands, so only the BF16 GEMM's FP32 accumulation
        # (and for nvfp4 where the FP32 global scales multiply), plus the BF16 rounding of BF16 outputs.
        xq, wq = ref_values(cuda_ext, x, recipe, "x", rule), ref_values(cuda_ext, ref.weight, recipe, "w", rule)
        b = ref.bias.detach().double()
        y_ref = xq.double() @ wq.double().t() + b
        bound = 2.0 ** -14 * (xq.double().abs() @ wq.double().abs().t()) + 2.0 ** -20 * (y_ref.abs() + b.abs())
        if dtype == torch.bfloat16:
            bound += 2.0 ** -7 * (y_ref.abs() + b.abs())
        err = (y.double().cpu() - y_ref).abs()
        assert bool((err <= bound).all()), (step, float((err / bound).max()))
        tight = 2.0 ** -6 if dtype == torch.bfloat16 else 2.0 ** -12
        for name, p, q in (("dx", dx, dx_r), ("dw", dw, dw_r), ("db", db, db_r)):
            assert rel(p, q) < tight, (step, name, rel(p, q))


@pytest.mark.parametrize("recipe", RECIPES)
def test_gpu_auto_picks_the_kernels(recipe, rng, cuda_ext):
    layer = nt.Linear(256, 128, recipe=recipe, device="cuda")
    layer(randn(rng, 64, 256).cuda()).sum().backward()
    assert layer.last_path.startswith(f"cuda {recipe} forward"), layer.last_path
    assert layer.last_backward_path.startswith(f"cuda {recipe} backward"), layer.last_backward_path
    with torch.no_grad():
        layer(randn(rng, 40, 256).cuda())  # inference: any number of tokens
    assert layer.last_path.startswith(f"cuda {recipe} forward")


def test_gpu_bad_inputs_raise_clearly(cuda_ext):
    dev = "cuda"
    x = torch.zeros(64, 128, device=dev)
    codes = torch.zeros(64, 64, dtype=torch.uint8, device=dev)
    scales = torch.zeros(64, 8, dtype=torch.uint8, device=dev)
    with pytest.raises(ValueError, match="rowwise_global_scale is on the CPU"):
        cuda_ext.quantize_nvfp4_cuda(x, codes, scales, torch.zeros(1))
    with pytest.raises(ValueError, match=r"x has dtype float32; expected bfloat16"):
        cuda_ext.quantize_mxfp8_cuda(x, torch.zeros(64, 128, dtype=torch.uint8, device=dev), scales[:, :4].contiguous())
    for recipe in RECIPES:
        layer = nt.Linear(128, 64, recipe=recipe, backend="cuda", device=dev)
        with pytest.raises(ValueError, match="tokens is not a multiple of"):
            layer(torch.randn(40, 128, device=dev))
        with pytest.raises(ValueError, match="backend 'cuda' needs CUDA tensors"):
            layer(torch.randn(32, 128))
