#!/usr/bin/env bash
# One GPU call: a CUDA kernel change validated and A/B-timed in the same call. Builds this tree in
# build-gpu (every C++ GPU test runs before any timing) and, alongside it, a copy of the tree with
# BASE's files laid over it: BASE mirrors repository paths and holds the changed files as they were
# before the change (carried in .ab/, e.g. `git show HEAD~1:path > .ab/base/path`). Then the FP8 and
# FP4 kernel benchmarks run in the order base new new base, so drift between runs shows as the spread
# of the two runs of each side. KNOBS="VAR=VALUE ..." reruns both new benchmarks once per knob
# (VAR=VALUE@fp8 or @fp4: only that benchmark);
# TORCH=1 runs torch.compile of the same math on the same tensors (bench/torch_compile_fp{8,4}.py);
# BENCH=1 then runs nibble bench on the default model (JSON, HTML, CSV; BENCH_ARGS adds options, e.g. "--mode all"),
# and BENCH_KNOB="VAR=VALUE" runs it once more with that engine knob set; NOISE=1 the bench-noise experiment. Everything lands in $OUT/run,
# packed into $OUT/run.tgz.
# BASE=none skips the base tree: new, the knobs, new again (for changes behind A/B knobs). QUICK=1 (a
# second call on the warm machine): no ctest and one new-side run, e.g. `BASE=none QUICK=1 TORCH=1`
# (torch.compile compiles each function per shape: minutes; TORCH_TIMEOUT per script, default 250 s).
# Usage: BASE=.ab/base|none [KNOBS=...] [KNOB_TESTS=VAR=VALUE:ctest_name ...] [TORCH=1] [BENCH=1] [NOISE=1] bash scripts/gpu_call_kernel_ab.sh   (device tool: carry [".ab"])
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu_call_lib.sh
base_src=${BASE:?BASE: folder with the pre-change files, or none (knob A/Bs only: new, knobs, new)}
tmp=/tmp/nibble-base
benches="gpu_quant_fp8_bench gpu_quant_fp4_bench"
bpid=
if [ "$base_src" != none ]; then
  rm -rf "$tmp" && mkdir -p "$tmp"
  tar --exclude='./build*' --exclude=./.ab --exclude=./.git -cf - . | tar -C "$tmp" -xf -
  cp -a "$base_src"/. "$tmp"/
  ( { cmake -S "$tmp" -B "$tmp/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNIBBLE_BENCH=ON &&
      cmake --build "$tmp/build" -j 6 --target $benches; } >"$R/build-base.txt" 2>&1
    echo "build rc=$?" >>"$R/build-base.txt" ) &
  bpid=$!
