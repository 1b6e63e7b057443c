"""The FP8 CUDA backend of nibble.torch (nibble.backends.fp8: fp8-current, fp8-delayed, fp8-block on nibble._C's
FP8 kernels and cuBLASLt).

Without a GPU: the extension says whether the FP8 entry points were compiled, their argument checks (all
but the device one) run on CPU tensors, backend selection, and the Python glue runs against the CPU
stand-in of the kernels (fake_cuda_ext.py: the reference's quantized values, real scales and amax
histories): values and gradients equal the reference backend's, fp8-delayed's amax history evolves as the
reference's and survives a state_dict round trip between backends, only the copies a gradient needs are
made, paths are labelled. With a GPU (and a CUDA build): every kernel's quantized values equal the CPU
reference bit for bit, and the layer equals the reference backend within the GEMMs' accumulation bounds.
"""
import numpy as np
import pytest
import torch

import nibble.torch as nt
from nibble.backends import common, fp8
from conftest import forward_backward, randn
from fake_cuda_ext import install_standin, standin

FP8_RECIPES = ("fp8-current", "fp8-delayed", "fp8-block")
FP8_ENTRY_POINTS = {"amax_bf16_cuda", "quantize_fp8_current_cuda", "cast_transpose_fp8_cuda",
                    "quantize_fp8_delayed_cuda", "update_fp8_delayed_scale_cuda", "quantize_fp8_block_1x128_cuda",
                    "quantize_fp8_block_128x128_cuda", "fp8_block_scale_count"}
FP8_FAST_ACC, FP8_SPLIT_ACC = 2.0 ** -8, 2.0 ** -9  # tests/kernels/test_gemm_accuracy.cu, of sum |a b|
T, I, O = 256, 384, 128


def rel(a, b):
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    return float((a - b).norm() / b.norm())


def bf16_valued(t):
    """t rounded to BF16 but kept in t's dtype: the FP8 kernels read BF16, so these inputs reach them exactly."""
    return t.bfloat16().to(t.dtype)


def ref_values(ext, t, recipe, role, **kw):
    d = ext.quantize(t.detach().cpu().float().contiguous().numpy(), recipe, role, **kw)
    return torch.from_numpy(np.array(d["values"]))


def pair(recipe, dtype=torch.float32, device="cpu", seed=5, i=I, o=O, **opts):
    """A cuda-backend layer and a reference-backend layer (CPU, float32) with the same BF16-valued parameters."""
    cu = nt.Linear(i, o, recipe=recipe, backend="cuda", seed=seed, device=device, dtype=dtype, **opts)
    with torch.no_grad():
        cu.weight.copy_(bf16_valued(cu.weight))
        cu.bias.copy_(bf16_valued(cu.bias))
    ref = nt.Linear(i, o, recipe=recipe, backend="reference", seed=seed, **opts)
    ref.load_state_dict({k: v.detach().float().cpu() if v.is_floating_point() else v.cpu()
                         for k, v in cu.state_dict().items()})
    return cu, ref


@pytest.fixture
def fake(ext, monkeypatch):
    """The CPU stand-in as nibble's extension, and backend-cuda layers routed to nibble.backends.fp8 on CPU tensors
    (reference-backend layers stay on the reference)."""
    return install_standin(ext, monkeypatch, {r: fp8 for r in fp8.RECIPES})


# ---------------------------------------------------------------------------------------------- CPU


def test_extension_reports_fp8_entry_points(ext):
    present = {n for n in FP8_ENTRY_POINTS if hasattr(ext, n)}
    assert present == (FP8_ENTRY_POINTS if ext.has_cuda else set()), present


