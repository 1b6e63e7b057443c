"""The CUDA backend of nibble.torch (nibble.backends.quartet on nibble._C's CUDA entry points).

Without a GPU: the extension says whether the CUDA entry points were compiled, their argument checks
(all but the device one) run on CPU tensors, backend selection errors, and the Python orchestration
runs against a CPU stand-in of the kernels (fake_cuda_ext.py). With a GPU (and a CUDA build): the
cuda backend's forward equals the reference backend's within FP32-accumulation bounds, its gradients
match the reference's, violating rows take the 1x128 / BF16 paths, and bad inputs raise clearly.
"""
import numpy as np
import pytest
import torch

import nibble.torch as nt
from nibble import _ext
from nibble.backends import common, quartet
from conftest import forward_backward, randn
from fake_cuda_ext import standin

CUDA_ENTRY_POINTS = {"quartet_forward_e4m3_cuda", "quartet_forward_cuda", "quartet_backward_cuda",
                     "quartet_backward_mxfp4_transposed_cuda", "reencode_mxfp4_e4m3_cuda", "reencode_scale_count",
                     "decode_mxfp4_bf16_cuda", "quartet_epilogue_cuda", "gemm_cuda"}
FP8_SPLIT_ACC = 2.0 ** -9  # tests/kernels/test_gemm_accuracy.cu: Hopper FP8 split accumulation, of sum |a b|


def reference_values(ext, t, role="x", **kw):
    d = ext.quantize(t.detach().cpu().float().contiguous().numpy(), "quartet", role, **kw)
    return torch.from_numpy(np.array(d["values"])), (None if d["mask"] is None else np.array(d["mask"]))


def rel(a, b):
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    return float((a - b).norm() / b.norm())


def reference_composition(ext, x, w, gy, seed, step, rounding):
    """Quartet's three GEMMs from CPU-reference quantizations, GEMMs in float64 (test_linear_reference.py's
    composition): returns y (no bias), dx, dw and the quantized forward operands."""
    xq, mx = reference_values(ext, x)
    wq, mw = reference_values(ext, w)
    sb = nt.quartet_backward_seed(seed, step)  # one seed per layer per step, both rotations
    b = dict(rounding=rounding)
    g = reference_values(ext, gy, "dy", seed=sb, **b)[0].double() @ \
        reference_values(ext, wq.t(), "dy", seed=sb, **b)[0].double().t()
    dx = torch.from_numpy(np.array(ext.quartet_epilogue(g.float().numpy(), mx)))
    g = reference_values(ext, gy.t(), "dy", seed=sb, **b)[0].double() @ \
        reference_values(ext, xq.t(), "dy", seed=sb, **b)[0].double().t()
    dw = torch.from_numpy(np.array(ext.quartet_epilogue(g.float().numpy(), mw)))
    return xq.double() @ wq.double().t(), dx, dw, xq, wq


# ---------------------------------------------------------------------------------------------- CPU


def test_extension_reports_whether_cuda_entry_points_were_compiled(ext):
    assert isinstance(ext.has_cuda, bool)
    present = {n for n in CUDA_ENTRY_POINTS if hasattr(ext, n)}
    assert present == (CUDA_ENTRY_POINTS if ext.has_cuda else set()), present
    if ext.has_cuda:
        assert ext.cuda_runtime_version >= 12000


