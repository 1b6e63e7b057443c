# Sourced by the one-call GPU scripts (gpu_call_*.sh): sets R (default $OUT/run), t0 and
# el (elapsed-time prefix), records the GPU, and gpu_build_and_python_tests builds the C++/CUDA tree
# in build-gpu (BUILD_JOBS, default 10) while the Python extension builds and its GPU tests run
# (PY_JOBS, default 6), then runs the C++ GPU tests. Logs: $R/{gpu,build,python-gpu,gpu-tests}.txt.
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
R=${R:-$OUT/run}  # a caller may name its own output folder first
mkdir -p "$R"
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s]"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv >"$R/gpu.txt" 2>&1

# The C++/CUDA tree alone (16 jobs) and its GPU tests.
gpu_build_and_tests() {
  { cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DNIBBLE_BENCH=ON &&
    cmake --build build-gpu -j 16 -- -k 0; } >"$R/build.txt" 2>&1
  rc=$?; echo "$(el) build rc=$rc"; grep -E "error|FAILED" "$R/build.txt" | head -20
  gpu_ctest
}

gpu_ctest() {
  ctest --test-dir build-gpu -L gpu --output-on-failure --timeout 200 >"$R/gpu-tests.txt" 2>&1
  echo "$(el) $(grep 'tests passed' "$R/gpu-tests.txt")"
  grep -E "FAILED|Failure" "$R/gpu-tests.txt" | head -20
}

gpu_build_and_python_tests() {
  ( { cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DNIBBLE_BENCH=ON &&
      cmake --build build-gpu -j "${BUILD_JOBS:-10}" -- -k 0; } >"$R/build.txt" 2>&1
    echo "build rc=$?" >>"$R/build.txt" ) &
  local bpid=$!
  # PY_TESTS: pytest arguments (files, -k ...) instead of the whole suite.
  # shellcheck disable=SC2086
  JOBS=${PY_JOBS:-6} DEADLINE=${PY_DEADLINE:-240} OUT=$R bash scripts/gpu_python_test.sh ${PY_TESTS:-} >"$R/python-gpu.txt" 2>&1
  echo "$(el) python: $(tail -1 "$R/python-gpu.txt")"
  wait $bpid
  echo "$(el) $(tail -1 "$R/build.txt")"
  gpu_ctest
}

# One line per summary row of each bench JSON named (relative to $R).
gpu_bench_summary() {
  python3 - "$R" "$@" <<'PY'
import json, sys, os
R = sys.argv[1]
for f in sys.argv[2:]:
    p = os.path.join(R, f)
    if not os.path.exists(p): continue
    for s in json.load(open(p))["summary"]:
        print(f"{f[:18]:18s} {s['recipe']:12s} {s['mode']:14s} {s['layer_ms']:7.2f} ms {s['speedup_vs_bf16']:5.2f}x "
              f"bound {s.get('bound_layer_ms') or 0:6.2f}")
PY
}

# The row-to-row timing experiment of docs/perf/bench-noise.md on an already built nibble binary ($1):
# the default sweep, the same with --warmup-ms (WARMUP_MS, default 200), and both with the FP8 recipes in
# the reverse order, while nvidia-smi logs SM clock, power and temperature every 100 ms; then
# scripts/bench_noise.py compares them. Output: $R/{bench-*.json,smi.csv,marks.txt,noise.txt}.
gpu_bench_noise_runs() {
  local bin=$1
  # The throttle-reason field was renamed (clocks_event_reasons in newer drivers); use whichever exists.
  local reasons=clocks_event_reasons.active
  nvidia-smi --query-gpu=$reasons --format=csv >/dev/null 2>&1 || reasons=clocks_throttle_reasons.active
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,$reasons \
    --format=csv -lms 100 >"$R/smi.csv" 2>&1 &
  local smi=$!
  local ms=${WARMUP_MS:-200}
  local reversed=bf16,fp8-current,fp8-delayed,fp8-block,mxfp8,nvfp4,mxfp4,quartet
  noise_run() {  # name, then nibble bench arguments
    local name=$1; shift
    echo "$(el) start $name" >>"$R/marks.txt"
    timeout 240 "$bin" bench --quiet --json "$R/bench-$name.json" "$@" >"$R/bench-$name.txt" 2>&1
    rc=$?; echo "$(el) $name rc=$rc"; echo "$(el) end $name" >>"$R/marks.txt"
  }
  noise_run default
  noise_run warm --warmup-ms "$ms"
  noise_run reversed --recipes "$reversed"
  noise_run reversed-warm --recipes "$reversed" --warmup-ms "$ms"
  kill $smi 2>/dev/null
  python3 scripts/bench_noise.py "$R"/bench-default.json "$R"/bench-warm.json "$R"/bench-reversed.json \
    "$R"/bench-reversed-warm.json >"$R/noise.txt" 2>&1
  cat "$R/noise.txt"
}

# Packs $R into $R.tgz beside it (R=$OUT/run: $OUT/run.tgz, the one file the device tool returns) and
# removes $R. A tarball of that name that already exists (an earlier script in the same call) is kept:
# the new one becomes run-2.tgz, run-3.tgz, ... (session 25 lost a call's results to an overwrite).
gpu_pack_results() {
  local dir name out i=2
  dir=$(dirname "$R"); name=$(basename "$R"); out="$dir/$name.tgz"
  while [ -e "$out" ]; do out="$dir/$name-$i.tgz"; i=$((i + 1)); done
  tar -C "$dir" -czf "$out" "$name" && rm -rf "$R" && echo "packed $out"
}
