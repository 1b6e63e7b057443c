#!/usr/bin/env bash
# One call on the GPU machine: build nibble._C WITH its CUDA entry points for python3 (torch cu130,
# nanobind, cmake + ninja; no network needed) in ./build-py-gpu, run the whole Python suite
# (tests/python: CPU tests + the GPU tests of the cuda backend: test_cuda_backend.py for quartet,
# test_cuda_fp8_backend.py for fp8-current / fp8-delayed / fp8-block), then a short smoke run of one
# layer per kernel recipe (paths and ms per training step, cuda backend vs torch emulation). Hard limit:
# DEADLINE seconds (default 175) for everything; each stage gets what is left.
# Usage: bash tools/gpu_python_test.sh [pytest args, replacing the default target tests/python...]
#   (a selection must include GPU tests: a run with no test_gpu_* passing is FAILED)
# Env: PYTHON (default python3), NIBBLE_PY_BUILD (default build-py-gpu), JOBS (16), DEADLINE (175),
#      OUT (if set, the logs are copied there: python-gpu-build.txt, python-gpu-tests.txt, python-gpu-tests.xml).
# Prints: versions, build time (with its exit code), the pytest summary (failures in full), the smoke lines,
# and a last line "gpu_python_test: OK|FAILED (...)". Exit status 0 only when the build, every test and the
# smoke run passed AND the GPU tests ran: at least one test_gpu_* passed on a machine with a GPU (a run in
# which every GPU test skipped, or on a machine without a GPU, is FAILED).
set -uo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
source tools/gpu_stages.sh
DEADLINE=${DEADLINE:-175}
PY=${PYTHON:-python3}
PY=$(command -v "$PY" || echo "$PY")
build=${NIBBLE_PY_BUILD:-build-py-gpu}
jobs=${JOBS:-16}
logdir=$(mktemp -d /tmp/nibble-pygpu.XXXXXX)
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
left() { echo $(( DEADLINE - ($(date +%s) - t0) )); }
finish() {
  [ -n "${OUT:-}" ] && mkdir -p "$OUT" && cp "$logdir"/*.txt "$logdir"/*.xml "$OUT"/ 2>/dev/null
  echo "gpu_python_test: $1 ($(( $(date +%s) - t0 )) s total)"
  exit "$2"
}

"$PY" -c "import sys, torch, nanobind; print('python', sys.version.split()[0], '| torch', torch.__version__, \
'cuda', torch.version.cuda, '| nanobind', nanobind.__version__, '| gpu:', torch.cuda.is_available() and \
torch.cuda.get_device_name())" 2>&1 || finish "FAILED (python3 lacks torch or nanobind)" 1

# Configure once (a later call reuses the tree and rebuilds only what changed).
if [ ! -f "$build/build.ninja" ]; then
  timeout -k 5 "$(( $(left) < 60 ? $(left) : 60 ))" cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DNIBBLE_CUDA=ON -DNIBBLE_TESTS=OFF -DNIBBLE_BENCH=OFF -DNIBBLE_PYTHON=ON -DPython_EXECUTABLE="$PY" \
      >"$logdir/python-gpu-build.txt" 2>&1 \
    || { tail -25 "$logdir/python-gpu-build.txt"; rm -f "$build/build.ninja"; finish "FAILED (configure)" 1; }
fi
# Only the extension and what it links (nibble_quant, nibble_kernels); the slowest kernel file takes
# about 1-2 min alone, so the build is bounded by it, not by the job count.
tb=$(date +%s)
timeout -k 5 "$(( $(left) - 35 ))" cmake --build "$build" -j "$jobs" --target nibble_python_ext \
    >>"$logdir/python-gpu-build.txt" 2>&1
rc=$?
stage_rc build $rc "in $(( $(date +%s) - tb )) s"
if [ $rc != 0 ]; then
  grep -E "error|Error|FAILED" "$logdir/python-gpu-build.txt" | head -30
  finish "FAILED (build)" 1
fi

export PYTHONPATH=python NIBBLE_BUILD_DIR="$build"
# A GPU with an extension built without CUDA would only skip the GPU tests: call that a failure.
"$PY" -c "import sys, torch, nibble; e = nibble.load_extension(); print('nibble._C has_cuda =', e.has_cuda, \
'(CUDA runtime', getattr(e, 'cuda_runtime_version', None), ')'); sys.exit(torch.cuda.is_available() and not e.has_cuda)" \
  || finish "FAILED (nibble._C not importable, or built without CUDA on a GPU machine)" 1

# Arguments (test files, -k EXPR, ...) replace the default target, the whole suite tests/python.
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(tests/python)
# The suite: pytest-timeout bounds each test; `timeout` bounds the whole run, leaving ~15 s for the smoke.
tt=$(( $(left) - 15 ))
[ "$tt" -lt 20 ] && finish "FAILED (no time left for the tests)" 1
per_test=(); "$PY" -c "import pytest_timeout" 2>/dev/null && per_test=(--timeout 60)
timeout -k 5 "$tt" "$PY" -m pytest -q -p no:cacheprovider -o addopts="" -rA ${per_test[@]+"${per_test[@]}"} \
    --junitxml="$logdir/python-gpu-tests.xml" "${targets[@]}" >"$logdir/python-gpu-tests.txt" 2>&1
trc=$?
tests_log=$logdir/python-gpu-tests.txt
stage_rc pytest $trc
check_pytest_ran pytest "$logdir/python-gpu-tests.xml"
grep -E "^(FAILED|ERROR) " "$tests_log" | head -20
grep -E "^SKIPPED" "$tests_log" | head -8
tail -1 "$tests_log"
[ $trc = 124 ] && echo "tests: TIMED OUT after $tt s"
if [ $trc != 0 ] && [ $trc != 124 ]; then  # the failures in full (pytest's own report), bounded
  sed -n '/= FAILURES =/,/short test summary/p' "$logdir/python-gpu-tests.txt" | tail -80
fi

# Smoke: one layer, its paths, and ms per forward+backward (cuda backend vs emulation), if time is left.
if [ "$(left)" -gt 8 ] && [ $trc != 124 ]; then
  timeout -k 2 "$(( $(left) - 3 ))" "$PY" - <<'EOF' 2>&1 | tail -24
import time, torch, nibble.torch as nt
if not torch.cuda.is_available():
    raise SystemExit("smoke: no GPU")
t, i, o = 8192, 4096, 4096
x = torch.randn(t, i, device="cuda", dtype=torch.bfloat16, requires_grad=True)
gy = torch.randn(t, o, device="cuda", dtype=torch.bfloat16)
for recipe in ("quartet", "mxfp4", "fp8-current", "fp8-delayed", "fp8-block"):
    ys = {}
    for be in ("cuda", "emulated"):
        layer = nt.Linear(i, o, recipe=recipe, backend=be, device="cuda", dtype=torch.bfloat16, seed=1)
        with torch.no_grad():
            layer.weight.copy_(torch.randn(o, i, generator=torch.Generator().manual_seed(0)).mul_(0.02))
        for n in (2, 5):  # warm-up, then timed
            torch.cuda.synchronize(); s = time.perf_counter()
            for _ in range(n):
                x.grad = layer.weight.grad = None
                y = layer(x)
                y.backward(gy)
            torch.cuda.synchronize()
        ys[be] = y.detach().float()
        print(f"smoke {recipe:11s} {be:8s} {t}x{i}x{o} bf16: {1e3 * (time.perf_counter() - s) / 5:7.2f} ms per "
              "forward+backward")
        if be == "cuda":
            print("  last_path:", layer.last_path)
            print("  last_backward_path:", layer.last_backward_path)
    d = float((ys["cuda"] - ys["emulated"]).norm() / ys["emulated"].norm())
    print(f"smoke {recipe}: forward outputs cuda vs emulated differ by {d:.2e} (relative; quartet's emulated "
          "Hadamard is a matmul, fp8 differs by accumulation only)")
EOF
  stage_rc smoke "${PIPESTATUS[0]}"
else
  stage_fail smoke "not run (no time left, or the tests timed out)"
fi
[ ${#failed_stages[@]} -eq 0 ] && finish "OK" 0
finish "FAILED (${failed_stages[*]})" 1
