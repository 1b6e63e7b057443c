"""torch.compile and CUDA graphs of models with nibble layers on the CUDA kernels (GPU only).

torch.compile: every CUDA recipe traces into one graph (torch._dynamo.explain finds no graph break) through
the custom ops of nibble.ops, and a compiled model's outputs, gradients and layer state (fp8-delayed's
history and scales, the step) equal the eager model's bit for bit: the ops run the eager kernels, and the
only other ops between them (ReLU, the reshapes) are exact.
CUDA graphs: a whole training step (forward, backward, SGD update) captured with torch.cuda.graph after
warm-up steps replays to the eager steps' parameters and state bit for bit. The recipes whose kernels take
the step's seeds as arguments (quartet's rotation signs, nvfp4's stochastic rounding) replay the captured
step's seeds, so for them one replay equals the eager step and the capture warns.
"""
import copy
import warnings

import pytest
import torch
from torch import nn

import nibble.torch as nt
from nibble import ops

RECIPES = nt.CUDA_RECIPES
SEEDED = ("quartet", "nvfp4")


@pytest.fixture
def compiled_ops(cuda_ext):
    if not ops.REGISTERED:
        pytest.skip("torch has no torch.library.custom_op (needs torch >= 2.4)")
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def model(recipe, features=256, seed=0):
    torch.manual_seed(seed)
    m = nn.Sequential(nn.Linear(features, 2 * features), nn.ReLU(), nn.Linear(2 * features, features))
    return nt.convert(m.cuda().to(torch.bfloat16), recipe, skip=())


def nibble_layers(m):
    return [l for l in m.modules() if isinstance(l, nt.Linear)]


def state(m):
    """Every buffer and parameter of the model (fp8-delayed's history, scales, the step, weights)."""
    return {k: v.detach().clone() for k, v in list(m.named_buffers()) + list(m.named_parameters())}


def assert_same(a, b, what):
    assert a.keys() == b.keys()
    for k in a:
        assert a[k].dtype == b[k].dtype and torch.equal(a[k], b[k]), (what, k, (a[k].float() - b[k].float()).abs().max())


@pytest.mark.parametrize("recipe", RECIPES)
def test_gpu_compile_traces_without_graph_breaks(recipe, compiled_ops):
    m = model(recipe)
    x = torch.randn(128, 256, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    explain = torch._dynamo.explain(m)(x)
    assert explain.graph_break_count == 0, explain.break_reasons
    assert explain.graph_count == 1
    m.eval()
    with torch.no_grad():
        explain = torch._dynamo.explain(m)(x.detach())
    assert explain.graph_break_count == 0, explain.break_reasons


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("recipe", RECIPES)
def test_gpu_compiled_forward_and_backward_equal_eager(recipe, backend, compiled_ops):
    eager = model(recipe)
    ref = copy.deepcopy(eager)
    compiled = torch.compile(ref, backend=backend, fullgraph=True)
    g = torch.Generator(device="cuda").manual_seed(1)
    for step in range(3):  # fp8-delayed: the first step's scale 1, then the history's
        x = torch.randn(128, 256, device="cuda", dtype=torch.bfloat16, generator=g)
        gy = torch.randn(128, 256, device="cuda", dtype=torch.bfloat16, generator=g)
        out = {}
        for name, m, run in (("eager", eager, eager), ("compiled", ref, compiled)):
            xr = x.clone().requires_grad_(True)
            m.zero_grad(set_to_none=True)
            y = run(xr)
            y.backward(gy)
            out[name] = dict(y=y.detach(), dx=xr.grad, **{f"grad {k}": p.grad for k, p in m.named_parameters()})
        assert_same(out["compiled"], out["eager"], f"step {step} outputs")
        assert_same(state(ref), state(eager), f"step {step} state")
    assert all(int(l.step) == 3 for l in nibble_layers(ref))
    assert all(l.last_path.startswith(f"cuda {recipe} forward") for l in nibble_layers(ref)), \
        [l.last_path for l in nibble_layers(ref)]
    assert nt.check_finite(ref) == 2  # the compiled passes' deferred flags hold nothing


def test_gpu_compiled_model_reports_non_finite_input(compiled_ops):
    m = model("fp8-current")
    c = torch.compile(m, fullgraph=True)
    x = torch.randn(128, 256, device="cuda", dtype=torch.bfloat16)
    c(x).float().sum().backward()
    assert nt.check_finite(m) == 2
    x[0, 0] = float("nan")
    c(x).float().sum().backward()
    with pytest.raises(nt.NonFiniteError, match=r"step 1: .*layer '0'.*input"):
        nt.check_finite(m)


def sgd_step(m, opt, x):
    m(x).float().square().mean().backward()
    opt.step()


@pytest.mark.parametrize("recipe", RECIPES)
def test_gpu_cuda_graph_of_a_training_step_equals_eager(recipe, cuda_ext):
    eager = model(recipe)
    graphed = copy.deepcopy(eager)
    opt_e = torch.optim.SGD(eager.parameters(), lr=0.05)
    opt_g = torch.optim.SGD(graphed.parameters(), lr=0.05)
    g = torch.Generator(device="cuda").manual_seed(2)
    batches = [torch.randn(128, 256, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(6)]
    static_x = batches[0].clone()
    # Warm-up (torch.cuda.graph's rule: on a side stream): the kernels' first launches, cuBLASLt's workspace
    # and plans, the deferred checks' read-back buffers.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for x in batches[:3]:
            for m, opt in ((eager, opt_e), (graphed, opt_g)):
                opt.zero_grad(set_to_none=True)
                static_x.copy_(x)
                sgd_step(m, opt, static_x)
    torch.cuda.current_stream().wait_stream(side)
    assert_same(state(graphed), state(eager), "warm-up")
    opt_g.zero_grad(set_to_none=True)
    graph = torch.cuda.CUDAGraph()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.cuda.graph(graph):
            sgd_step(graphed, opt_g, static_x)
    seed_warnings = [w for w in caught if "replays the seeds of step 3" in str(w.message)]
    assert len(seed_warnings) == (2 if recipe in SEEDED else 0), [str(w.message) for w in caught]
    replays = 1 if recipe in SEEDED else 3
    for x in batches[3:3 + replays]:
        static_x.copy_(x)
        graph.replay()
        opt_e.zero_grad(set_to_none=True)
        sgd_step(eager, opt_e, x)
        torch.cuda.synchronize()
        assert_same(state(graphed), state(eager), f"replay of recipe {recipe}")
    assert nt.check_finite(graphed) == 2
