// Amax of BF16 data two values at a time, shared by the FP8 tile kernels and the FP4 quantizers:
// the per-halfword unsigned max of |bf16| bits (VIMNMX.U16x2). A BF16's bits are the top half of its
// float's bits, so the order (NaN above inf above every finite value) is the float amax's, and the
// packed result converts to the float amax's bits (quant::amax_from_bits) by a shift or a mask.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace nibble::cuda::bf16x2 {

// m with the magnitudes of the two BF16 in w folded in.
__device__ __forceinline__ uint32_t abs_max2(uint32_t m, uint32_t w) { return __vmaxu2(m, w & 0x7fff7fffu); }
// Packed halfword amax -> float amax bits of the low / high halfword, and of both together.
__device__ __forceinline__ uint32_t lo_amax_bits(uint32_t m2) { return m2 << 16; }
__device__ __forceinline__ uint32_t hi_amax_bits(uint32_t m2) { return m2 & 0xffff0000u; }
__device__ __forceinline__ uint32_t both_amax_bits(uint32_t m2) { return max(m2 << 16, m2 & 0xffff0000u); }

}  // namespace nibble::cuda::bf16x2
