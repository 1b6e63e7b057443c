#!/usr/bin/env bash
# One call on the GPU machine: the step benchmark (codonfm-5b, llama-3-8b at 4096 tokens) and the
# training comparison (train/train.py, all 7 recipes), all inside MINUTES of wall time.
# Usage: bash tools/gpu_train.sh [MINUTES=8]
# Needs python3 with torch (CUDA) only: the CUDA path of nibble.torch is the torch emulation, so the
# nanobind extension nibble._C is not built or imported. Optional: a nibble binary (NIBBLE_BIN, else
# build-gpu/nibble or build/nibble) adds nibble bench's PREDICTED GEMM speedups for llama-3-8b; codonfm-5b
# uses the measured H200 run in docs/results/h200-2026-12-02/bench-codonfm-5b.json.
# Writes 6 files to $OUT: log.txt (everything printed), step-codonfm-5b.json, step-llama-3-8b.json,
# train-results.json, val_loss.svg, train.tar.gz (the whole training folder + bench inputs).
# Each stage prints its real exit code; the script exits 1 when any stage failed, was skipped for want of
# time, or left no result file (tools/gpu_stages.sh), and when torch sees no GPU (unless --device cpu).
# Smoke test without a GPU (tiny shapes; STEP_ARGS / TRAIN_ARGS are appended to the commands):
#   STEP_ARGS="--device cpu --hidden 128 --ffn 256 --heads 4 --kv-heads 2 --tokens 128 --seq-len 64 --reps 1 --warmup 0" \
#   TRAIN_ARGS="--device cpu --backend emulated --hidden 64 --layers 1 --heads 2 --seq-len 64 --batch 2 --val-batches 1" \
#   OUT=/tmp/o bash tools/gpu_train.sh 1
set -uo pipefail
cd "$(dirname "$0")/.."
source tools/gpu_stages.sh
MINUTES=${1:-8}
OUT=${OUT:-/tmp/nibble-gpu-train}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
work=$(mktemp -d /tmp/nibble-train.XXXXXX)
log=$OUT/log.txt
: >"$log"
t0=$(date +%s)
end=$(( t0 + ${MINUTES%.*} * 60 - 25 ))   # 25 s kept for packing the outputs
left() { echo $(( end - $(date +%s) )); }
say() { echo "$*" | tee -a "$log"; }
# stage NAME SECONDS CMD...: run CMD under `timeout` (TERM, then KILL 5 s later), log output and time.
stage() {
  local name=$1 limit=$2; shift 2
  [ "$limit" -lt 5 ] && { stage_fail "$name" "not run: no time left" | tee -a "$log"; failed_stages+=("$name (no time)"); return 0; }
  say "== $name (limit ${limit} s, $(( $(date +%s) - t0 )) s elapsed): $*"
  local s=$(date +%s)
  timeout -k 5 "$limit" "$@" 2>&1 | tee -a "$log"
  local rc=${PIPESTATUS[0]}
  stage_rc "$name" "$rc" "in $(( $(date +%s) - s )) s" | tee -a "$log"
  [ "$rc" = 0 ] || failed_stages+=("$name (rc=$rc)")
}
min() { [ "$1" -lt "$2" ] && echo "$1" || echo "$2"; }

say "gpu_train.sh $MINUTES min, $(date -u +%FT%TZ), git $(git rev-parse --short HEAD 2>/dev/null)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1 | tee -a "$log"
"$PY" -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'gpu', torch.cuda.is_available() and torch.cuda.get_device_name())" 2>&1 | tee -a "$log"
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null \
   && [[ "${TRAIN_ARGS:-}" != *"--device cpu"* ]]; then
  say "ERROR: torch sees no CUDA GPU; stopping (a 6 x 640 model on the CPU would not fit the budget)"
  exit 1
fi

# GEMM-only speedups for llama-3-8b at 4096 tokens from nibble's performance model (labelled PREDICTED).
llama_bench=()
for bin in ${NIBBLE_BIN:-} build-gpu/nibble build/nibble; do
  if [ -x "$bin" ] && timeout 20 "$bin" bench --model llama-3-8b --mbs 1 --seq 4096 --gpu "H200 SXM" --quiet \
       --json "$work/bench-llama-3-8b-4096-predicted.json" >"$work/nibble-bench.txt" 2>&1; then
    llama_bench=(--bench-json "$work/bench-llama-3-8b-4096-predicted.json"); say "nibble bench prediction: $bin"; break
  fi
done
[ ${#llama_bench[@]} -eq 0 ] && say "no working nibble binary: llama-3-8b step bench runs without GEMM speedups"

# Training keeps at least 62% of the time; the benchmarks get the rest, at most 100 s and 70 s.
train_min=$(( (end - t0) * 62 / 100 ))
stage step-codonfm-5b "$(min 100 $(( $(left) - train_min )))" "$PY" benchmarks/step_bench.py --preset codonfm-5b \
  --reps 5 --warmup 2 --bench-json "${BENCH_JSON:-docs/results/h200-2026-12-02/bench-codonfm-5b.json}" --json "$OUT/step-codonfm-5b.json" ${STEP_ARGS:-}
stage step-llama-3-8b "$(min 70 $(( $(left) - train_min )))" "$PY" benchmarks/step_bench.py --preset llama-3-8b \
  --tokens 4096 --seq-len 4096 --reps 5 --warmup 2 ${llama_bench[@]+"${llama_bench[@]}"} --json "$OUT/step-llama-3-8b.json" ${STEP_ARGS:-}

# train.py's own clock starts after `import torch` (~10 s): give it the time left minus 15 s, and let
# `timeout` stop it at the hard end; it rewrites its outputs after every recipe, so a cut keeps those.
tl=$(left)
tm=$(awk -v s="$tl" 'BEGIN { printf "%.2f", (s - 15) / 60 }')
stage train "$tl" "$PY" train/train.py --max-minutes "$tm" --out "$work/train" ${TRAIN_ARGS:-}

cp "$work/train/results.json" "$OUT/train-results.json" 2>/dev/null
cp "$work/train/val_loss.svg" "$OUT/val_loss.svg" 2>/dev/null
cp "$work"/*.json "$work/nibble-bench.txt" "$work/train/" 2>/dev/null
tar -czf "$OUT/train.tar.gz" -C "$work" train
rc=$?
stage_rc pack $rc | tee -a "$log"
[ "$rc" = 0 ] || failed_stages+=("pack (rc=$rc)")
for f in step-codonfm-5b.json step-llama-3-8b.json train-results.json; do
  [ -s "$OUT/$f" ] || { echo "missing result: $OUT/$f" | tee -a "$log"; failed_stages+=("no $f"); }
done
say "total $(( $(date +%s) - t0 )) s; outputs: $(ls "$OUT" | tr '\n' ' ')"
stages_exit 2>&1 | tee -a "$log"
exit "${PIPESTATUS[0]}"