def test_cuda_bindings_check_arguments_before_the_device(cuda_build_ext):
    ext = cuda_build_ext
    f = ext.quartet_forward_e4m3_cuda
    e4m3, scales = torch.zeros(64, 64, dtype=torch.uint8), torch.zeros(64)
    cases = [
        (torch.zeros(64, 64, dtype=torch.float64), e4m3, scales, r"x has dtype float64; expected bfloat16"),
        (torch.zeros(64, 48), torch.zeros(64, 48, dtype=torch.uint8), scales, r"x has shape \[64, 48\]; .*multiple of 32"),
        (torch.zeros(64, 128)[:, ::2], e4m3, scales, r"x is not contiguous"),
        (torch.zeros(64 * 64 + 1)[1:].view(64, 64), e4m3, scales, r"x is not 16-byte aligned"),
        (torch.zeros(64, 64), torch.zeros(64, 64), scales, r"e4m3 has dtype float32; expected uint8"),
        (torch.zeros(64, 64), e4m3, torch.zeros(63), r"row_scales has shape \[63\]; expected \[64\]"),
        (torch.zeros(64, 64), e4m3, scales, r"x is on the CPU; the CUDA kernels need a CUDA tensor"),
        (torch.zeros(64, 64, dtype=torch.bfloat16), e4m3, scales, r"x is on the CPU"),  # bf16 passes DLPack
    ]
    for x, e, s, msg in cases:
        with pytest.raises(ValueError, match=r"quartet_forward_e4m3_cuda: " + msg):
            f(x, e, s)
    with pytest.raises(ValueError, match=r"gemm_cuda: out has shape \[64, 16\]; expected \[64, 32\]"):
        ext.gemm_cuda(torch.zeros(64, 64, dtype=torch.uint8), torch.zeros(64), torch.zeros(32, 64, dtype=torch.uint8),
                      torch.zeros(32), torch.zeros(64, 16, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match=r"a_scale has shape \[32\]; expected \[64\]"):
        ext.gemm_cuda(torch.zeros(64, 64, dtype=torch.uint8), torch.zeros(32), torch.zeros(32, 64, dtype=torch.uint8),
                      torch.zeros(32), torch.zeros(64, 32, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match=r"quartet_backward_cuda: x has 48 rows; the colwise copy needs a multiple of 32"):
        ext.quartet_backward_cuda(torch.zeros(48, 64), colwise_codes=torch.zeros(64, 24, dtype=torch.uint8),
                                  colwise_scales=torch.zeros(64, 1, dtype=torch.uint8), seed=1)
    with pytest.raises(ValueError, match=r"quartet_epilogue_cuda: mask has shape \[8\]; expected \[512\]"):
        ext.quartet_epilogue_cuda(torch.zeros(64, 64), torch.zeros(8, dtype=torch.uint8), torch.zeros(64, 64))
    with pytest.raises(ValueError, match=r"granularity 'col' is unknown"):
        ext.reencode_scale_count("col", 64, 128)
    assert ext.reencode_scale_count("group128", 100, 256) == 2 * 100
    assert ext.reencode_scale_count("group128", 101, 256) == 2 * 104  # rows padded to 4 floats


def test_backend_selection_errors():
    with pytest.raises(ValueError, match="backend 'gpu' is unknown"):
        nt.Linear(64, 64, backend="gpu")
    with pytest.raises(ValueError, match="backend 'cuda' runs recipes quartet, fp8-current, fp8-delayed, fp8-block, "
                                         "mxfp4, mxfp8, nvfp4 on nibble's kernels; recipe bf16"):
        nt.Linear(64, 64, recipe="bf16", backend="cuda")
    with pytest.raises(ValueError, match="backend 'cuda' needs CUDA tensors, got cpu"):
        nt.Linear(64, 64, recipe="quartet", backend="cuda")(torch.randn(32, 64))
    layer = nt.Linear(64, 64, recipe="quartet")  # auto on CPU tensors: the reference
    layer(torch.randn(32, 64))
    assert layer.last_path.startswith("cpu-reference")


def test_unsupported_options_are_named(ext):
    opts = dict(nt._DEFAULTS)
    assert quartet.unsupported_reason(None, opts).startswith("nibble._C is not built")
    if ext.has_cuda:
        assert quartet.unsupported_reason(ext, opts) is None
        assert "hadamard_size 64" in quartet.unsupported_reason(ext, {**opts, "hadamard_size": 64})
        assert quartet.unsupported_reason(ext, {**opts, "hadamard_size": 64, "rotate": False}) is None
    else:
        assert "without CUDA" in quartet.unsupported_reason(ext, opts)


@pytest.mark.parametrize("rounding", ["nearest", "stochastic"])
def test_orchestration_against_reference_with_cpu_standin(rounding, rng, ext):
    fake = standin(ext)
    t, i, o, seed, step = 128, 256, 96, 12345, 3
    x, w, gy = randn(rng, t, i), randn(rng, o, i), randn(rng, t, o)
    opts = {**nt._DEFAULTS, "backward_rounding": rounding}
    y, xp, wp, path = quartet.forward(fake, x, w, opts, 0)
    sb = nt.quartet_backward_seed(seed, step)
    fake.calls.clear()
    dx, dw, bpath = quartet.backward(fake, gy, xp, wp, opts, sb, torch.float32, torch.float32, 0)
    y_ref, dx_ref, dw_ref, _, _ = reference_composition(ext, x, w, gy, seed, step, rounding)
    assert rel(y, y_ref) < 1e-6 and rel(dx, dx_ref) < 1e-5 and rel(dw, dw_ref) < 1e-5, \
        (rel(y, y_ref), rel(dx, dx_ref), rel(dw, dw_ref))
    assert "fprop GEMM emulated-exact (fp8)" in path and "spread" not in path
    assert "dgrad GEMM emulated-exact (fp8)" in bpath and "wgrad GEMM emulated-exact (fp8)" in bpath
    # dY is read once: one backward-quantizer launch writes both copies (the fused row+column tile).
    assert [c for c in fake.calls if c.startswith("backward dense")] == ["backward dense row+col"], fake.calls
    assert fake.calls.count("epilogue") == 2
    # Only the gradients asked for are computed, and dY gets only the copy that gradient needs.
    for need_dx, need_dw, copy in ((False, True, "col"), (True, False, "row")):
        fake.calls.clear()
        dx2, dw2, p2 = quartet.backward(fake, gy, xp, wp, opts, sb, torch.float32, torch.float32, 0,
                                             need_dx=need_dx, need_dw=need_dw)
        assert [c for c in fake.calls if c.startswith("backward dense")] == ["backward dense " + copy], fake.calls
        assert (dx2 is None) != need_dx and (dw2 is None) != need_dw
        got, want, gone = (dw2, dw, "dgrad") if need_dw else (dx2, dx, "wgrad")
        assert torch.equal(got, want) and gone not in p2 and not any(gone in c for c in fake.calls)


def test_fp32_output_refused_by_cublaslt_falls_back_to_bf16_output(rng, ext, monkeypatch):
    monkeypatch.setattr(common, "_NO_FP32_OUTPUT", set())
    fake = standin(ext)
    fake.refuse_fp32_output = True
    x, w = randn(rng, 64, 128), randn(rng, 64, 128)
    for _ in range(2):  # the second call goes straight to BF16 output
        y, _, _, path = quartet.forward(fake, x, w, dict(nt._DEFAULTS), 0)
        assert y.dtype == torch.float32 and "cuBLASLt has no FP32 output here: BF16 output" in path, path
    y_ref = reference_composition(ext, x, w, randn(rng, 64, 64), 1, 0, "nearest")[0]
    assert 0 < rel(y, y_ref) < 2.0 ** -7
    assert common._NO_FP32_OUTPUT == {"outer_vec"}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_autograd_function_with_cpu_standin(dtype, rng, ext, monkeypatch):
    """QuartetCudaFunction (dtypes, saved planes, per-step seeds, bias) against the reference layer."""
    monkeypatch.setattr(_ext, "_loaded", standin(ext))
    holder = nt.Linear(256, 96, recipe="quartet", backend="reference", seed=77, dtype=dtype)
    ref = nt.Linear(256, 96, recipe="quartet", backend="reference", seed=77)
    ref.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in holder.state_dict().items()})
    with torch.no_grad():
        holder.step += 4  # the seeds come from the layer's step at forward time
        ref.step += 4
    x, gy = randn(rng, 128, 256).to(dtype).requires_grad_(True), randn(rng, 128, 96).to(dtype)
    y = quartet.QuartetCudaFunction.apply(x, holder.weight, holder.bias, holder)
    y.backward(gy)
    y_r, dx_r, dw_r, db_r = forward_backward(ref, x.detach().float(), gy.float())
    assert (y.dtype, x.grad.dtype, holder.weight.grad.dtype, holder.bias.grad.dtype) == (dtype,) * 4
    tol = 1e-5 if dtype == torch.float32 else 2.0 ** -6
    for name, a, b in (("y", y, y_r), ("dx", x.grad, dx_r), ("dw", holder.weight.grad, dw_r),
                       ("db", holder.bias.grad, db_r)):
        assert rel(a, b) < tol, (name, rel(a, b))
    assert holder.last_path.startswith("cuda quartet forward: fake fused forward")
    assert holder.last_backward_path.startswith("cuda quartet backward")


