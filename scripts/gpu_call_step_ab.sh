#!/usr/bin/env bash
# One GPU call: A/B of the PyTorch layer's Python side on the step benchmark. Builds nibble._C with CUDA
# (build-py-gpu) and runs the given Python GPU tests, then bench/step_bench.py for codonfm-5b (31 x 512)
# and llama-3-8b (1 x 4096) with PYTHONPATH=python ("new") and PYTHONPATH=$OLD ("old": a copy of
# python/ from before the change, carried by the call) in the order old new new old, same _C.
# Usage: OLD=.ab/python_old RECIPES=bf16,fp8-delayed bash scripts/gpu_call_step_ab.sh [pytest args]
# Everything lands in $OUT/ab, packed into $OUT/ab.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/ab
source scripts/gpu_call_lib.sh
JOBS=16 DEADLINE=${PY_DEADLINE:-220} OUT=$R bash scripts/gpu_python_test.sh "$@" >"$R/python-gpu.txt" 2>&1
tail -2 "$R/python-gpu.txt"
recipes=${RECIPES:-bf16,fp8-delayed,fp8-current}
i=0
for v in old new new old; do
  i=$((i + 1))
  p=python; [ "$v" = old ] && p=${OLD:?OLD}
  for m in codonfm-5b llama-3-8b; do
    extra=(); [ "$m" = llama-3-8b ] && extra=(--tokens 4096 --seq-len 4096)
    f="$R/step-$i-$v-$m"
    PYTHONPATH=$p NIBBLE_BUILD_DIR=build-py-gpu timeout 90 python3 bench/step_bench.py --preset "$m" "${extra[@]}" \
      --recipes "$recipes" --reps 10 --warmup 3 --json "$f.json" >"$f.txt" 2>&1
    echo "== $i $v $m rc=$?"; grep -E "^[a-z0-9-]+ +[0-9.]+ ms" "$f.txt" | cut -c1-48
  done
done
tar -C "$OUT" -czf "$OUT/ab.tgz" ab && rm -rf "$R"