def test_fp8_bindings_check_arguments_before_the_device(cuda_build_ext):
    ext = cuda_build_ext
    x, u8 = torch.zeros(32, 64, dtype=torch.bfloat16), lambda *s: torch.zeros(*s, dtype=torch.uint8)
    sc = torch.zeros(3, 4)
    amax, s, si = sc[0, :1], sc[1, :1], sc[2, :1]
    cur = ext.quantize_fp8_current_cuda
    cases = [
        (lambda: cur(x.float(), u8(32, 64), None, amax, s, si, format="e4m3"), r"x has dtype float32; expected bfloat16"),
        (lambda: cur(torch.zeros(32, 40, dtype=torch.bfloat16), None, None, amax, s, si, format="e4m3"),
         r"x has shape \[32, 40\]; rows and cols must be positive multiples of 16"),
        (lambda: cur(x, u8(64, 32), None, amax, s, si, format="e4m3"), r"rowwise has shape \[64, 32\]; expected \[32, 64\]"),
        (lambda: cur(x, None, u8(32, 64), amax, s, si, format="e4m3"), r"colwise has shape \[32, 64\]; expected \[64, 32\]"),
        (lambda: cur(x, None, None, amax, s, si, format="e4m3"), r"rowwise and colwise are both None"),
        (lambda: cur(x, u8(32, 64), None, amax, s, torch.zeros(5)[1:2], format="e4m3"), r"scale_inv is not 16-byte aligned"),
        (lambda: cur(x, u8(32, 64), None, amax, s, si, format="e4m2"), r"format 'e4m2' is unknown"),
        (lambda: cur(x, u8(32, 64), None, amax, s, si, format="e5m2"), r"x is on the CPU; the CUDA kernels need"),
        (lambda: ext.quantize_fp8_delayed_cuda(x, torch.zeros(4, 2), s, si, u8(32, 64), step=0, format="e4m3"),
         r"amax_history has 2 dimensions"),
        (lambda: ext.quantize_fp8_block_1x128_cuda(x, u8(32, 64), None, torch.zeros(31), None),
         r"scale_inv_rowwise has shape \[31\]; expected \[32\]"),
        (lambda: ext.quantize_fp8_block_1x128_cuda(x, u8(32, 64), None, None, None),
         r"pass scale_inv_rowwise exactly when its copy is requested"),
        (lambda: ext.quantize_fp8_block_128x128_cuda(x, None, u8(64, 32), None, torch.zeros(4), layout="tiles"),
         r"layout 'tiles' is unknown"),
        (lambda: ext.amax_bf16_cuda(x, torch.zeros(2)), r"amax has shape \[2\]; expected \[1\]"),
    ]
    for call, msg in cases:
        with pytest.raises(ValueError, match=msg):
            call()
    # Scale counts of the cuBLASLt layouts (scale_layout.hpp): the operand a copy is, padded to 4 floats.
    assert ext.fp8_block_scale_count("1x128", 100, 256) == 2 * 100
    assert ext.fp8_block_scale_count("1x128", 100, 256, "colwise") == 1 * 256
    assert ext.fp8_block_scale_count("1x128", 101, 256) == 2 * 104
    assert ext.fp8_block_scale_count("128x128", 384, 640) == 3 * 8
    assert ext.fp8_block_scale_count("128x128", 384, 640, "colwise") == 5 * 4
    assert ext.fp8_block_scale_count("1x128", 32, 64, layout="grid") == 32
    with pytest.raises(ValueError, match=r"block '1x32' is unknown"):
        ext.fp8_block_scale_count("1x32", 32, 64)


def test_backend_selection(ext):
    for recipe in FP8_RECIPES:
        nt.Linear(128, 256, recipe=recipe, backend="cuda")  # accepted (runs on CUDA tensors)
    with pytest.raises(ValueError, match="backend 'cuda' runs recipes quartet, fp8-current, fp8-delayed, fp8-block"):
        nt.Linear(64, 64, recipe="bf16", backend="cuda")
    with pytest.raises(ValueError, match="in_features 40 is not a multiple of 16"):
        nt.Linear(40, 64, recipe="fp8-current", backend="cuda")
    with pytest.raises(ValueError, match="backend 'cuda' needs CUDA tensors, got cpu"):
        nt.Linear(64, 64, recipe="fp8-delayed", backend="cuda")(torch.randn(32, 64))
    assert fp8.unsupported_reason(None).startswith("nibble._C is not built")
    if ext.has_cuda:
        assert fp8.unsupported_reason(ext, (256, 128, 64)) is None
        assert fp8.unsupported_reason(ext, (40, 128, 72)) == (
            "tokens 40, out_features 72 not a multiple of 16 (the FP8 kernels and cuBLASLt's FP8 GEMMs need whole "
            "16-element rows)")
    else:
        assert "without CUDA" in fp8.unsupported_reason(ext, (256, 128, 64))