fi
{ cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DNIBBLE_BENCH=ON &&
  cmake --build build-gpu -j "$([ -n "$bpid" ] && echo 10 || echo 16)" ${BENCH_ONLY:+--target $benches} -- -k 0
} >"$R/build.txt" 2>&1
rc=$?; echo "$(el) build rc=$rc"; grep -E "error|FAILED" "$R/build.txt" | head -20
# QUICK=1 (a later call on a warm machine whose tree passed its GPU tests): no ctest, one new-side run.
# BENCH_ONLY=1 (a short call, a tree whose GPU tests passed elsewhere): builds the two kernel benchmarks
# only and runs no ctest (new, knobs, new as without it).
[ "${QUICK:-0}" = 1 ] || [ -n "${BENCH_ONLY:-}" ] || gpu_ctest
# KNOB_TESTS="VAR=VALUE:ctest_name ...": a knob's kernel variant through the GPU test that covers it
# (bit-exact against the CPU reference) before it is timed.
for kt in ${KNOB_TESTS:-}; do
  k=${kt%%:*}; t=${kt#*:}
  env "$k" ctest --test-dir build-gpu -R "^$t\$" --output-on-failure --timeout 200 \
    >"$R/knobtest-$(echo "$k" | tr '=' '-')-$t.txt" 2>&1
  echo "$(el) knob test $k $t rc=$?"
done
sides="new"
if [ -n "$bpid" ]; then
  wait $bpid
  echo "$(el) base $(tail -1 "$R/build-base.txt")"
  sides="base new new base"
fi
i=0
run_side() {
  i=$((i + 1))
  local dir=build-gpu/bench; [ "$1" = base ] && dir=$tmp/build/bench
  for b in $benches; do
    timeout 100 "$dir/$b" --json "$R/$i-$1-$b.json" >"$R/$i-$1-$b.txt" 2>&1
    rc=$?; echo "$(el) $i $1 $b rc=$rc"
  done
}
for side in $sides; do run_side "$side"; done
for kb in ${KNOBS:-}; do
  # VAR=VALUE reruns both benchmarks; VAR=VALUE@fp8 or @fp4 only the one the knob touches.
  k=${kb%@*}; only=; [ "$k" != "$kb" ] && only=gpu_quant_${kb##*@}_bench
  n=$(echo "$k" | tr '=' '-')
  for b in $benches; do
    [ -n "$only" ] && [ "$b" != "$only" ] && continue
    env "$k" timeout 100 "build-gpu/bench/$b" --json "$R/knob-$n-$b.json" >"$R/knob-$n-$b.txt" 2>&1
    rc=$?; echo "$(el) knob $k $b rc=$rc"
  done
done
[ -z "$bpid" ] && [ "${QUICK:-0}" != 1 ] && run_side new  # BASE=none: the new side again, so drift shows
# TORCH=1: torch.compile of the same math on the same tensors in this call (issue 4: never slower than
# it), after the last new-side kernel run, whose JSON is copied under the names perf_tables.py pairs.
if [ "${TORCH:-0}" = 1 ]; then
  for b in $benches; do
    last=$(ls "$R"/*-new-$b.json 2>/dev/null | sort -n | tail -1)
    [ -n "$last" ] && cp "$last" "$R/$b.json"
  done
  for t in fp8 fp4; do
    timeout "${TORCH_TIMEOUT:-250}" python3 bench/torch_compile_$t.py --json "$R/torch_compile_$t.json" \
      >"$R/torch_compile_$t.txt" 2>&1
    rc=$?; echo "$(el) torch.compile $t rc=$rc"
  done
  python3 scripts/perf_tables.py "$R" | sed -n '/nibble vs torch.compile/,/slower than/p' | tail -3
fi
if [ "${BENCH:-0}" = 1 ]; then
  timeout 150 build-gpu/nibble bench ${BENCH_ARGS:-} --quiet --json "$R/bench.json" --html "$R/bench.html" --csv "$R/bench.csv" \
    >"$R/bench.txt" 2>&1
  rc=$?; echo "$(el) bench rc=$rc"
  gpu_bench_summary bench.json
  # BENCH_KNOB="VAR=VALUE": the same bench again with an engine knob set (bench-knob.*), e.g.
  # NIBBLE_MXFP4_SCALES=tiled, so both sides of an engine-path A/B come from one machine.
  if [ -n "${BENCH_KNOB:-}" ]; then
    env "$BENCH_KNOB" timeout 150 build-gpu/nibble bench ${BENCH_ARGS:-} --quiet --json "$R/bench-knob.json" \
      --html "$R/bench-knob.html" --csv "$R/bench-knob.csv" >"$R/bench-knob.txt" 2>&1
    rc=$?; echo "$(el) bench ($BENCH_KNOB) rc=$rc"
    gpu_bench_summary bench-knob.json
  fi
fi
# NOISE=1: the row-to-row timing experiment (docs/perf/bench-noise.md) on the new build.
[ "${NOISE:-0}" = 1 ] && gpu_bench_noise_runs build-gpu/nibble
gpu_pack_results
echo "total $(( $(date +%s) - t0 )) s"
