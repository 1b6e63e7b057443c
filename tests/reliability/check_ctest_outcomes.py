#!/usr/bin/env python3
"""What ctest makes of a test's outcome: only "no GPU" may be Skipped, nothing passes on its output alone.

1. The build's entries (ctest --show-only=json-v1 of BUILD_DIR): every gpu-labelled entry has
   SKIP_RETURN_CODE SKIP_CODE, every *_host_part entry sets NIBBLE_GPU_SKIP_EXIT_CODE=0, and no entry uses
   SKIP_REGULAR_EXPRESSION or PASS_REGULAR_EXPRESSION (either lets output text override the exit code:
   a crash after printing the text would pass or skip).
2. The skip rules under ctest: the stand-in GPU binary (tests/reliability/gpu_skip_standin.cpp,
   built without CUDA, the same gpu_skip.hpp and gpu main as the real GPU tests) runs in a scratch ctest
   tree with the gpu entries' properties, once per injected cudaGetDeviceCount answer, and each case must
   come out as expected: cudaErrorNoDevice Skipped, cudaErrorInsufficientDriver without a driver library
   Skipped, the same with a driver library Failed, any other CUDA error Failed, a device Passed, a failing
   host-only test Failed even without a device, and as a host part (skip exit code 0) Passed / Failed.

Prints one line per case and exits 1 on any mismatch.
Usage: check_ctest_outcomes.py CTEST STANDIN SKIP_CODE BUILD_DIR
"""
import json
import os
import re
import subprocess
import sys
import tempfile

# name, environment, expected ctest status, host part (skip exit code 0)
CASES = [
    ("no_device", {"NIBBLE_TEST_CUDA_ERROR": "100"}, "Skipped", False),
    ("no_driver_library", {"NIBBLE_TEST_CUDA_ERROR": "35", "NIBBLE_TEST_CUDA_DRIVER": "absent"}, "Skipped", False),
    ("driver_too_old", {"NIBBLE_TEST_CUDA_ERROR": "35", "NIBBLE_TEST_CUDA_DRIVER": "present"}, "Failed", False),
    ("unknown_error", {"NIBBLE_TEST_CUDA_ERROR": "999"}, "Failed", False),
    ("devices_unavailable", {"NIBBLE_TEST_CUDA_ERROR": "46"}, "Failed", False),
    ("device_present", {"NIBBLE_TEST_CUDA_ERROR": "0"}, "Passed", False),
    ("host_test_fails_no_device", {"NIBBLE_TEST_CUDA_ERROR": "100", "NIBBLE_STANDIN_HOST_FAILS": "1"}, "Failed", False),
    ("host_part_no_device", {"NIBBLE_TEST_CUDA_ERROR": "100"}, "Passed", True),
    ("host_part_unknown_error", {"NIBBLE_TEST_CUDA_ERROR": "999"}, "Failed", True),
]


def properties(test):
    return {p["name"]: p["value"] for p in test.get("properties", [])}


def check_build(ctest, build_dir, skip_code):
    out = subprocess.run([ctest, "--test-dir", build_dir, "--show-only=json-v1"], capture_output=True, text=True)
    if out.returncode != 0:
        return [f"ctest --show-only=json-v1 in {build_dir} exited {out.returncode}: {out.stderr.strip()}"]
    tests = json.loads(out.stdout).get("tests", [])
    if not tests:
        return [f"{build_dir} has no ctest entry"]
    problems = []
    n_gpu = 0
    for t in tests:
        p = properties(t)
        name = t["name"]
        for prop in ("SKIP_REGULAR_EXPRESSION", "PASS_REGULAR_EXPRESSION"):
            if prop in p:
                problems.append(f"{name}: uses {prop} {p[prop]!r}, which overrides the exit code")
        if "gpu" in p.get("LABELS", []):
            n_gpu += 1
            if p.get("SKIP_RETURN_CODE") != skip_code:
                problems.append(f"{name}: gpu entry with SKIP_RETURN_CODE {p.get('SKIP_RETURN_CODE')}, "
                                f"expected {skip_code}")
        if name.endswith("_host_part") and "NIBBLE_GPU_SKIP_EXIT_CODE=0" not in p.get("ENVIRONMENT", []):
            problems.append(f"{name}: host part without ENVIRONMENT NIBBLE_GPU_SKIP_EXIT_CODE=0")
    print(f"{len(tests)} ctest entries checked ({n_gpu} gpu)")
    return problems


def cmake_quote(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def check_standin(ctest, standin, skip_code):
    problems = []
    with tempfile.TemporaryDirectory(prefix="nibble-ctest-outcomes.") as tree:
        lines = []
        for name, env, _, host_part in CASES:
            env = dict(env)
            if host_part:
                env["NIBBLE_GPU_SKIP_EXIT_CODE"] = "0"
            env_list = ";".join(f"{k}={v}" for k, v in env.items())
            lines.append(f"add_test({name} {cmake_quote(standin)})")
            props = f"ENVIRONMENT {cmake_quote(env_list)}"
            if not host_part:
                props += f" SKIP_RETURN_CODE {skip_code}"
            lines.append(f"set_tests_properties({name} PROPERTIES {props})")
        with open(os.path.join(tree, "CTestTestfile.cmake"), "w") as f:
            f.write("\n".join(lines) + "\n")
        out = subprocess.run([ctest, "--test-dir", tree], capture_output=True, text=True)
        status = dict(re.findall(r"Test +#\d+: (\S+) \.*\s*(?:\*\*\*)?(Passed|Failed|Skipped|Not Run)", out.stdout))
        for name, _, want, _ in CASES:
            got = status.get(name, "missing from ctest's output")
            ok = got == want
            print(f"{name}: {got}" + ("" if ok else f" (expected {want})"))
            if not ok:
                problems.append(f"stand-in case {name}: ctest reported {got}, expected {want}")
        if problems:
            print(out.stdout[-3000:])
    return problems


def main(argv):
    if len(argv) != 5:
        print(__doc__.strip().splitlines()[-1])
        return 2
    ctest, standin, skip_code, build_dir = argv[1], os.path.abspath(argv[2]), int(argv[3]), argv[4]
    problems = check_build(ctest, build_dir, skip_code) + check_standin(ctest, standin, skip_code)
    for p in problems:
        print("error:", p)
    print(f"{len(CASES)} stand-in cases; {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
