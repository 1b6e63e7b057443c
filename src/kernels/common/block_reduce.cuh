// CTA-wide reductions of the quantization kernels (amax bits), through CUB's BlockReduce (CCCL) rather
// than hand-written shuffle + shared-memory trees. Amax bits of |x| compare as unsigned integers (NaN
// above inf above every finite value, see quant::amax_combine_bits), so the maximum is exact and its
// order of evaluation does not matter: the results are bit-identical to any other reduction order.
//
// CUB's block collectives need exactly kThreads threads in a one-dimensional CTA, and a barrier before
// their shared storage is reused: each helper owns its storage and is called at most once per kernel.
// The MXFP4 re-encoding's row reduction (mxfp4_row_reencode.cuh, cta_extremes) launches a block size
// chosen per row length, so it keeps its own warp-shuffle reduction.
#pragma once
#include <cstdint>
#include <cub/block/block_reduce.cuh>
#include <cuda/functional>

namespace nibble::cuda::block {

// Max of `v` over the CTA (every thread calls it); the result is valid in thread 0 only.
template <int kThreads>
__device__ __forceinline__ uint32_t max_in_thread0(uint32_t v) {
  using Reduce = cub::BlockReduce<uint32_t, kThreads>;
  __shared__ typename Reduce::TempStorage storage;
  return Reduce(storage).Reduce(v, ::cuda::maximum<>{});
}

// Two maxima at once (one barrier): component-wise over the CTA, valid in thread 0 only.
struct MaxPair {
  uint32_t a, b;
};
struct MaxPairOp {
  __device__ __forceinline__ MaxPair operator()(const MaxPair& x, const MaxPair& y) const {
    return {x.a > y.a ? x.a : y.a, x.b > y.b ? x.b : y.b};
  }
};
template <int kThreads>
__device__ __forceinline__ MaxPair max_pair_in_thread0(MaxPair v) {
  using Reduce = cub::BlockReduce<MaxPair, kThreads>;
  __shared__ typename Reduce::TempStorage storage;
  return Reduce(storage).Reduce(v, MaxPairOp{});
}

}  // namespace nibble::cuda::block