# The GEMMs each recipe runs: (A dtype, B dtype, A scale mode, B scale mode) per pass (docs/spec.md §2 and §4).
GEMMS = {"fp8-current": {"fprop": ("e4m3", "e4m3", "per_tensor", "per_tensor"),
                         "dgrad": ("e5m2", "e4m3", "per_tensor", "per_tensor"),
                         "wgrad": ("e5m2", "e4m3", "per_tensor", "per_tensor")},
         "fp8-block": {"fprop": ("e4m3", "e4m3", "vec128", "blk128x128"),
                       "dgrad": ("e4m3", "e4m3", "vec128", "blk128x128"),
                       "wgrad": ("e4m3", "e4m3", "vec128", "vec128")}}
GEMMS["fp8-delayed"] = GEMMS["fp8-current"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("recipe", FP8_RECIPES)
def test_layer_equals_reference_with_cpu_standin(recipe, dtype, rng, ext, fake):
    cu, ref = pair(recipe, dtype)
    x, gy = bf16_valued(randn(rng, T, I)).to(dtype), bf16_valued(randn(rng, T, O)).to(dtype)
    for step in range(2):  # fp8-delayed: the first step (scale 1), then the history's
        y, dx, dw, db = forward_backward(cu, x, gy)
        y_r, dx_r, dw_r, db_r = forward_backward(ref, x.float(), gy.float())
        assert (y.dtype, dx.dtype, dw.dtype, db.dtype) == (dtype,) * 4
        # The stand-in's quantized values are the reference's and its GEMMs run in float64: only the
        # reference's float32 GEMMs and (with BF16 tensors) the BF16 outputs differ.
        tol = 1e-6 if dtype == torch.float32 else 2.0 ** -8
        for name, a, b in (("y", y, y_r), ("dx", dx, dx_r), ("dw", dw, dw_r), ("db", db, db_r)):
            assert rel(a, b) < tol, (step, name, rel(a, b))
    assert cu.last_path.startswith(f"cuda {recipe} forward") and "fprop GEMM native [fake" in cu.last_path
    assert ("X float32 -> BF16, W float32 -> BF16: the FP8 kernels read BF16" in cu.last_path) == \
        (dtype == torch.float32), cu.last_path
    assert cu.last_backward_path.startswith(f"cuda {recipe} backward"), cu.last_backward_path
    assert "dgrad GEMM native" in cu.last_backward_path and "wgrad GEMM native" in cu.last_backward_path
    if recipe == "fp8-delayed":
        te = "delayed scaling, first step: scale 1 (Transformer Engine)"
        assert te in cu.last_path and te in cu.last_backward_path, cu.last_path
        torch.testing.assert_close(cu.amax_history, ref.amax_history, rtol=0, atol=0)
        torch.testing.assert_close(cu.scale, ref.scale, rtol=0, atol=0)
        assert not torch.equal(cu.scale, torch.ones(3))  # the second step's scales came from the history
    for g in fake.gemms:
        assert (g["a_dtype"], g["b_dtype"], g["a_scale_mode"], g["b_scale_mode"]) == GEMMS[recipe][g["pass_"]], g
        assert g["accumulation"] == "default" and g["operands"] == "native"  # TE: fast fprop, split dgrad/wgrad
        assert g["out_dtype"] == (torch.bfloat16 if dtype == torch.bfloat16 else torch.float32), g


def test_float32_inputs_are_rounded_to_bf16_first(rng, ext, fake):
    cu, ref = pair("fp8-current")
    x = randn(rng, T, I)  # not BF16-valued
    with torch.no_grad():
        y = cu(x)
        y_bf16 = ref(bf16_valued(x))
        y_f32 = ref(x)
    assert rel(y, y_bf16) < 1e-6 < rel(y, y_f32)
    assert "X float32 -> BF16" in cu.last_path


def test_fp8_delayed_history_matches_reference_and_round_trips(rng, ext, fake):
    cu, ref = pair("fp8-delayed", window=3, margin=1)
    gy = bf16_valued(randn(rng, T, O))
    for s in (1.0, 8.0, 0.5, 0.25, 2.0):  # more steps than the window: old amaxes drop out
        x = bf16_valued(randn(rng, T, I, scale=s))
        y, dx, dw, _ = forward_backward(cu, x, gy)
        y_r, dx_r, dw_r, _ = forward_backward(ref, x, gy)
        assert rel(y, y_r) < 1e-6 and rel(dx, dx_r) < 1e-6 and rel(dw, dw_r) < 1e-6
        for k in ("amax_history", "amax_filled", "scale", "step"):
            assert torch.equal(getattr(cu, k), getattr(ref, k)), (s, k, getattr(cu, k), getattr(ref, k))
    assert float(cu.amax_history[0, -1]) == float(x.abs().max()) and int(cu.amax_filled[0]) == 3
    # Evaluation reads the X and W histories without adding to them, as the reference does.
    before = cu.amax_history.clone()
    cu.eval()
    ref.eval()
    with torch.no_grad():
        x = bf16_valued(randn(rng, T, I, scale=30.0))
        assert rel(cu(x), ref(x)) < 1e-6
    assert torch.equal(cu.amax_history, before) and "eval: not recorded" in cu.last_path
    cu.train()
    # state_dict round trip across backends: the reference continues from the cuda layer's state and
    # the other way round, step for step.
    ref2 = nt.Linear(I, O, recipe="fp8-delayed", backend="reference", window=3, margin=1)
    ref2.load_state_dict(cu.state_dict())
    cu2, _ = pair("fp8-delayed", window=3, margin=1, seed=9)
    cu2.load_state_dict(ref.state_dict())
    x = bf16_valued(randn(rng, T, I, scale=0.1))
    outs = [forward_backward(m, x, gy) for m in (cu, ref2, cu2)]
    for a in outs[1:]:
        assert all(rel(p, q) < 1e-6 for p, q in zip(a, outs[0]))
    assert torch.equal(cu.amax_history, ref2.amax_history) and torch.equal(cu2.amax_history, ref2.amax_history)
    assert torch.equal(cu.scale, ref2.scale) and torch.equal(cu2.scale, ref2.scale)
    # A fresh layer (empty history, scale 1) quantizes this small x differently: the state mattered. Equal states
    # agree to < 1e-6 above; different scales move y by FP8 rounding differences, ~1e-3 and down to
    # 6e-4 (NIBBLE_TEST_SEED=106, which failed the earlier bound of 1e-3), so the bound is 1e-5.
    fresh, _ = pair("fp8-delayed", window=3, margin=1)
    fresh.load_state_dict({k: v for k, v in cu.state_dict().items() if k in ("weight", "bias")}, strict=False)
    with torch.no_grad():
        assert rel(fresh(x), outs[0][0]) > 1e-5
    assert "first step: scale 1" in fresh.last_path and torch.equal(fresh.scale, torch.ones(3))


def test_fp8_delayed_te_reads_nothing_back(rng, ext, fake, monkeypatch):
    # The default first step (scale 1) and kept scales are decided on the device: no host read of amax_filled.
    reads = []
    real = fp8._read_filled
    monkeypatch.setattr(fp8, "_read_filled", lambda layer: reads.append(layer) or real(layer))
    cu, ref = pair("fp8-delayed", window=3)
    gy = bf16_valued(randn(rng, T, O))
    for s in (1.0, 4.0):
        x = bf16_valued(randn(rng, T, I, scale=s))
        for a, b in zip(forward_backward(cu, x, gy), forward_backward(ref, x, gy)):
            assert rel(a, b) < 1e-6, s
    assert reads == [] and torch.equal(cu.scale, ref.scale)


def test_fp8_delayed_own_amax_reads_amax_filled_back_only_until_each_history_is_known(rng, ext, fake, monkeypatch):
    # delayed_first_step="own_amax": the host sync of reading amax_filled happens until every role has recorded
    # once; load_state_dict (which may bring empty histories) makes the layer read it again, and the own-amax
    # first step applies.
    reads = []
    real = fp8._read_filled
    monkeypatch.setattr(fp8, "_read_filled", lambda layer: reads.append(layer) or real(layer))
    cu, ref = pair("fp8-delayed", window=3, margin=1, delayed_first_step="own_amax")
    gy = bf16_valued(randn(rng, T, O))
    for s in (1.0, 4.0, 0.5):
        x = bf16_valued(randn(rng, T, I, scale=s))
        for a, b in zip(forward_backward(cu, x, gy), forward_backward(ref, x, gy)):
            assert rel(a, b) < 1e-6, s
        if s == 1.0:
            assert "this step: own amax" in cu.last_path and "this step: own amax" in cu.last_backward_path
    assert len(reads) == 2, "one read in the first forward (x, w), one in the first backward (dy)"
    assert "first step: own amax" in cu.last_path and "this step" not in cu.last_path
    assert torch.equal(cu.amax_history, ref.amax_history) and torch.equal(cu.amax_filled, ref.amax_filled)
    empty = dict(cu.state_dict(), amax_history=torch.zeros_like(cu.amax_history),
                 amax_filled=torch.zeros_like(cu.amax_filled))
    cu.load_state_dict(empty)
    ref.load_state_dict(empty)
    x = bf16_valued(randn(rng, T, I, scale=0.1))
    for a, b in zip(forward_backward(cu, x, gy), forward_backward(ref, x, gy)):
        assert rel(a, b) < 1e-6
    assert "this step: own amax" in cu.last_path and len(reads) == 4
    assert torch.equal(cu.amax_history, ref.amax_history) and torch.equal(cu.scale, ref.scale)


def test_non_finite_amax_stays_in_its_slot_and_the_scale_holds(rng, ext, fake):
    # Transformer Engine's rule: the inf is recorded as it is, and while it is in the window the history max is
    # non-finite, so the scale stays what it was; once the window has moved past it, the history decides again.
    cu, ref = pair("fp8-delayed", window=2, check_finite=False)
    x, gy = bf16_valued(randn(rng, T, I)), bf16_valued(randn(rng, T, O))
    for m in (cu, ref):
        forward_backward(m, x, gy)
        forward_backward(m, x, gy)
    held = cu.scale.clone()
    assert float(held[0]) != 1.0 and torch.equal(held, ref.scale)
    bad = x.clone()
    bad[3, 5] = float("inf")
    small = bf16_valued(randn(rng, T, I, scale=1e-3))
    for step, xs in enumerate((bad, small, small, small)):
        with torch.no_grad():
            assert rel(cu(xs), ref(xs)) < 1e-6, step
        assert torch.equal(cu.amax_history, ref.amax_history) and torch.equal(cu.scale, ref.scale), step
        if step == 0:
            assert float(cu.amax_history[0, -1]) == float("inf")
        if step in (1, 2):  # the inf is in the window: the x scale is the one from before it
            assert float(cu.scale[0]) == float(held[0]), step
    assert float(cu.scale[0]) > 100 * float(held[0])  # inf gone: the small inputs' amaxes set the scale


@pytest.mark.parametrize("recipe", FP8_RECIPES)
def test_only_the_copies_a_gradient_needs(recipe, rng, ext, fake):
    cu, _ = pair(recipe)
    x, gy = bf16_valued(randn(rng, T, I)), bf16_valued(randn(rng, T, O))

    def quantizer_calls():
        return [c for c in fake.calls if c.startswith(("fp8-", "cast"))]

    row_col = "1x128 row+col" if recipe == "fp8-block" else "row+col"
    fake.calls.clear()
    with torch.no_grad():
        cu(x)
    assert all(c.endswith(" row") for c in quantizer_calls()), fake.calls  # no transposed copies
    fake.calls.clear()
    forward_backward(cu, x, gy)
    assert all(c.endswith("row+col") for c in quantizer_calls()) and len(quantizer_calls()) == 3, fake.calls
    assert row_col in quantizer_calls()[0]
    # Frozen weight: no X^T, no wgrad; dY only row-wise.
    cu.weight.requires_grad_(False)
    fake.calls.clear()
    xx = x.clone().requires_grad_(True)
    cu(xx).backward(gy)
    q = quantizer_calls()
    assert q[0].endswith(" row") and q[1].endswith("row+col") and q[2].endswith(" row"), q
    assert "wgrad" not in cu.last_backward_path and not any("wgrad" in c for c in fake.calls)
    # Input without gradient: no W^T, no dgrad; dY only column-wise.
    cu.weight.requires_grad_(True)
    fake.calls.clear()
    cu(x).backward(gy)
    q = quantizer_calls()
    assert q[0].endswith("row+col") and q[1].endswith(" row") and q[2].endswith(" col"), q
    assert "dgrad" not in cu.last_backward_path and cu.weight.grad is not None


def test_fp32_output_refused_by_cublaslt_falls_back_to_bf16_output(rng, ext, fake):
    fake.refuse_fp32_output = True
    cu, ref = pair("fp8-block")
    x = bf16_valued(randn(rng, T, I))
    with torch.no_grad():
        y, y_r = cu(x), ref(x)
    assert y.dtype == torch.float32 and "cuBLASLt has no FP32 output here: BF16 output" in cu.last_path
    assert 0 < rel(y, y_r) < 2.0 ** -7
    assert common._NO_FP32_OUTPUT == {"vec128 x blk128x128"}


def test_non_finite_input_names_layer_and_step(rng, ext, fake):
    cu, _ = pair("fp8-current")
    cu.layer_name = "blocks.0.up"
    cu.options["check_finite"] = "sync"  # raises inside the pass, naming counts
    x = bf16_valued(randn(rng, T, I))
    x[0, 0] = float("nan")
    with pytest.raises(nt.NonFiniteError, match=r"step 0: .*layer 'blocks\.0\.up' \(recipe fp8-current, path cuda "
                                                r"fp8-current forward"):
        cu(x)


# ---------------------------------------------------------------------------------------------- GPU


def decode_fp8(codes, fmt):
    dt = getattr(torch, "float8_e4m3fn" if fmt == "e4m3" else "float8_e5m2", None)
    if dt is None:
        pytest.skip("this torch has no float8 dtypes to decode FP8 codes with")
    return codes.view(dt).float().cpu()


def expand_scales(scales, mode, rows, k):
    from fake_cuda_ext import scale_index
    return scales.cpu().reshape(-1)[scale_index(mode, rows, k)]


@pytest.mark.parametrize("fmt,role", [("e4m3", "x"), ("e5m2", "dy")])
def test_gpu_fp8_current_bit_exact(fmt, role, rng, cuda_ext):
    x = randn(rng, 96, 320).bfloat16()
    d = x.cuda()
    row, col = (torch.empty(*s, dtype=torch.uint8, device="cuda") for s in ((96, 320), (320, 96)))
    sc = torch.empty(3, 4, device="cuda")
    path = cuda_ext.quantize_fp8_current_cuda(d, row, col, sc[0, :1], sc[1, :1], sc[2, :1], format=fmt)
    s_dec = sc[2, :1].cpu()
    assert "fp8-current" in path
    assert torch.equal(decode_fp8(row, fmt) * s_dec, ref_values(cuda_ext, x, "fp8-current", role))
    assert torch.equal(decode_fp8(col, fmt) * s_dec, ref_values(cuda_ext, x.t(), "fp8-current", role))
    assert float(sc[0, 0]) == float(x.float().abs().max())


def test_gpu_fp8_delayed_bit_exact_and_records_amax(rng, cuda_ext):
    hist_host = torch.tensor([3.0, 0.5, 11.0, 0.0])
    hist = hist_host.cuda()
    x = randn(rng, 64, 128).bfloat16()
    d = x.cuda()
    row, col = torch.empty(64, 128, dtype=torch.uint8, device="cuda"), torch.empty(128, 64, dtype=torch.uint8, device="cuda")
    sc = torch.empty(3, 4, device="cuda")
    cuda_ext.update_fp8_delayed_scale_cuda(hist, sc[1, :1], sc[2, :1], step=2, format="e4m3", margin=1)
    cuda_ext.quantize_fp8_delayed_cuda(d, hist, sc[1, :1], sc[2, :1], row, col, step=3, format="e4m3")
    want = ref_values(cuda_ext, x, "fp8-delayed", "x", amax_history=hist_host.numpy(), window=4, margin=1)
    assert torch.equal(decode_fp8(row, "e4m3") * sc[2, :1].cpu(), want)
    assert torch.equal(decode_fp8(col, "e4m3") * sc[2, :1].cpu(), want.t())
    assert hist.cpu().tolist() == [3.0, 0.5, 11.0, float(x.float().abs().max())]


@pytest.mark.parametrize("block", ["1x128", "128x128"])
def test_gpu_fp8_block_bit_exact(block, rng, cuda_ext):
    x = randn(rng, 256, 384).bfloat16()
    d = x.cuda()
    mode, role = ("blk128x128", "w") if block == "128x128" else ("vec128", "x")
    row, col = torch.empty(256, 384, dtype=torch.uint8, device="cuda"), torch.empty(384, 256, dtype=torch.uint8, device="cuda")
    rs, cs = (torch.full((cuda_ext.fp8_block_scale_count(block, 256, 384, c),), float("nan"), device="cuda")
              for c in ("rowwise", "colwise"))
    fn = cuda_ext.quantize_fp8_block_128x128_cuda if block == "128x128" else cuda_ext.quantize_fp8_block_1x128_cuda
    fn(d, row, col, rs, cs)
    got_r = decode_fp8(row, "e4m3") * expand_scales(rs, mode, 256, 384)
    got_c = decode_fp8(col, "e4m3") * expand_scales(cs, mode, 384, 256)
    assert torch.equal(got_r, ref_values(cuda_ext, x, "fp8-block", role))
    assert torch.equal(got_c, ref_values(cuda_ext, x.t(), "fp8-block", role))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("recipe", FP8_RECIPES)
def test_gpu_layer_matches_reference(recipe, dtype, rng, cuda_ext):
    cu, ref = pair(recipe, dtype, device="cuda")
    x, gy = bf16_valued(randn(rng, T, I)), bf16_valued(randn(rng, T, O))
    w, b = ref.weight.detach().double(), ref.bias.detach().double()
    for step in range(2):  # fp8-delayed: the first step (scale 1), then the history's
        y, dx, dw, db = forward_backward(cu, x.to(dtype).cuda(), gy.to(dtype).cuda())
        y_r, dx_r, dw_r, db_r = forward_backward(ref, x, gy)
        assert y.is_cuda and (y.dtype, dx.dtype, dw.dtype, db.dtype) == (dtype,) * 4
        assert cu.last_path.startswith(f"cuda {recipe} forward") and "fprop GEMM native" in cu.last_path
        assert "dgrad GEMM native" in cu.last_backward_path and "wgrad GEMM native" in cu.last_backward_path
        # Forward element by element: the same quantized operands (bit-equal on BF16 values: the kernel
        # tests above), so only the GEMM's accumulation differs: fast for fprop (TE's default; the block
        # modes run split), of sum |xq wq| <= 1.5 sum |x w|; plus the BF16 rounding of BF16 outputs.
        y_ref = y_r.double()
        bound = FP8_FAST_ACC * 1.5 * (x.double().abs() @ w.abs().t()) + 2.0 ** -20 * y_ref.abs()
        bf16_out = dtype == torch.bfloat16 or "BF16 output" in cu.last_path + cu.last_backward_path
        if bf16_out:
            bound += 2.0 ** -7 * (y_ref.abs() + b.abs())
        err = (y.double().cpu() - y_ref).abs()
        assert bool((err <= bound).all()), (step, float((err / bound).max()))
        # Gradients: split accumulation (FP32 promotion) on the same operands.
        tight = 2.0 ** -5 if bf16_out else 2.0 ** -7
        for name, p, q in (("dx", dx, dx_r), ("dw", dw, dw_r), ("db", db, db_r)):
            assert rel(p, q) < tight, (step, name, rel(p, q))
    if recipe == "fp8-delayed":
        assert torch.equal(cu.amax_history.cpu(), ref.amax_history) and torch.equal(cu.amax_filled.cpu(), ref.amax_filled)
        assert torch.equal(cu.scale.cpu(), ref.scale)


def test_gpu_fp8_delayed_state_dict_round_trip_with_reference(rng, cuda_ext):
    cu, ref = pair("fp8-delayed", device="cuda", window=4)
    gy = bf16_valued(randn(rng, T, O))
    for s in (1.0, 5.0, 0.3):
        x = bf16_valued(randn(rng, T, I, scale=s))
        forward_backward(cu, x.cuda(), gy.cuda())
        forward_backward(ref, x, gy)
    assert torch.equal(cu.amax_history.cpu(), ref.amax_history)
    back = nt.Linear(I, O, recipe="fp8-delayed", backend="reference", window=4)
    back.load_state_dict({k: v.cpu() for k, v in cu.state_dict().items()})
    x = bf16_valued(randn(rng, T, I, scale=0.1))
    a, b = forward_backward(cu, x.cuda(), gy.cuda()), forward_backward(back, x, gy)
    assert all(rel(p, q) < 2.0 ** -7 for p, q in zip(a, b))
    assert torch.equal(cu.amax_history.cpu(), back.amax_history) and torch.equal(cu.scale.cpu(), back.scale)


def test_gpu_update_keeps_the_scale_pair_on_a_zero_or_non_finite_history(cuda_ext):
    for bad in (0.0, float("nan"), float("inf")):
        hist = torch.tensor([0.0, bad, 0.0, 0.0], device="cuda")
        sc = torch.full((3, 4), 3.0, device="cuda")
        sc[2, 0] = 1.0 / 3.0
        cuda_ext.update_fp8_delayed_scale_cuda(hist, sc[1, :1], sc[2, :1], step=3, format="e4m3")
        assert float(sc[1, 0]) == 3.0 and float(sc[2, 0]) == float(torch.tensor(1.0) / 3.0), bad


@pytest.mark.parametrize("first_step", ["te", "own_amax"])
def test_gpu_fp8_delayed_scale_state_matches_reference(first_step, rng, cuda_ext):
    # Transformer Engine's rules on the device: scale 1 (or the own amax) first, the history's after, the
    # previous scale kept through an all-zero window and while an inf is in it, step for step as the reference.
    cu, ref = pair("fp8-delayed", device="cuda", window=2, check_finite=False, delayed_first_step=first_step)
    bad = bf16_valued(randn(rng, T, I))
    bad[1, 2] = float("inf")
    zeros = torch.zeros(T, I)
    for step, x in enumerate([bf16_valued(randn(rng, T, I)), zeros, zeros, zeros, bad,
                              bf16_valued(randn(rng, T, I, scale=1e-3)), bf16_valued(randn(rng, T, I, scale=1e-3))]):
        with torch.no_grad():
            y, y_r = cu(x.cuda()), ref(x)
        finite = torch.isfinite(y_r)
        assert bool((torch.isfinite(y.cpu()) == finite).all()), step
        if bool(finite.any()) and float(y_r[finite].abs().max()) > 0:
            assert rel(y.cpu()[finite], y_r[finite]) < 2.0 ** -7, step
        assert torch.equal(cu.scale.cpu(), ref.scale), (step, cu.scale, ref.scale)
        assert torch.equal(cu.amax_history.cpu(), ref.amax_history), step
    label = "first step: own amax" if first_step == "own_amax" else "first step: scale 1 (Transformer Engine)"
    assert label in cu.last_path, cu.last_path


def test_gpu_auto_picks_the_fp8_kernels_and_falls_back_on_odd_shapes(rng, cuda_ext):
    for recipe in FP8_RECIPES:
        layer = nt.Linear(256, 128, recipe=recipe, device="cuda")
        with torch.no_grad():
            layer(randn(rng, 128, 256).cuda())
        assert layer.last_path.startswith(f"cuda {recipe} forward"), layer.last_path
    nt._WARNED_CUDA_FALLBACK.clear()
    layer = nt.Linear(256, 128, recipe="fp8-current", device="cuda")
    with pytest.warns(RuntimeWarning, match="tokens 40 not a multiple of 16"):
        with torch.no_grad():
            layer(randn(rng, 40, 256).cuda())
    assert layer.last_path.startswith("torch-emulated") and "CUDA kernels not used" in layer.last_path
    strict = nt.Linear(256, 128, recipe="fp8-current", device="cuda", backend="cuda")
    with pytest.raises(RuntimeError, match="backend 'cuda' cannot run: tokens 40"):
        strict(randn(rng, 40, 256).cuda())


def test_gpu_bad_inputs_raise_clearly(cuda_ext):
    dev = "cuda"
    x = torch.zeros(32, 64, dtype=torch.bfloat16, device=dev)
    sc = torch.zeros(3, 4, device=dev)
    row = torch.zeros(32, 64, dtype=torch.uint8, device=dev)
    with pytest.raises(ValueError, match="rowwise is on the CPU"):
        cuda_ext.quantize_fp8_current_cuda(x, row.cpu(), None, sc[0, :1], sc[1, :1], sc[2, :1], format="e4m3")
    with pytest.raises(ValueError, match=r"x has shape \[32, 40\]"):
        cuda_ext.quantize_fp8_current_cuda(torch.zeros(32, 40, dtype=torch.bfloat16, device=dev), None, None,
                                           sc[0, :1], sc[1, :1], sc[2, :1], format="e4m3")
    with pytest.raises(ValueError, match="margin = 65 is outside"):
        cuda_ext.update_fp8_delayed_scale_cuda(torch.zeros(4, device=dev), sc[1, :1], sc[2, :1], step=0,
                                               format="e4m3", margin=65)
