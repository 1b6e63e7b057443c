// How a thread of the CUDA NVFP4 quantizer (src/kernels/fp4/quantize_nvfp4.cu) holds and reads its 16-row x
// 8-column chunk of x: the launch geometry, the kernel parameters, the chunk staged in shared memory
// (Chunk) or held in registers (RegChunk), and the chunk's column pairs, row halves and maxima.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "fp4/nvfp4_group_math.cuh"

namespace nibble::cuda::nvfp4 {

constexpr int kThreads = 128;           // 4 warps: 2 (rows) x 2 (columns)
constexpr int kChunkRows = 16, kChunkCols = 8;
constexpr int kWarpRows = 4 * kChunkRows, kWarpCols = 8 * kChunkCols;  // 64 x 64
constexpr int kCtaRows = 2 * kWarpRows, kCtaCols = 2 * kWarpCols;      // 128 x 128
constexpr int kCodes = 128;             // UE4M3 codes 0 .. 0x7F (0x7F = NaN) of a non-negative scale

struct Copy {
  uint8_t* codes = nullptr;
  uint8_t* scales = nullptr;
  uint32_t* amax_bits = nullptr;  // = the copy's global_scale slot, reinterpreted during the launch
  bool rht = false;
};
struct Params {
  int64_t rows = 0, cols = 0;
  int block_rows = 1;
  quant::SrKey key;  // enabled: the stochastic kernel runs
  fp4::SrDraw draw;      // its generator, with host-computed round keys (the row-wise copy)
  fp4::SrDraw col_draw;  // the column-wise copy's (its own seed, or draw's)
  Copy row, col;
};

// A thread's 16 x 8 chunk of x, staged in shared memory as 32-bit words, word-major over the CTA's
// threads: word q of chunk row i of thread t sits at stage[(i * kWords + q) * kThreads + t], so every
// warp access (one i, q for all lanes) reads 32 consecutive words, free of bank conflicts for row
// reads and column reads alike. A thread reads back only what it wrote: no barrier. Staging keeps the
// per-row and per-column loops rolled (a fully unrolled register version is 10-25 K instructions,
// beyond the instruction cache, and slower).
template <class In>
struct Chunk {
  using Elem = In;
  static constexpr int kUnroll = 1;  // the loops over a staged chunk stay rolled (see above)
  static constexpr int kWords = kChunkCols * static_cast<int>(sizeof(In)) / 4;  // per row: 4 (BF16), 8 (FP32)
  static constexpr int kStageWords = kChunkRows * kWords * kThreads;
  uint32_t* base;

