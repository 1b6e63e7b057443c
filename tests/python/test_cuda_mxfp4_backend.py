"""The mxfp4 CUDA backend of nibble.torch (nibble.backends.mxfp4: nibble._C's MXFP4 quantizers, the exact E4M3
re-encoding / BF16 decode and cuBLASLt).

Without a GPU: the extension says whether the MXFP4 entry points were compiled, their argument checks (all
but the device one) run on CPU tensors, backend selection, and the Python glue runs against the CPU
stand-in of the kernels (fake_cuda_ext.py: the reference's quantized values): values and gradients equal
the reference backend's for both scale rules and both input dtypes, only the copies a gradient needs are
made, rows spread over more than 14 binades take the 1x128 / BF16 paths and say so, paths are labelled,
bad shapes raise. With a GPU (and a CUDA build): both quantizers' planes equal the CPU reference bit for
bit (nearest and stochastic rounding, both scale rules, FP32 and BF16 inputs), and the layer equals the
reference backend within the GEMMs' accumulation bounds.
"""
import numpy as np
import pytest
import torch

import nibble.torch as nt
from nibble.backends import mxfp4
from conftest import forward_backward, randn
from fake_cuda_ext import install_standin, standin

MX_ENTRY_POINTS = {"quantize_mxfp4_cuda", "quantize_mxfp4_rowcol_cuda"}
FP8_SPLIT_ACC = 2.0 ** -9  # tests/kernels/test_gemm_accuracy.cu: Hopper FP8 split accumulation, of sum |a b|
T, I, O = 128, 256, 96
RULES = ("ocp", "round-up")


def rel(a, b):
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    return float((a - b).norm() / b.norm())


def ref_values(ext, t, rule="ocp", **kw):
    d = ext.quantize(t.detach().cpu().float().contiguous().numpy(), "mxfp4", "x", mx_scale_rule=rule, **kw)
    return torch.from_numpy(np.array(d["values"]))


def pair(rng, dtype=torch.float32, device="cpu", seed=5, i=I, o=O, **opts):
    """A cuda-backend layer and a reference-backend layer (CPU, float32) with the same parameters. The weight
    gets a per-row spread (nn.Linear's uniform init puts every 32-block of W and of W^T in the same binade,
    where quantizing W along I or along O gives the same values and a mixed-up copy would not show)."""
    cu = nt.Linear(i, o, recipe="mxfp4", backend="cuda", seed=seed, device=device, dtype=dtype, **opts)
    with torch.no_grad():
        cu.weight.copy_(randn(rng, o, i, scale=i ** -0.5))
    ref = nt.Linear(i, o, recipe="mxfp4", backend="reference", seed=seed, **opts)
    ref.load_state_dict({k: v.detach().float().cpu() if v.is_floating_point() else v.cpu()
                         for k, v in cu.state_dict().items()})
    return cu, ref