@pytest.mark.parametrize("pattern,expect", [("halves", "re-encoded per 1x128 group (VEC128)"),
                                            ("alternate", "decoded to BF16 (exact) for a BF16 GEMM")])
def test_violating_rows_fall_back_with_cpu_standin(pattern, expect, rng, ext):
    fake = standin(ext)
    x, w, gy = spread_input(rng, pattern), randn(rng, 64, 256), randn(rng, 64, 64)
    y, xp, wp, path = quartet.forward(fake, x, w, dict(nt._DEFAULTS), 0)
    assert expect in path and "64 rows of X spread over more than 14 binades" in path, path
    y_ref, dx_ref, dw_ref, _, _ = reference_composition(ext, x, w, gy, 1, 0, "nearest")
    assert rel(y, y_ref) < 1e-6
    dx, dw, _ = quartet.backward(fake, gy, xp, wp, dict(nt._DEFAULTS), nt.quartet_backward_seed(1, 0),
                                      torch.float32, torch.float32, 0)
    assert rel(dx, dx_ref) < 1e-5 and rel(dw, dw_ref) < 1e-5


def spread_input(rng, pattern, t=64, i=256):
    """Rows whose 32-groups span ~40 binades: across 128-groups (halves) or inside them (alternate)."""
    x = randn(rng, t, i)
    g = x.view(t, i // 32, 32)
    big = torch.arange(i // 32) < (i // 64) if pattern == "halves" else torch.arange(i // 32) % 2 == 0
    g[:, big] *= 2.0 ** 20
    g[:, ~big] *= 2.0 ** -20
    return x


# ---------------------------------------------------------------------------------------------- GPU


def layers(recipe_opts, dtype, seed=5, i=512, o=384):
    """A cuda-backend layer on the GPU and a reference-backend layer on the CPU with the same parameters
    (the reference gets the cuda layer's values, so bf16 parameters are compared exactly)."""
    cu = nt.Linear(i, o, recipe="quartet", backend="cuda", seed=seed, device="cuda", dtype=dtype, **recipe_opts)
    ref = nt.Linear(i, o, recipe="quartet", backend="reference", seed=seed, **recipe_opts)
    ref.load_state_dict({k: v.detach().float().cpu() if v.is_floating_point() else v.cpu()
                         for k, v in cu.state_dict().items()})
    return cu, ref


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gpu_forward_equals_reference_within_fp32_accumulation(dtype, rng, cuda_ext):
    cu, _ = layers({}, dtype)
    x = randn(rng, 256, 512).to(dtype)
    with torch.no_grad():
        y = cu(x.cuda())
    assert y.dtype == dtype and y.is_cuda
    assert cu.last_path.startswith("cuda quartet forward") and "fprop GEMM emulated-exact (fp8)" in cu.last_path
    assert "outer_vec" in cu.last_path, cu.last_path
    xq, _ = reference_values(cuda_ext, x)
    wq, _ = reference_values(cuda_ext, cu.weight)
    b = cu.bias.detach().double().cpu()
    y_ref = xq.double() @ wq.double().t() + b
    bound = FP8_SPLIT_ACC * (xq.double().abs() @ wq.double().abs().t()) + 2.0 ** -20 * (y_ref.abs() + b.abs())
    if dtype == torch.bfloat16 or "BF16 output" in cu.last_path:  # BF16 GEMM output (+ bias in BF16)
        bound += 2.0 ** -7 * (y_ref.abs() + b.abs())
    err = (y.double().cpu() - y_ref).abs()
    assert bool((err <= bound).all()), float((err / bound).max())


@pytest.mark.parametrize("rounding", ["nearest", "stochastic"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gpu_gradients_match_reference(rounding, dtype, rng, cuda_ext):
    cu, ref = layers({"backward_rounding": rounding}, dtype)
    x, gy = randn(rng, 256, 512).to(dtype), randn(rng, 256, 384).to(dtype)
    y, dx, dw, db = forward_backward(cu, x.cuda(), gy.cuda())
    y_r, dx_r, dw_r, db_r = forward_backward(ref, x.float(), gy.float())
    assert (dx.dtype, dw.dtype, db.dtype) == (dtype, dtype, dtype)
    assert cu.last_backward_path.startswith("cuda quartet backward"), cu.last_backward_path
    assert "dgrad GEMM emulated-exact (fp8)" in cu.last_backward_path
    assert "wgrad GEMM emulated-exact (fp8)" in cu.last_backward_path
    # Bit-equal quantized operands (same seeds, same keys): only the GEMMs' accumulation (and BF16
    # roundings) differ, far inside the emulated-vs-reference bound of test_module.py (0.6).
    bf16_out = dtype == torch.bfloat16 or "BF16 output" in cu.last_path + cu.last_backward_path
    tight = 2.0 ** -5 if bf16_out else 2.0 ** -7
    for name, a, b in (("y", y, y_r), ("dx", dx, dx_r), ("dw", dw, dw_r), ("db", db, db_r)):
        assert rel(a, b) < min(tight, 0.6), (name, rel(a, b))


def test_gpu_backward_signs_fresh_per_step_and_reproducible(rng, cuda_ext):
    cu, _ = layers({}, torch.float32, i=256, o=128)
    twin, _ = layers({}, torch.float32, i=256, o=128)
    twin.load_state_dict(cu.state_dict())
    x, gy = randn(rng, 128, 256).cuda(), randn(rng, 128, 128).cuda()
    _, dx1, _, _ = forward_backward(cu, x, gy)
    _, dx1b, _, _ = forward_backward(twin, x, gy)
    _, dx2, _, _ = forward_backward(cu, x, gy)
    assert rel(dx1, dx1b) < 1e-6      # same seed, same step
    assert rel(dx2, dx1) > 1e-3       # next step: fresh random signs
    assert int(cu.step) == 2


@pytest.mark.parametrize("pattern,expect", [("halves", "re-encoded per 1x128 group (VEC128)"),
                                            ("alternate", "decoded to BF16 (exact) for a BF16 GEMM")])
def test_gpu_violating_rows_take_the_exact_fallbacks(pattern, expect, rng, cuda_ext):
    # gemm_check="sync": the fallback is taken in the same pass (the deferred default reports it a pass later).
    cu, ref = layers({"gemm_check": "sync"}, torch.float32, i=256, o=128)
    x, gy = spread_input(rng, pattern), randn(rng, 64, 128)
    y, dx, dw, _ = forward_backward(cu, x.cuda(), gy.cuda())
    assert expect in cu.last_path and "64 rows of X spread" in cu.last_path, cu.last_path
    xq, _ = reference_values(cuda_ext, x)
    wq, _ = reference_values(cuda_ext, cu.weight)
    y_ref = xq.double() @ wq.double().t() + cu.bias.detach().double().cpu()
    bound = FP8_SPLIT_ACC * (xq.double().abs() @ wq.double().abs().t())
    bf16_out = "BF16 output" in cu.last_path + cu.last_backward_path
    if bf16_out:
        bound += 2.0 ** -8 * y_ref.abs()
    assert bool(((y.double().cpu() - y_ref).abs() <= bound).all())
    _, dx_r, dw_r, _ = forward_backward(ref, x, gy)
    tight = 2.0 ** -5 if bf16_out else 2.0 ** -7
    assert rel(dx, dx_r) < tight and rel(dw, dw_r) < tight, (rel(dx, dx_r), rel(dw, dw_r))


def test_gpu_auto_picks_cuda_for_the_kernel_recipes(rng, cuda_ext):
    x = randn(rng, 64, 128).cuda()
    q = nt.Linear(128, 64, recipe="quartet", device="cuda")
    q(x)
    assert q.last_path.startswith("cuda quartet forward")
    f = nt.Linear(128, 64, recipe="fp8-current", device="cuda")
    f(x)
    assert f.last_path.startswith("cuda fp8-current forward")
    n = nt.Linear(128, 64, recipe="nvfp4", device="cuda")  # nibble's quantizers, BF16 decode, BF16 GEMM
    n(x)
    assert n.last_path.startswith("cuda nvfp4 forward")
    m = nt.Linear(128, 64, recipe="bf16", device="cuda")  # no kernels of its own: the emulation
    m(x)
    assert m.last_path.startswith("torch-emulated")
    nt._WARNED_CUDA_FALLBACK.clear()
    with pytest.warns(RuntimeWarning, match="hadamard_size 64"):
        h = nt.Linear(128, 64, recipe="quartet", device="cuda", hadamard_size=64)
        h(x)
    assert h.last_path.startswith("torch-emulated") and "CUDA kernels not used" in h.last_path


def test_gpu_bad_inputs_raise_clearly(cuda_ext):
    f, dev = cuda_ext.quartet_forward_e4m3_cuda, "cuda"
    e4m3, scales = torch.zeros(64, 64, dtype=torch.uint8, device=dev), torch.zeros(64, device=dev)
    for x, msg in ((torch.zeros(64, 64, dtype=torch.float64, device=dev), "x has dtype float64"),
                   (torch.zeros(64, 128, device=dev)[:, ::2], "x is not contiguous"),
                   (torch.zeros(64, 48, device=dev), r"x has shape \[64, 48\]; .*multiple of 32"),
                   (torch.zeros(64, 64), "x is on the CPU")):
        with pytest.raises(ValueError, match=msg):
            f(x, e4m3, scales)
    with pytest.raises(ValueError, match="row_scales is on the CPU"):
        f(torch.zeros(64, 64, device=dev), e4m3, torch.zeros(64))
    layer = nt.Linear(128, 64, recipe="quartet", backend="cuda", device=dev)
    with pytest.raises(ValueError, match="tokens is not a multiple of 32"):
        layer(torch.randn(40, 128, device=dev))
    with pytest.raises(ValueError, match="backend 'cuda' needs CUDA tensors"):
        layer(torch.randn(32, 128))
