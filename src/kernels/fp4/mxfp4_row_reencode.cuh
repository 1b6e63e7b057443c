// Device pieces shared by the two kernels that write MXFP4 blocks as E4M3 against a row's (or a
// 1x128 group's) largest block exponent k_max (docs/spec.md §4): the stand-alone re-encoder
// (reencode_mxfp4_e4m3.cu) and the fused Quartet forward (quartet_fused_forward.cu). Both run one CTA
// per row, up to kMaxPer blocks per thread in registers.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "nibble/kernels/reencode.hpp"
#include "nibble/format/e8m0.hpp"
#include "nibble/quant/element_codecs.hpp"

namespace nibble::cuda::row_reencode {

constexpr int kMaxThreads = 512;
constexpr int kMaxPer = 8;
constexpr int kNoBlock = -1000;  // k of a block that does not count (NaN scale or all-zero codes)

// Blocks per thread for a row of nb blocks: the smallest power of two from min_per up to kMaxPer
// that lets max_threads threads hold the row.
inline int blocks_per_thread(int64_t nb, int min_per, int max_threads = kMaxThreads) {
  int per = min_per;
  while (per < kMaxPer && nb > static_cast<int64_t>(per) * max_threads) per *= 2;
  return per;
}

// k_j of a block if it counts towards k_max (non-NaN scale, some non-zero magnitude), else kNoBlock.
__device__ __forceinline__ int block_exponent(const uint4& c, uint8_t sc) {
  const bool nonzero = ((c.x | c.y | c.z | c.w) & 0x77777777u) != 0;
  return sc != fmt::kE8M0Nan && nonzero ? fmt::e8m0_exponent(sc) : kNoBlock;
}

// 4 E2M1 codes (16 bits) -> 4 E4M3 bytes through the magnitude table (lo, hi), signs moved to bit 7.
__device__ __forceinline__ uint32_t lookup4(uint32_t x16, uint32_t lo, uint32_t hi) {
  const uint32_t mags = __byte_perm(lo, hi, x16 & 0x7777u);
  const uint32_t b = __byte_perm(x16, 0, 0x1100);  // bytes: x0, x0, x1, x1
  return mags | ((b << 4) & 0x00800080u) | (b & 0x80008000u);
}

// The 32 E4M3 codes of one block re-encoded against k_max, as 8 words. Blocks whose shift
// k_j - k_max + 6 is in the fast range take the byte table of reencode.hpp (4 elements per byte
// permute); any other block calls quant::reencode_e2m1_as_e4m3 per element, the reference's function.
__device__ __forceinline__ void block_e4m3(const uint4& c, uint8_t sc, int k_max, uint32_t (&o)[8]) {
  const uint32_t w[4] = {c.x, c.y, c.z, c.w};
  const int kj = fmt::e8m0_exponent(sc);
  const int shift = kj - k_max + 6;
  if (sc == fmt::kE8M0Nan) {
#pragma unroll
    for (int i = 0; i < 8; ++i) o[i] = 0x7F7F7F7Fu;  // NaN block -> E4M3 NaN, as the reference
  } else if (shift >= kReencodeFastShiftMin && shift <= kReencodeFastShiftMax) {
    const uint64_t t = e2m1_to_e4m3_magnitudes(shift);
    const uint32_t lo = static_cast<uint32_t>(t), hi = static_cast<uint32_t>(t >> 32);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      o[2 * i] = lookup4(w[i] & 0xFFFFu, lo, hi);
      o[2 * i + 1] = lookup4(w[i] >> 16, lo, hi);
    }
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      uint32_t v = 0;
      for (int j = 0; j < 4; ++j) {
        const uint8_t e2m1 = static_cast<uint8_t>((w[i / 2] >> (16 * (i % 2) + 4 * j)) & 0xF);
        v |= static_cast<uint32_t>(quant::reencode_e2m1_as_e4m3(e2m1, kj, k_max)) << (8 * j);
      }
      o[i] = v;
    }
  }
}

// CTA-wide max of a and min of b (every thread gets the result).
__device__ __forceinline__ void cta_extremes(int& a, int& b) {
  __shared__ int smax[kMaxThreads / 32], smin[kMaxThreads / 32];
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) {
    a = max(a, __shfl_xor_sync(0xffffffffu, a, d));
    b = min(b, __shfl_xor_sync(0xffffffffu, b, d));
  }
  const int warp = threadIdx.x / 32, warps = blockDim.x / 32;
  if (threadIdx.x % 32 == 0) {
    smax[warp] = a;
    smin[warp] = b;
  }
  __syncthreads();
  a = smax[0];
  b = smin[0];
  for (int i = 1; i < warps; ++i) {
    a = max(a, smax[i]);
    b = min(b, smin[i]);
  }
}

}  // namespace nibble::cuda::row_reencode