def spread_input(rng, pattern, t=64, i=256):
    """Rows whose 32-groups span ~40 binades: across 128-groups (halves) or inside them (alternate)."""
    x = randn(rng, t, i)
    g = x.view(t, i // 32, 32)
    big = torch.arange(i // 32) < (i // 64) if pattern == "halves" else torch.arange(i // 32) % 2 == 0
    g[:, big] *= 2.0 ** 20
    g[:, ~big] *= 2.0 ** -20
    return x


@pytest.fixture
def fake(ext, monkeypatch):
    """The CPU stand-in as nibble's extension, and backend-cuda layers routed to nibble.backends.mxfp4 on CPU tensors
    (reference-backend layers stay on the reference)."""
    return install_standin(ext, monkeypatch, {"mxfp4": mxfp4})


# ---------------------------------------------------------------------------------------------- CPU


def test_extension_reports_mxfp4_entry_points(ext):
    present = {n for n in MX_ENTRY_POINTS if hasattr(ext, n)}
    assert present == (MX_ENTRY_POINTS if ext.has_cuda else set()), present


def test_mxfp4_bindings_check_arguments_before_the_device(cuda_build_ext):
    ext = cuda_build_ext
    q, rc = ext.quantize_mxfp4_cuda, ext.quantize_mxfp4_rowcol_cuda
    u8 = lambda *s: torch.zeros(*s, dtype=torch.uint8)  # noqa: E731
    x = torch.zeros(64, 128)
    cases = [
        (lambda: q(x.double(), u8(64, 64), u8(64, 4)), r"quantize_mxfp4_cuda: x has dtype float64; expected float32 "
                                                       r"or bfloat16"),
        (lambda: q(torch.zeros(64, 48), u8(64, 24), u8(64, 1)), r"x has shape \[64, 48\]; .*multiple of 32"),
        (lambda: q(torch.zeros(64, 256)[:, ::2], u8(64, 64), u8(64, 4)), r"x is not contiguous"),
        (lambda: q(torch.zeros(64 * 128 + 1)[1:].view(64, 128), u8(64, 64), u8(64, 4)), r"x is not 16-byte aligned"),
        (lambda: q(x, u8(64, 128), u8(64, 4)), r"codes has shape \[64, 128\]; expected \[64, 64\]"),
        (lambda: q(x, u8(64, 64), u8(64, 8)), r"scales has shape \[64, 8\]; expected \[64, 4\]"),
        (lambda: q(x, u8(64, 64), torch.zeros(64, 4)), r"scales has dtype float32; expected uint8"),
        (lambda: q(x, u8(64, 64), u8(64, 4), scale_rule="floor"), r"scale_rule 'floor' is unknown"),
        (lambda: q(x, u8(64, 64), u8(64, 4)), r"quantize_mxfp4_cuda: x is on the CPU; the CUDA kernels need"),
        (lambda: q(x.bfloat16(), u8(64, 64), u8(64, 4)), r"x is on the CPU"),  # bf16 passes DLPack
        (lambda: rc(torch.zeros(48, 128), u8(48, 64), u8(48, 4)), r"x has 48 rows; the colwise copy .* multiple of 32"),
        (lambda: rc(x), r"neither the rowwise nor the colwise copy is requested"),
        (lambda: rc(x, u8(64, 64)), r"pass codes and scales of a copy together"),
        (lambda: rc(x, colwise_codes=u8(64, 64), colwise_scales=u8(64, 4)),
         r"colwise_codes has shape \[64, 64\]; expected \[128, 32\]"),
        (lambda: rc(x, u8(64, 64), u8(64, 4), u8(128, 32), u8(128, 2), stochastic=True, seed=3),
         r"quantize_mxfp4_rowcol_cuda: x is on the CPU"),
    ]
    for call, msg in cases:
        with pytest.raises(ValueError, match=msg):
            call()


def test_backend_selection(ext):
    assert "mxfp4" in nt.CUDA_RECIPES
    nt.Linear(128, 256, recipe="mxfp4", backend="cuda")  # accepted (runs on CUDA tensors)
    with pytest.raises(ValueError, match="in_features 48 is not a multiple of 32, the block size of recipe mxfp4"):
        nt.Linear(48, 64, recipe="mxfp4", backend="cuda")
    with pytest.raises(ValueError, match="backend 'cuda' needs CUDA tensors, got cpu"):
        nt.Linear(64, 64, recipe="mxfp4", backend="cuda")(torch.randn(32, 64))
    layer = nt.Linear(64, 64, recipe="mxfp4")  # auto on CPU tensors: the reference
    layer(torch.randn(32, 64))
    assert layer.last_path.startswith("cpu-reference mxfp4")
    assert mxfp4.unsupported_reason(None).startswith("nibble._C is not built")
    if ext.has_cuda:
        assert mxfp4.unsupported_reason(ext) is None
    else:
        assert "without CUDA" in mxfp4.unsupported_reason(ext)

    class Old:  # a CUDA build from before bind_cuda_fp4.cpp
        has_cuda = True
    assert "no MXFP4 CUDA bindings" in mxfp4.unsupported_reason(Old())


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_layer_equals_reference_with_cpu_standin(dtype, rule, rng, ext, fake):
    cu, ref = pair(rng, dtype, mx_scale_rule=rule)
    x, gy = randn(rng, T, I).to(dtype), randn(rng, T, O).to(dtype)
    for step in range(2):
        y, dx, dw, db = forward_backward(cu, x, gy)
        y_r, dx_r, dw_r, db_r = forward_backward(ref, x.float(), gy.float())
        assert (y.dtype, dx.dtype, dw.dtype, db.dtype) == (dtype,) * 4
        # The stand-in's quantized values are the reference's and its GEMMs run in float64: only the
        # reference's float32 GEMMs and (with BF16 tensors) the BF16 outputs differ.
        tol = 1e-6 if dtype == torch.float32 else 2.0 ** -8
        for name, a, b in (("y", y, y_r), ("dx", dx, dx_r), ("dw", dw, dw_r), ("db", db, db_r)):
            assert rel(a, b) < tol, (step, name, rel(a, b))
    assert cu.last_path.startswith("cuda mxfp4 forward: X fake mxfp4 row+col tile; W fake mxfp4 row+col tile"), \
        cu.last_path
    assert "fprop GEMM emulated-exact (fp8)" in cu.last_path and "spread" not in cu.last_path
    bp = cu.last_backward_path
    assert bp.startswith("cuda mxfp4 backward: dY fake mxfp4 row+col tile"), bp
    assert "dgrad GEMM emulated-exact (fp8)" in bp and "wgrad GEMM emulated-exact (fp8)" in bp
    named = "te" if rule == "round-up" else rule  # the layer passes one name per rule
    assert all(c.startswith(f"mxfp4 {named} ") for c in fake.calls if c.startswith("mxfp4")), fake.calls
    for g in fake.gemms:
        assert (g["a_scale_mode"], g["b_scale_mode"], g["operands"]) == ("outer_vec", "outer_vec",
                                                                         "emulated-exact (fp8)"), g
        assert g["out_dtype"] == (torch.bfloat16 if dtype == torch.bfloat16 else torch.float32), g


def test_wrong_copy_would_show(rng, ext, fake):
    """The test above can fail: quantizing W along I (instead of W^T along O) for dgrad changes dX."""
    cu, ref = pair(rng)
    x, gy = randn(rng, T, I), randn(rng, T, O)
    _, dx_r, _, _ = forward_backward(ref, x, gy)
    wq_along_i = ref_values(ext, ref.weight)  # the forward's copy, not the reference's W^T requantization
    dyq = ref_values(ext, gy)
    assert rel(dyq.double() @ wq_along_i.double(), dx_r) > 1e-3


def test_only_the_copies_a_gradient_needs(rng, ext, fake):
    cu, _ = pair(rng)
    x, gy = randn(rng, T, I), randn(rng, T, O)

    def quantizer_calls():
        return [c for c in fake.calls if c.startswith("mxfp4")]

    fake.calls.clear()
    with torch.no_grad():
        cu(x)
    assert quantizer_calls() == ["mxfp4 ocp row"] * 2, fake.calls  # the thread-per-group kernel, no X^T, W^T
    fake.calls.clear()
    forward_backward(cu, x, gy)
    assert quantizer_calls() == ["mxfp4 ocp row+col"] * 3, fake.calls
    # Frozen weight: no X^T, no wgrad; dY only row-wise.
    cu.weight.requires_grad_(False)
    fake.calls.clear()
    xx = x.clone().requires_grad_(True)
    cu(xx).backward(gy)
    assert quantizer_calls() == ["mxfp4 ocp row", "mxfp4 ocp row+col", "mxfp4 ocp row"], fake.calls
    assert "wgrad" not in cu.last_backward_path and not any("wgrad" in c for c in fake.calls)
    # Input without gradient: no W^T, no dgrad; dY only column-wise.
    cu.weight.requires_grad_(True)
    fake.calls.clear()
    cu(x).backward(gy)
    assert quantizer_calls() == ["mxfp4 ocp row+col", "mxfp4 ocp row", "mxfp4 ocp col"], fake.calls
    assert "dgrad" not in cu.last_backward_path and cu.weight.grad is not None


@pytest.mark.parametrize("pattern,expect", [("halves", "re-encoded per 1x128 group (VEC128)"),
                                            ("alternate", "decoded to BF16 (exact) for a BF16 GEMM")])
def test_violating_rows_fall_back_with_cpu_standin(pattern, expect, rng, ext, fake):
    cu, ref = pair(rng, i=256, o=64, gemm_check="sync")
    x, gy = spread_input(rng, pattern), randn(rng, 64, 64)
    y, dx, dw, _ = forward_backward(cu, x, gy)
    assert expect in cu.last_path and "64 rows of X spread over more than 14 binades" in cu.last_path, cu.last_path
    y_r, dx_r, dw_r, _ = forward_backward(ref, x, gy)
    assert rel(y, y_r) < 1e-6 and rel(dx, dx_r) < 1e-6 and rel(dw, dw_r) < 1e-6
    mode = "vec128" if pattern == "halves" else "none"
    assert (fake.gemms[0]["a_scale_mode"], fake.gemms[0]["b_scale_mode"]) == (mode, mode), fake.gemms[0]


def test_deferred_gemm_check_reports_violations_a_pass_later_and_turns_sync(rng, ext, fake):
    # gemm_check="deferred" (the default): no counter is read before the GEMMs; the counts go to the layer's
    # device flags, and the layer's next pass warns (naming layer, step and passes), records them in
    # inexact_passes and from then on checks synchronously, so that pass is exact again.
    cu, ref = pair(rng, i=256, o=64)
    cu.layer_name = "blocks.1.up"
    assert cu.options["gemm_check"] == "deferred"
    clean, gy = randn(rng, 64, 256), randn(rng, 64, 64)
    forward_backward(cu, clean, gy)
    assert "gemm_check='deferred'" in cu.last_path and "gemm_check='deferred'" in cu.last_backward_path
    assert fake.gemms[0]["a_scale_mode"] == "outer_vec"
    forward_backward(cu, clean, gy)  # polls the first pass's flags: nothing to report
    assert cu.inexact_passes == [] and cu.options["gemm_check"] == "deferred"
    x = spread_input(rng, "alternate")
    forward_backward(cu, x, gy)  # step 2: the row GEMM ran although 64 rows of X violate
    assert "gemm_check='deferred'" in cu.last_path
    with pytest.warns(RuntimeWarning, match=r"layer 'blocks\.1\.up' \(recipe mxfp4\): from step 2, \d+ operand rows "
                                            r"of the fprop(/dgrad)?(/wgrad)? GEMM"):
        y, dx, dw, _ = forward_backward(cu, x, gy)
    assert cu.inexact_passes[0][0] == 2 and "fprop" in cu.inexact_passes[0][1] and cu.inexact_passes[0][2] >= 64
    assert cu.options["gemm_check"] == "sync" and "decoded to BF16 (exact)" in cu.last_path
    for _ in range(3):  # ref catches up to cu's step count (the seeds do not matter for mxfp4)
        y_r, dx_r, dw_r, _ = forward_backward(ref, x, gy)
    assert rel(y, y_r) < 1e-6 and rel(dx, dx_r) < 1e-6 and rel(dw, dw_r) < 1e-6


def test_fp32_output_refused_by_cublaslt_falls_back_to_bf16_output(rng, ext, fake):
    fake.refuse_fp32_output = True
    cu, ref = pair(rng)
    x = randn(rng, T, I)
    with torch.no_grad():
        y, y_r = cu(x), ref(x)
    assert y.dtype == torch.float32 and "cuBLASLt has no FP32 output here: BF16 output" in cu.last_path
    assert 0 < rel(y, y_r) < 2.0 ** -7


def test_token_counts(rng, ext, fake):
    cu, ref = pair(rng)
    x = randn(rng, 40, I)  # inference: any number of tokens (the row-wise kernel has no row constraint)
    with torch.no_grad():
        assert rel(cu(x), ref(x)) < 1e-6
    with pytest.raises(ValueError, match="40 tokens is not a multiple of 32"):
        cu(x)  # training with gradients (Linear's own check)
    cu.eval()
    with pytest.raises(ValueError, match=r"40 tokens is not a multiple of 32, .*needs X\^T in 1x32 blocks"):
        cu(x)  # eval mode, but the weight's gradient is still wanted
    cu.weight.requires_grad_(False)
    xx, gy = x.clone().requires_grad_(True), randn(rng, 40, O)
    cu(xx).backward(gy)  # dX alone: dY row-wise only, any number of tokens
    dx_ref = ref_values(ext, gy).double() @ ref_values(ext, ref.weight.t()).double().t()
    assert rel(xx.grad, dx_ref) < 1e-6 and "wgrad" not in cu.last_backward_path


def test_non_finite_input_names_layer_and_step(rng, ext, fake):
    cu, _ = pair(rng)
    cu.layer_name = "blocks.0.up"
    cu.options["check_finite"] = "sync"  # raises inside the pass, naming counts
    x = randn(rng, T, I)
    x[0, 0] = float("nan")
    with pytest.raises(nt.NonFiniteError, match=r"step 0: .*layer 'blocks\.0\.up' \(recipe mxfp4, path cuda "
                                                r"mxfp4 forward"):
        cu(x)


# ---------------------------------------------------------------------------------------------- GPU


E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=torch.float64)


def decode_planes(codes, scales):
    """MXFP4 planes -> float32 values, independently of the kernels: low nibble = even column, bit 3 = sign,
    E8M0 scale 2^(s - 127), 255 = NaN."""
    c = codes.cpu().to(torch.int64)
    nib = torch.stack([c & 0xF, c >> 4], dim=2).reshape(c.shape[0], -1)
    mag = E2M1[nib & 7]
    v = torch.where(nib & 8 != 0, -mag, mag)
    s = scales.cpu().to(torch.int64)
    k = torch.pow(2.0, (s - 127).double())
    k = torch.where(s == 255, torch.full_like(k, float("nan")), k)
    return (v * k.repeat_interleave(32, dim=1)).float()


def same_bits(a, b):
    """Equal element by element, NaN matching NaN and the sign of zero included."""
    a, b = a.cpu(), b.cpu()
    nan = torch.isnan(a) & torch.isnan(b)
    return bool((nan | ((a == b) & (torch.signbit(a) == torch.signbit(b)))).all())


def mx_input(rng, rows, cols):
    """Random rows with per-row spread, plus one all-zero group, one group of tiny values and negative zeros."""
    x = randn(rng, rows, cols)
    x[0, :32] = 0.0
    x[1, 32:64] *= 2.0 ** -126
    x[2, :cols:7] = -0.0
    return x


@pytest.mark.parametrize("stochastic", [False, True])
@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gpu_quantizers_bit_exact(dtype, rule, stochastic, rng, cuda_ext):
    rows, cols, seed = 96, 320, 0x1234
    x = mx_input(rng, rows, cols).to(dtype)
    d = x.cuda()
    kw = dict(scale_rule=rule, stochastic=stochastic, seed=seed)
    rounding = dict(rounding="stochastic" if stochastic else "nearest", seed=seed)
    want, want_t = ref_values(cuda_ext, x, rule, **rounding), ref_values(cuda_ext, x.t(), rule, **rounding)

    def planes(r, c):
        return (torch.full((r, c // 2), 0xEE, dtype=torch.uint8, device="cuda"),  # poisoned: unwritten bytes show
                torch.full((r, c // 32), 0xEE, dtype=torch.uint8, device="cuda"))

    rc, rs = planes(rows, cols)
    path = cuda_ext.quantize_mxfp4_cuda(d, rc, rs, **kw)
    assert "quantize_mxfp4" in path and ("ocp" if rule == "ocp" else "te") in path
    assert same_bits(decode_planes(rc, rs), want)
    out = torch.empty(rows, cols, dtype=torch.bfloat16, device="cuda")
    cuda_ext.decode_mxfp4_bf16_cuda(rc, rs, out)
    assert same_bits(out.float(), want)
    rc2, rs2 = planes(rows, cols)
    cc, cs = planes(cols, rows)
    path = cuda_ext.quantize_mxfp4_rowcol_cuda(d, rc2, rs2, cc, cs, **kw)
    assert "row-wise and column-wise copies" in path, path
    assert torch.equal(rc2, rc) and torch.equal(rs2, rs)  # the tile kernel's row-wise copy: the same bytes
    assert same_bits(decode_planes(cc, cs), want_t)
    cc2, cs2 = planes(cols, rows)
    cuda_ext.quantize_mxfp4_rowcol_cuda(d, colwise_codes=cc2, colwise_scales=cs2, **kw)
    assert torch.equal(cc2, cc) and torch.equal(cs2, cs)


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gpu_layer_matches_reference(dtype, rule, rng, cuda_ext):
    cu, ref = pair(rng, dtype, device="cuda", i=512, o=384, mx_scale_rule=rule)
    x, gy = randn(rng, 256, 512).to(dtype), randn(rng, 256, 384).to(dtype)
    for step in range(2):
        y, dx, dw, db = forward_backward(cu, x.cuda(), gy.cuda())
        y_r, dx_r, dw_r, db_r = forward_backward(ref, x.float(), gy.float())
        assert y.is_cuda and (y.dtype, dx.dtype, dw.dtype, db.dtype) == (dtype,) * 4
        assert cu.last_path.startswith("cuda mxfp4 forward") and "fprop GEMM emulated-exact (fp8)" in cu.last_path
        assert "outer_vec" in cu.last_path, cu.last_path
        bp = cu.last_backward_path
        assert "dgrad GEMM emulated-exact (fp8)" in bp and "wgrad GEMM emulated-exact (fp8)" in bp, bp
        # Forward element by element: bit-equal quantized operands, so only the FP8 GEMM's split
        # accumulation differs (plus the BF16 rounding of BF16 outputs and of the bias add).
        xq, wq = ref_values(cuda_ext, x, rule), ref_values(cuda_ext, ref.weight, rule)
        b = ref.bias.detach().double()
        y_ref = xq.double() @ wq.double().t() + b
        bound = FP8_SPLIT_ACC * (xq.double().abs() @ wq.double().abs().t()) + 2.0 ** -20 * (y_ref.abs() + b.abs())
        bf16_out = dtype == torch.bfloat16 or "BF16 output" in cu.last_path + bp
        if bf16_out:
            bound += 2.0 ** -7 * (y_ref.abs() + b.abs())
        err = (y.double().cpu() - y_ref).abs()
        assert bool((err <= bound).all()), (step, float((err / bound).max()))
        tight = 2.0 ** -5 if bf16_out else 2.0 ** -7
        for name, p, q in (("dx", dx, dx_r), ("dw", dw, dw_r), ("db", db, db_r)):
            assert rel(p, q) < tight, (step, name, rel(p, q))


@pytest.mark.parametrize("pattern,expect", [("halves", "re-encoded per 1x128 group (VEC128)"),
                                            ("alternate", "decoded to BF16 (exact) for a BF16 GEMM")])
def test_gpu_violating_rows_take_the_exact_fallbacks(pattern, expect, rng, cuda_ext):
    # gemm_check="sync": the fallback is taken in the same pass (the deferred default reports it a pass later).
    cu, ref = pair(rng, device="cuda", i=256, o=128, gemm_check="sync")
    x, gy = spread_input(rng, pattern), randn(rng, 64, 128)
    y, dx, dw, _ = forward_backward(cu, x.cuda(), gy.cuda())
    assert expect in cu.last_path and "64 rows of X spread" in cu.last_path, cu.last_path
    y_r, dx_r, dw_r, _ = forward_backward(ref, x, gy)
    xq, wq = ref_values(cuda_ext, x), ref_values(cuda_ext, ref.weight)
    y_ref = xq.double() @ wq.double().t() + ref.bias.detach().double()
    bound = FP8_SPLIT_ACC * (xq.double().abs() @ wq.double().abs().t()) + 2.0 ** -20 * y_ref.abs()
    bf16_out = "BF16 output" in cu.last_path + cu.last_backward_path or "BF16 GEMM" in cu.last_path
    if bf16_out:
        bound += 2.0 ** -8 * y_ref.abs()
    assert bool(((y.double().cpu() - y_ref).abs() <= bound).all())
    tight = 2.0 ** -5 if bf16_out else 2.0 ** -7
    assert rel(dx, dx_r) < tight and rel(dw, dw_r) < tight, (rel(dx, dx_r), rel(dw, dw_r))


def test_gpu_auto_picks_the_mxfp4_kernels(rng, cuda_ext):
    layer = nt.Linear(256, 128, recipe="mxfp4", device="cuda")
    x = randn(rng, 64, 256).cuda()
    layer(x).sum().backward()
    assert layer.last_path.startswith("cuda mxfp4 forward"), layer.last_path
    assert layer.last_backward_path.startswith("cuda mxfp4 backward"), layer.last_backward_path
    with torch.no_grad():
        layer(randn(rng, 40, 256).cuda())  # inference: any number of tokens
    assert layer.last_path.startswith("cuda mxfp4 forward")


def test_gpu_bad_inputs_raise_clearly(cuda_ext):
    dev = "cuda"
    x = torch.zeros(64, 128, device=dev)
    codes = torch.zeros(64, 64, dtype=torch.uint8, device=dev)
    scales = torch.zeros(64, 4, dtype=torch.uint8, device=dev)
    with pytest.raises(ValueError, match="codes is on the CPU"):
        cuda_ext.quantize_mxfp4_cuda(x, codes.cpu(), scales)
    with pytest.raises(ValueError, match=r"x has shape \[64, 48\]"):
        cuda_ext.quantize_mxfp4_cuda(torch.zeros(64, 48, device=dev), codes, scales)
    layer = nt.Linear(128, 64, recipe="mxfp4", backend="cuda", device=dev)
    with pytest.raises(ValueError, match="tokens is not a multiple of 32"):
        layer(torch.randn(40, 128, device=dev))
    with pytest.raises(ValueError, match="backend 'cuda' needs CUDA tensors"):
        layer(torch.randn(32, 128))
