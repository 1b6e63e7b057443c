#!/usr/bin/env bash
# The GPU check, for a machine with an NVIDIA Hopper GPU, the CUDA toolkit, PyTorch and nanobind:
# builds everything (C++/CUDA, benchmarks and the Python extension) into build-gpu with 16 jobs, runs the
# GPU tests (C++ and Python), then the benchmarks. Logs and JSON land in $OUT (default gpu-check-out/).
# Each stage prints its real exit code; the script exits 1 when any stage failed (tools/gpu_stages.sh),
# including GPU tests that did not run: no test found, or on a machine with a GPU none executed / any skipped.
#
# Usage: bash tools/gpu_check.sh [stage ...]      (default: build tests bench kernels)
#   build    configure + build (C++/CUDA tests, benchmarks, nibble, the extension nibble._C with CUDA)
#   tests    ctest -L gpu, and the Python suite (tests/python) on the GPU beside it
#   sanitize compute-sanitizer's memcheck, initcheck, racecheck and synccheck over the GPU tests
#            (tools/compute_sanitizer.sh; about 8 minutes on an H100)
#   bench    nibble bench --repeat 3 on the default model (CodonFM-5B), JSON + CSV + text
#   kernels  the quantizer benchmarks (fraction of copy bandwidth), JSON + text
#   models   Mixtral-8x7B (grouped and per-expert experts, --grad-accum 8, --token-imbalance 2), Llama-3-8B
#            with --keep-bf16 first:2,last:2, each measured and predicted for this GPU
#   loss     the loss study's next runs (train/plan.py via tools/loss_study_gpu.sh, LOSS_SECONDS, default 300)
#   step     the whole-model PyTorch step benchmark (benchmarks/model_step_bench.py, arguments in STEP_ARGS;
#            torchao comes from wheels in .whl/ when present), JSON
# PACK=1 packs $OUT into $OUT/gpu-check.tgz (one file to carry back).
# Env: NIBBLE_GPU_BUILD (build folder, default build-gpu), PYTHON (default python3), OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-check-out}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
PY=$(command -v "${PYTHON:-python3}" || echo "${PYTHON:-python3}")
t0=$(date +%s)
source tools/gpu_stages.sh
stages=("$@"); [ ${#stages[@]} -eq 0 ] && stages=(build tests bench kernels)
bld=${NIBBLE_GPU_BUILD:-build-gpu}
nib=$bld/nibble
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,memory.total --format=csv \
  >"$OUT/gpu.txt" 2>&1
head -2 "$OUT/gpu.txt"

for stage in "${stages[@]}"; do
  case $stage in
    build)
      { cmake -S . -B "$bld" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNIBBLE_BENCH=ON -DNIBBLE_PYTHON=ON \
          -DPython_EXECUTABLE="$PY" && cmake --build "$bld" -j 16 -- -k 0; } >"$OUT/build.txt" 2>&1
      stage_rc build $?; grep -E "error|FAILED" "$OUT/build.txt" | head -20 ;;
    tests)
      rm -f "$OUT/python-gpu-tests.xml"
      ( PYTHONPATH=python NIBBLE_BUILD_DIR="$bld" timeout 420 "$PY" -m pytest -q -p no:cacheprovider -o addopts="" \
          -rfE --junitxml="$OUT/python-gpu-tests.xml" tests/python >"$OUT/python-gpu-tests.txt" 2>&1 ) &
      ppid=$!
      ctest --test-dir "$bld" -L gpu --output-on-failure --timeout 300 >"$OUT/gpu-tests.txt" 2>&1
      rc=$?; stage_rc "C++ GPU tests" $rc "$(grep 'tests passed' "$OUT/gpu-tests.txt")"
      grep -E "FAILED|Failure|\(Skipped\)" "$OUT/gpu-tests.txt" | head -20
      check_ctest_ran "C++ GPU tests" "$OUT/gpu-tests.txt"
      wait $ppid
      rc=$?; stage_rc "Python tests" $rc "$(tail -1 "$OUT/python-gpu-tests.txt")"
      grep -E "^(FAILED|ERROR) " "$OUT/python-gpu-tests.txt" | head -20
      check_pytest_ran "Python tests" "$OUT/python-gpu-tests.xml" ;;
    sanitize)
      bash tools/compute_sanitizer.sh "$bld" >"$OUT/compute-sanitizer.txt" 2>&1
      stage_rc sanitize $?; cat "$OUT/compute-sanitizer.txt" ;;
    bench)
      timeout 300 $nib bench --quiet --repeat 3 --json "$OUT/bench-codonfm-5b.json" \
        --csv "$OUT/bench-codonfm-5b.csv" >"$OUT/bench-codonfm-5b.txt" 2>&1
      stage_rc bench $?; grep -E "^(bf16|fp8|mxfp|nvfp|quartet)" "$OUT/bench-codonfm-5b.txt" | head -40 ;;
    kernels)
      for b in fp8 fp4; do
        timeout 150 "$bld/benchmarks/gpu_quant_${b}_bench" --json "$OUT/quantizers-$b.json" >"$OUT/quantizers-$b.txt" 2>&1
        stage_rc "quantizers-$b" $?
      done ;;
    models)
      gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
      run() {  # name, then nibble bench arguments; measured here, then predicted for this GPU
        local name=$1; shift
        timeout 200 $nib bench --quiet "$@" --json "$OUT/$name.json" >"$OUT/$name.txt" 2>&1
        stage_rc "$name" $?
        $nib bench --quiet "$@" --gpu "$gpu" --json "$OUT/$name-predicted.json" >"$OUT/$name-predicted.txt" 2>&1
        stage_rc "$name-predicted" $?
      }
      mix="--hf-config tests/workload/fixtures/mixtral-8x7b.config.json --mbs 1 --seq 4096 --mode step"
      run bench-mixtral-8x7b $mix --moe both
      run bench-mixtral-8x7b-ga8 $mix --grad-accum 8
      run bench-mixtral-8x7b-imbalance2 $mix --token-imbalance 2
      run bench-llama-3-8b-keep-bf16 --model llama-3-8b --mbs 1 --seq 8192 --mode step --keep-bf16 first:2,last:2 ;;
    step)
      export PYTHONPATH=python NIBBLE_BUILD_DIR="$bld"
      [ -d .whl ] && "$PY" -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
        && export PYTHONPATH=python:/tmp/site
      timeout 420 "$PY" benchmarks/model_step_bench.py ${STEP_ARGS:-} --json "$OUT/model-step.json" >"$OUT/step.txt" 2>&1
      stage_rc step $?; tail -30 "$OUT/step.txt" ;;
    loss)
      # The loss study (train/plan.py) for LOSS_SECONDS (default 300), on the extension the build stage made;
      # needs data/corpus's streams (tools/make_corpus.sh) carried with the call. Rows land in $OUT/loss/.
      OUT="$OUT/loss" NIBBLE_PY_BUILD="$bld" bash tools/loss_study_gpu.sh "${LOSS_SECONDS:-300}"
      stage_rc loss $? ;;
    *) echo "unknown stage $stage (build tests sanitize bench kernels models step loss)"; exit 2 ;;
  esac
done
if [ "${PACK:-0}" = 1 ]; then
  tar -C "$OUT" -czf /tmp/gpu-check.tgz . && mv /tmp/gpu-check.tgz "$OUT/gpu-check.tgz"
  stage_rc pack $?
fi
stages_exit
