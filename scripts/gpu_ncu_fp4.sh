#!/usr/bin/env bash
# Nsight Compute sections of the quantizers that miss their bandwidth targets (issue 4), run on
# gpu_quant_fp4_bench, and for the FP8-family tile kernels (mxfp8-*, fp8-block-*) on
# gpu_quant_fp8_bench (one launch of each kernel on the first shape, act 15872x4096;
# --clock-control none leaves the clocks alone).
# Usage (on the GPU machine, after a build in build-gpu): bash scripts/gpu_ncu_fp4.sh OUTDIR [NAME ...]
# (NAMEs: the profiles below; default all).
set -uo pipefail
out=${1:?OUTDIR}
mkdir -p "$out"
b=${NCU_BENCH:-build-gpu/bench/gpu_quant_fp4_bench}  # or carried binaries
b8=${NCU_BENCH8:-build-gpu/bench/gpu_quant_fp8_bench}
sec="--section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats --section SchedulerStats
     --section WarpStateStats --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section Occupancy --section LaunchStats
     --section SourceCounters"
shift
want=" ${*:-all} "
prof() {  # name regex-of-mangled-kernel-name [fp4 bench --only SUBSTRING | fp8]
  [ "$want" = " all " ] || [[ "$want" == *" $1 "* ]] || return 0
  local cmd=("$b" --iters 20)
  if [ "${3:-}" = fp8 ]; then cmd=("$b8" --reps 20); elif [ -n "${3:-}" ]; then cmd+=(--only "$3"); fi
  # shellcheck disable=SC2086
  timeout 120 ncu --clock-control none --kernel-name-base mangled -k "regex:$2" --launch-skip 2 --launch-count 1 \
    $sec "${cmd[@]}" >"$out/ncu-$1.txt" 2>&1
  echo "ncu $1 rc=$?"
  grep -E "Duration|Executed Ipc A|Issue Slots Busy|No Eligible|DRAM Throughput|Registers Per|Achieved Occ|Executed Instructions  " \
    "$out/ncu-$1.txt" | head -12
}
# --only keeps the FP4 benchmark to the kernel profiled (its first shape is act 15872x4096).
prof quartet-bwd-rowcol-rn 'QuartetGroupsILi32ELb0EEENS1_11DenseLoaderIt' 'quartet bwd row+col rn'
prof quartet-bwd-from-mxfp4 'QuartetGroupsILi32ELb0EEENS1_11Mxfp4Loader' 'quartet bwd from mxfp4'
prof nvfp4-amax 'nvfp4_amax_kernelINS0_5nvfp48RegChunk' 'nvfp4 1x16 row+col (rht col)'
prof nvfp4-encode 'nvfp4_encode_kernelItLb0E' 'nvfp4 1x16 row+col (rht col)'
prof nvfp4-encode-sr 'nvfp4_encode_kernelItLb1E' 'nvfp4 1x16 row+col sr'
prof quartet-bwd-rowcol-sr 'QuartetGroupsILi32ELb1EEENS1_11DenseLoaderIt' 'quartet bwd row+col sr'
prof mxfp4-rowcol 'kernel_bf16' 'mxfp4 ocp row+col'
prof quartet-fwd-fused 'quartet_forward_e4m3_kernelILi32E' 'quartet fwd fused -> mxfp4+mask+e4m3'
prof quartet-epilogue 'quartet_epilogue_kernel' 'quartet epilogue'
prof reencode-row 'reencode_mxfp4_e4m3_kernel' 'reencode mxfp4->e4m3 row'
prof mxfp8-rowcol 'quantize_mxfp8_kernelILb0ELi0E' fp8
prof fp8-cast-transpose 'cast_transpose_fp8_kernel' fp8
prof fp8-block-rowcol 'quantize_fp8_block_kernelILNS1_11GranularityE0ELb0E' fp8
