# Sourced by the GPU scripts (gpu_check.sh, gpu_python_test.sh, gpu_train.sh, compute_sanitizer.sh): each
# stage's real exit code, a failed stage in the script's exit status, and on a machine with a GPU, GPU tests
# that did not run (none executed, or all skipped) count as a failure.
# Needs t0 (the script's start, date +%s) set by the caller.

# Whether this machine has a GPU: nvidia-smi lists one, or torch sees CUDA (PY or python3).
gpu_present() {
  nvidia-smi -L 2>/dev/null | grep -q '^GPU [0-9]' && return 0
  "${PY:-python3}" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" >/dev/null 2>&1
}

failed_stages=()

# stage_rc NAME RC [NOTE...]: prints "[N s] NAME rc=RC NOTE" and records a non-zero RC as a failed stage.
stage_rc() {
  local name=$1 rc=$2
  shift 2
  echo "[$(( $(date +%s) - t0 )) s] $name rc=$rc$([ "$rc" = 124 ] && echo ' (TIMED OUT)')${*:+ $*}"
  [ "$rc" = 0 ] || failed_stages+=("$name (rc=$rc)")
}

# stage_fail NAME REASON: records a failed stage whose commands exited 0 but did not do their job.
stage_fail() {
  echo "[$(( $(date +%s) - t0 )) s] $1 FAILED: $2"
  failed_stages+=("$1 ($2)")
}

# stages_exit: the last line, and exit 1 if any stage failed.
stages_exit() {
  if [ ${#failed_stages[@]} -gt 0 ]; then
    echo "FAILED stages: ${failed_stages[*]}"
    exit 1
  fi
  echo "all stages passed"
  exit 0
}

# check_ctest_ran NAME LOG: ctest's log must show tests, and on a GPU machine none skipped (the GPU tests
# exit 77, Skipped, only when there is no device) and at least one executed.
check_ctest_ran() {
  local name=$1 log=$2 total skipped notrun
  total=$(sed -n 's/.*tests passed, [0-9]* tests\{0,1\} failed out of \([0-9]*\).*/\1/p' "$log" | tail -1)
  skipped=$(grep -c '(Skipped)' "$log")
  notrun=$(grep -c '(Not Run)\|(Disabled)' "$log")
  if [ -z "$total" ] || [ "$total" = 0 ]; then
    stage_fail "$name" "ctest ran no test ($(grep -m1 -E 'No tests were found|Total Tests' "$log" || echo 'no summary line'))"
  elif gpu_present && [ $(( total - skipped - notrun )) -le 0 ]; then
    stage_fail "$name" "none of the $total GPU tests executed on a machine with a GPU ($skipped skipped)"
  elif gpu_present && [ "$skipped" -gt 0 ]; then
    stage_fail "$name" "$skipped of $total GPU tests skipped on a machine with a GPU (a skip means no device)"
  elif ! gpu_present; then
    stage_fail "$name" "no GPU on this machine: the $total GPU tests only skipped"
  fi
}

# pytest_gpu_counts JUNIT_XML: "total passed failed skipped gpu_total gpu_passed gpu_skipped" of a pytest
# --junitxml report; GPU tests are those named test_gpu_*.
pytest_gpu_counts() {
  python3 - "$1" <<'EOF' 2>/dev/null || echo "0 0 0 0 0 0 0"
import sys
import xml.etree.ElementTree as ET
n = dict(total=0, passed=0, failed=0, skipped=0, gpu_total=0, gpu_passed=0, gpu_skipped=0)
for case in ET.parse(sys.argv[1]).iter("testcase"):
    kinds = {child.tag for child in case}
    outcome = "failed" if kinds & {"failure", "error"} else "skipped" if "skipped" in kinds else "passed"
    n["total"] += 1
    n[outcome] += 1
    if case.get("name", "").startswith("test_gpu_"):
        n["gpu_total"] += 1
        if outcome in ("passed", "skipped"):
            n["gpu_" + outcome] += 1
print(" ".join(str(n[k]) for k in ("total", "passed", "failed", "skipped", "gpu_total", "gpu_passed", "gpu_skipped")))
EOF
}

# check_pytest_ran NAME JUNIT_XML: some test ran, and on a GPU machine at least one GPU test passed.
check_pytest_ran() {
  local name=$1 total passed failed skipped gpu_total gpu_passed gpu_skipped
  read -r total passed failed skipped gpu_total gpu_passed gpu_skipped < <(pytest_gpu_counts "$2")
  echo "$name: $passed passed, $failed failed, $skipped skipped of $total; GPU tests (test_gpu_*): $gpu_passed" \
    "passed, $gpu_skipped skipped of $gpu_total"
  if [ "$total" = 0 ]; then
    stage_fail "$name" "pytest ran no test (no report at $2)"
  elif [ $(( total - skipped )) -le 0 ]; then
    stage_fail "$name" "all $total tests skipped"
  elif ! gpu_present; then
    stage_fail "$name" "no GPU on this machine: the $gpu_total GPU tests did not run"
  elif [ "$gpu_passed" = 0 ]; then
    stage_fail "$name" "no GPU test passed on a machine with a GPU ($gpu_skipped of $gpu_total skipped)"
  fi
}