  // All 16-byte loads first (in flight together), then the shared-memory stores. Rows and columns
  // outside the tensor read as zeros (no effect on an amax; their codes are never stored).
  __device__ __forceinline__ void load(uint32_t* stage, const In* __restrict__ x, int64_t row0, int64_t col0, const Params& p) {
    base = stage + threadIdx.x;
    constexpr int kVec = kWords / 4;  // 16-byte loads per row
    uint4 raw[kChunkRows * kVec];
    const bool cols_in = col0 < p.cols;
#pragma unroll
    for (int i = 0; i < kChunkRows; ++i) {
      const bool in = cols_in && row0 + i < p.rows;
#pragma unroll
      for (int h = 0; h < kVec; ++h) {
        raw[i * kVec + h] =
            in ? __ldg(reinterpret_cast<const uint4*>(x + (row0 + i) * p.cols + col0) + h) : make_uint4(0, 0, 0, 0);
      }
    }
#pragma unroll
    for (int i = 0; i < kChunkRows * kVec; ++i) {
      base[(4 * i + 0) * kThreads] = raw[i].x;
      base[(4 * i + 1) * kThreads] = raw[i].y;
      base[(4 * i + 2) * kThreads] = raw[i].z;
      base[(4 * i + 3) * kThreads] = raw[i].w;
    }
  }
  __device__ __forceinline__ uint32_t word(int i, int q) const { return base[(i * kWords + q) * kThreads]; }
  // Element (i, k); k compile-time after unrolling for the BF16 half selection.
  __device__ __forceinline__ float at(int i, int k) const {
    if constexpr (sizeof(In) == 2) {
      const uint32_t w = word(i, k / 2);
      return fmt::bits_float(k % 2 == 0 ? w << 16 : w & 0xffff0000u);
    } else {
      return fmt::bits_float(word(i, k));
    }
  }
};

// The same 16 x 8 BF16 chunk held in registers (16 x 4 words), for the amax pass: it reads each word
// once, so staging it through shared memory only adds traffic (ncu: a staged amax pass runs at 58%
// issue use with the L1/shared pipe 81% busy). Loops over it unroll fully (kUnroll), so every
// word index is a compile-time constant and the words stay in registers.
struct RegChunk {
  using Elem = uint16_t;
  static constexpr int kUnroll = kChunkRows;
  static constexpr int kWords = kChunkCols / 2;
  uint32_t w[kChunkRows][kWords];
  __device__ __forceinline__ void load(const uint16_t* __restrict__ x, int64_t row0, int64_t col0, const Params& p) {
    const bool cols_in = col0 < p.cols;
#pragma unroll
    for (int i = 0; i < kChunkRows; ++i) {
      const uint4 r = cols_in && row0 + i < p.rows ? __ldg(reinterpret_cast<const uint4*>(x + (row0 + i) * p.cols + col0))
                                                   : make_uint4(0, 0, 0, 0);
      w[i][0] = r.x;
      w[i][1] = r.y;
      w[i][2] = r.z;
      w[i][3] = r.w;
    }
  }
  __device__ __forceinline__ uint32_t word(int i, int q) const { return w[i][q]; }
  __device__ __forceinline__ float at(int i, int k) const {
    const uint32_t x = w[i][k / 2];
    return fmt::bits_float(k % 2 == 0 ? x << 16 : x & 0xffff0000u);
  }
};

// Columns 2q and 2q + 1 of the chunk (two 1x16 groups of x^T; BF16: one word per row holds both),
// rotated (with the reference's BF16 output) when the copy asks for it.
template <class C>
__device__ __forceinline__ void column_pair(const C& c, int q, bool rht, float* w0, float* w1) {
  using In = typename C::Elem;
#pragma unroll
  for (int i = 0; i < kChunkRows; ++i) {
    if constexpr (sizeof(In) == 2) {
      const uint32_t x = c.word(i, q);
      w0[i] = fmt::bits_float(x << 16);
      w1[i] = fmt::bits_float(x & 0xffff0000u);
    } else {
      w0[i] = fmt::bits_float(c.word(i, 2 * q));
      w1[i] = fmt::bits_float(c.word(i, 2 * q + 1));
    }
  }
  if (rht) {
    rotate16_unnormalised(w0);
    rotate16_unnormalised(w1);
    rht_outputs<kChunkRows>(w0);
    rht_outputs<kChunkRows>(w1);
  }
}
// Row i of the chunk (half of a row-wise 1x16 group), rotated when the copy asks for it. All lanes call.
template <class C>
__device__ __forceinline__ void row_half(const C& c, int i, bool rht, int half, float* v) {
#pragma unroll
  for (int k = 0; k < kChunkCols; ++k) v[k] = c.at(i, k);
  if (rht) {
    rotate16_split_unnormalised(v, half);
    rht_outputs<kChunkCols>(v);
  }
}
__device__ __forceinline__ uint32_t pair_max(uint32_t a) { return max(a, __shfl_xor_sync(0xffffffffu, a, kPartner)); }

// amax bits over the whole chunk of a copy (its 8 columns, or its 16 row halves).
template <class C>
__device__ __forceinline__ uint32_t column_amax(const C& c, bool rht) {
  float m = 0.0f;
#pragma unroll C::kUnroll
  for (int q = 0; q < kChunkCols / 2; ++q) {
    float w0[kChunkRows], w1[kChunkRows];
    column_pair(c, q, false, w0, w1);
    if (rht) {
      m = fp4::max_nan(m, fp4::max_nan(rotated_max_abs16(w0), rotated_max_abs16(w1)));
    } else {
      m = fp4::max_nan(m, fp4::max_nan(max_abs<kChunkRows>(w0), max_abs<kChunkRows>(w1)));
    }
  }
  return quant::abs_bits(rht ? rht_output(m) : m);
}
template <class C>
__device__ __forceinline__ uint32_t row_amax(const C& c, bool rht, int half) {
  using In = typename C::Elem;
  if constexpr (sizeof(In) == 2) {
    if (!rht) {
      // Unrotated BF16: the max of the magnitudes' bit patterns, two per word (__vmaxu2): BF16 -> FP32
      // only appends zero bits, so (max BF16 magnitude bits) << 16 is abs_bits of the max, NaN included.
      uint32_t m = 0;
#pragma unroll C::kUnroll
      for (int i = 0; i < kChunkRows; ++i) {
#pragma unroll
        for (int q = 0; q < C::kWords; ++q) m = bf16x2::abs_max2(m, c.word(i, q));
      }
      return max(m >> 16, m & 0xffffu) << 16;  // == bf16x2::both_amax_bits(m); this form keeps the tested SASS
    }
  }
  // The unnormalised maximum, then one rht_output (monotone, see rht_output).
  float m = 0.0f;
#pragma unroll C::kUnroll
  for (int i = 0; i < kChunkRows; ++i) {
    float v[kChunkCols];
#pragma unroll
    for (int k = 0; k < kChunkCols; ++k) v[k] = c.at(i, k);
    if (rht) rotate16_split_unnormalised(v, half);
    m = fp4::max_nan(m, max_abs<kChunkCols>(v));
  }
  return quant::abs_bits(rht ? rht_output(m) : m);
}

template <class In>
constexpr int kStageBytes = Chunk<In>::kStageWords * 4;  // 32 KB (BF16) or 64 KB (FP32), dynamic

}  // namespace nibble::cuda::nvfp4
