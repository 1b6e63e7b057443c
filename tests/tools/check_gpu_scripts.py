#!/usr/bin/env python3
"""The GPU scripts fail when what they check did not happen, on a machine without a GPU.

Runs tools/gpu_check.sh, tools/gpu_python_test.sh, tools/gpu_train.sh, tools/compute_sanitizer.sh and
tools/loss_study_gpu.sh against an
empty build folder and against stand-ins that fail: fake nvidia-smi (a GPU is "present"), ctest, cmake,
compute-sanitizer and python put first on PATH, and fake build folders whose CTestTestfile.cmake lists GPU
tests. Each case wants a non-zero exit and the line that says why; the control cases (every stand-in
succeeding) want exit 0, so a failure case cannot pass by the setup being broken.

Prints one line per case and exits 1 on any mismatch.
Usage: check_gpu_scripts.py [REPO_ROOT]
"""
import os
import subprocess
import sys
import tempfile

FAKE_NVIDIA_SMI = """#!/bin/sh
case "$*" in
  *-L*) echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-stand-in)" ;;
  *) echo "name, driver_version"; echo "NVIDIA H100 80GB HBM3, 580.00" ;;
esac
"""
FAKE_RC_TOOL = """#!/bin/sh
printf '%s\\n' "${FAKE_OUT:-}"
exit "${FAKE_RC:-0}"
"""
# python: -m pytest writes FAKE_JUNIT to --junitxml; a script writes --json FILE and --out DIR/results.json when
# FAKE_WRITE=1 and exits FAKE_SCRIPT_RC; -c and - (stdin) exit 0.
FAKE_PYTHON = """#!/usr/bin/python3
import os, shutil, sys
a = sys.argv[1:]
if a[:2] == ["-m", "pytest"]:
    for x in a:
        if x.startswith("--junitxml="):
            shutil.copy(os.environ["FAKE_JUNIT"], x.split("=", 1)[1])
    print(os.environ.get("FAKE_PYTEST_OUT", ""))
    sys.exit(int(os.environ.get("FAKE_PYTEST_RC", "0")))
if a and a[0] == "-":
    sys.stdin.read()
    sys.exit(0)
if a and a[0] == "-c":
    sys.exit(0)
if os.environ.get("FAKE_WRITE") == "1":
    for flag, i in ((x, n) for n, x in enumerate(a)):
        if flag == "--json":
            open(a[i + 1], "w").write("{}")
        if flag == "--out":
            os.makedirs(a[i + 1], exist_ok=True)
            open(os.path.join(a[i + 1], "results.json"), "w").write("{}")
sys.exit(int(os.environ.get("FAKE_SCRIPT_RC", "0")))
"""
JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="test_ops" name="test_cpu_thing"/>
<testcase classname="test_cuda_backend" name="test_gpu_quartet_layer">{gpu}</testcase>
<testcase classname="test_cuda_fp8_backend" name="test_gpu_fp8_layer">{gpu}</testcase>
</testsuite></testsuites>
"""
SKIPPED = '<skipped type="pytest.skip" message="no CUDA GPU"/>'


def write(path, text, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)
    return path


def fake_bin(root, *tools):
    """A folder with the named stand-ins, to put first on PATH."""
    d = tempfile.mkdtemp(dir=root, prefix="bin.")
    for t in tools:
        text = {"nvidia-smi": FAKE_NVIDIA_SMI, "python": FAKE_PYTHON}.get(t, FAKE_RC_TOOL)
        write(os.path.join(d, t), text, 0o755)
    return d


def fake_build(root, tests, missing=()):
    """A build folder whose CTestTestfile.cmake lists gpu-labelled tests; each exists as an executable unless
    named in missing."""
    d = tempfile.mkdtemp(dir=root, prefix="build.")
    lines = []
    for t in tests:
        exe = os.path.join(d, "tests", t)
        if t not in missing:
            write(exe, "#!/bin/sh\nexit 0\n", 0o755)
        lines += [f'add_test({t} "{exe}")', f'set_tests_properties({t} PROPERTIES LABELS "gpu" SKIP_RETURN_CODE 77)']
    write(os.path.join(d, "CTestTestfile.cmake"), "\n".join(lines) + "\n")
    return d


def run(repo, script, args, bin_dir, env_extra, timeout=300):
    env = dict(os.environ)
    env["PATH"] = bin_dir + os.pathsep + env["PATH"]
    env.update(env_extra)
    done = subprocess.run(["bash", os.path.join(repo, "tools", script)] + args, cwd=repo, env=env, timeout=timeout,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return done.returncode, done.stdout


def main(argv):
    repo = os.path.abspath(argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
    problems = []
    with tempfile.TemporaryDirectory(prefix="nibble-gpu-scripts.") as root:
        empty = tempfile.mkdtemp(dir=root, prefix="empty.")
        junit_skipped = write(os.path.join(root, "skipped.xml"), JUNIT.format(gpu=SKIPPED))
        junit_passed = write(os.path.join(root, "passed.xml"), JUNIT.format(gpu=""))
        kernels = ["test_quantize_nvfp4", "test_reencode_mxfp4", "test_gemm_host"]
        out = lambda: {"OUT": tempfile.mkdtemp(dir=root, prefix="out.")}  # noqa: E731
        study = lambda: tempfile.mkdtemp(dir=root, prefix="study.")  # noqa: E731
        cs_ok = {"FAKE_OUT": "========= ERROR SUMMARY: 0 errors"}
        # (name, script, args, stand-ins on PATH, environment, wanted exit: "nonzero" or 0, text the output must hold)
        cases = [
            ("compute_sanitizer: empty build folder", "compute_sanitizer.sh", [empty], ("nvidia-smi",), {},
             "nonzero", "ctest lists no gpu-labelled test"),
            ("compute_sanitizer: an executable ctest lists is missing", "compute_sanitizer.sh",
             [fake_build(root, kernels, missing=("test_reencode_mxfp4",))], ("nvidia-smi", "compute-sanitizer"), cs_ok,
             "nonzero", "missing: "),
            ("compute_sanitizer: a tool reports an error", "compute_sanitizer.sh", [fake_build(root, kernels)],
             ("nvidia-smi", "compute-sanitizer"),
             {"FAKE_OUT": "========= ERROR SUMMARY: 1 error", "FAKE_RC": "99", "NIBBLE_CS_TOOLS": "memcheck"},
             "nonzero", "FAILED rc=99"),
            ("compute_sanitizer: no CUDA call under a filter", "compute_sanitizer.sh", [fake_build(root, kernels)],
             ("nvidia-smi", "compute-sanitizer"),
             {"FAKE_OUT": "========= Error: Target application terminated before first instrumented API call",
              "FAKE_RC": "1", "NIBBLE_CS_TOOLS": "initcheck"},
             "nonzero", "no CUDA call under filter"),
            ("compute_sanitizer: a test binary without a racecheck subset", "compute_sanitizer.sh",
             [fake_build(root, ["test_new_kernel"])], ("nvidia-smi", "compute-sanitizer"),
             dict(cs_ok, NIBBLE_CS_TOOLS="racecheck"), "nonzero", "no racecheck subset"),
            ("compute_sanitizer: control, every tool clean", "compute_sanitizer.sh", [fake_build(root, kernels)],
             ("nvidia-smi", "compute-sanitizer"), cs_ok, 0, "makes no CUDA call"),
            ("gpu_check tests: empty build folder, every GPU test skipped", "gpu_check.sh", ["tests"],
             ("nvidia-smi", "python"), dict(out(), NIBBLE_GPU_BUILD=empty, FAKE_JUNIT=junit_skipped),
             "nonzero", "ctest ran no test"),
            ("gpu_check tests: Python GPU tests all skipped", "gpu_check.sh", ["tests"],
             ("nvidia-smi", "python", "ctest"),
             dict(out(), NIBBLE_GPU_BUILD=empty, FAKE_JUNIT=junit_skipped,
                  FAKE_OUT="100% tests passed, 0 tests failed out of 13"),
             "nonzero", "no GPU test passed on a machine with a GPU"),
            ("gpu_check tests: ctest fails", "gpu_check.sh", ["tests"], ("nvidia-smi", "python", "ctest"),
             dict(out(), NIBBLE_GPU_BUILD=empty, FAKE_JUNIT=junit_passed,
                  FAKE_OUT="92% tests passed, 1 tests failed out of 13", FAKE_RC="8"),
             "nonzero", "C++ GPU tests rc=8"),
            ("gpu_check tests: C++ GPU tests skipped on a GPU machine", "gpu_check.sh", ["tests"],
             ("nvidia-smi", "python", "ctest"),
             dict(out(), NIBBLE_GPU_BUILD=empty, FAKE_JUNIT=junit_passed,
                  FAKE_OUT="100% tests passed, 0 tests failed out of 2\n  1 - test_quartet_fp4 (Skipped)"),
             "nonzero", "1 of 2 GPU tests skipped"),
            ("gpu_check tests: control, everything ran", "gpu_check.sh", ["tests"], ("nvidia-smi", "python", "ctest"),
             dict(out(), NIBBLE_GPU_BUILD=empty, FAKE_JUNIT=junit_passed,
                  FAKE_OUT="100% tests passed, 0 tests failed out of 13"),
             0, "all stages passed"),
            ("gpu_check build: cmake fails", "gpu_check.sh", ["build"], ("nvidia-smi", "python", "cmake"),
             dict(out(), NIBBLE_GPU_BUILD=empty, FAKE_RC="3"), "nonzero", "build rc=3"),
            ("gpu_check sanitize: empty build folder", "gpu_check.sh", ["sanitize"], ("nvidia-smi",),
             dict(out(), NIBBLE_GPU_BUILD=empty), "nonzero", "sanitize rc=1"),
            ("gpu_check: unknown stage", "gpu_check.sh", ["nonsense"], ("nvidia-smi",), out(), "nonzero",
             "unknown stage"),
            ("gpu_python_test: configure fails on an empty build folder", "gpu_python_test.sh", [],
             ("nvidia-smi", "python", "cmake"), {"NIBBLE_PY_BUILD": empty, "FAKE_RC": "1"}, "nonzero",
             "FAILED (configure)"),
            ("gpu_python_test: every GPU test skipped", "gpu_python_test.sh", [], ("nvidia-smi", "python", "cmake"),
             {"NIBBLE_PY_BUILD": empty, "FAKE_JUNIT": junit_skipped}, "nonzero", "no GPU test passed"),
            ("gpu_python_test: pytest fails", "gpu_python_test.sh", [], ("nvidia-smi", "python", "cmake"),
             {"NIBBLE_PY_BUILD": empty, "FAKE_JUNIT": junit_passed, "FAKE_PYTEST_RC": "1"}, "nonzero", "pytest rc=1"),
            ("gpu_python_test: control, GPU tests passed", "gpu_python_test.sh", [],
             ("nvidia-smi", "python", "cmake"), {"NIBBLE_PY_BUILD": empty, "FAKE_JUNIT": junit_passed}, 0,
             "gpu_python_test: OK"),
            ("gpu_train: a benchmark fails and no result is written", "gpu_train.sh", ["1"], ("nvidia-smi", "python"),
             dict(out(), FAKE_SCRIPT_RC="3"), "nonzero", "step-codonfm-5b rc=3"),
            ("gpu_train: control, every stage writes its result", "gpu_train.sh", ["1"], ("nvidia-smi", "python"),
             dict(out(), FAKE_WRITE="1"), 0, "all stages passed"),
            ("loss_study_gpu: configure fails", "loss_study_gpu.sh", ["60"], ("nvidia-smi", "python", "cmake"),
             dict(out(), NIBBLE_PY_BUILD=empty, FAKE_RC="1", STUDY_DIR=study()), "nonzero", "configure failed"),
            ("loss_study_gpu: the speed table fails", "loss_study_gpu.sh", ["60"], ("nvidia-smi", "python", "cmake"),
             dict(out(), NIBBLE_PY_BUILD=empty, SPEED="1", FAKE_SCRIPT_RC="2", STUDY_DIR=study()), "nonzero",
             "speed table: exit 2"),
            ("loss_study_gpu: the plan fails", "loss_study_gpu.sh", ["60"], ("nvidia-smi", "python", "cmake"),
             dict(out(), NIBBLE_PY_BUILD=empty, FAKE_SCRIPT_RC="3", STUDY_DIR=study()), "nonzero", "plan: exit 3"),
            ("loss_study_gpu: control, the plan succeeds", "loss_study_gpu.sh", ["60"],
             ("nvidia-smi", "python", "cmake"), dict(out(), NIBBLE_PY_BUILD=empty, STUDY_DIR=study()), 0,
             "plan: exit 0"),
        ]
        for name, script, args, tools, env, want_rc, want_text in cases:
            bin_dir = fake_bin(root, *tools)
            env = dict(env)
            if "python" in tools:
                env["PYTHON"] = os.path.join(bin_dir, "python")
            rc, text = run(repo, script, args, bin_dir, env)
            ok_rc = rc != 0 if want_rc == "nonzero" else rc == want_rc
            ok_text = want_text in text
            print(f"{name}: exit {rc}" + ("" if ok_rc and ok_text else "  <-- MISMATCH"))
            if not (ok_rc and ok_text):
                problems.append(f"{name}: exit {rc} (wanted {want_rc}), text {want_text!r} "
                                f"{'found' if ok_text else 'missing'}; output:\n{text[-2500:]}")
    for p in problems:
        print("error:", p)
    print(f"{len(cases)} cases; {len(problems)} mismatches")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
