// The 128x128 BF16 tile that every FP8-family quantizer walks (per-tensor cast+transpose, 1x128 and
// 128x128 blocks, MXFP8 32-blocks). One block of 256 threads owns one tile and reads it from HBM once:
//  - row phase: each thread holds 4 rows x 16 columns in registers (8 loads of 16 bytes in flight),
//    writes the row-wise FP8 copy with 16-byte stores and parks the BF16 tile in shared memory;
//  - column phase: each lane takes one column (32 consecutive columns per warp, so shared-memory
//    reads are conflict-free) and 64 rows, and writes the column-wise (transposed) copy 16 rows at a
//    time with 16-byte stores.
// Private to src/cuda: the kernels that include it differ only in how they pick scales.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "nibble/format.hpp"

namespace nibble::cuda::fp8_tile {

inline constexpr int kTile = 128;
inline constexpr int kThreads = 256;
inline constexpr int kRowsPerThread = 4;   // row phase: rows r0, r0+32, r0+64, r0+96
inline constexpr int kColsPerThread = 16;  // row phase: one 16-column chunk = two 16-byte loads
inline constexpr int kColRows = 64;        // column phase: rows per lane (4 chunks of 16)
inline constexpr int kSmemStride = kTile + 8;  // BF16 elements; +16 bytes keeps rows 16-byte aligned

struct Smem {
  alignas(16) uint16_t x[kTile][kSmemStride];
  float part[2][kTile];  // column phase: per-column partial results of the two row halves
  uint32_t warp_part[kThreads / 32];
};

// Where this thread sits in the row phase.
struct RowPhase {
  int chunk;  // 16-column chunk 0..7 inside the tile
  int r0;     // first row 0..31 inside the tile
};
__device__ __forceinline__ RowPhase row_phase() { return {static_cast<int>(threadIdx.x & 7), static_cast<int>(threadIdx.x >> 3)}; }

// Where this thread sits in the column phase.
struct ColPhase {
  int col;   // column inside the tile 0..127
  int half;  // rows [64 half, 64 half + 64)
};
__device__ __forceinline__ ColPhase col_phase() {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  return {32 * (warp & 3) + lane, warp >> 2};
}

__device__ __forceinline__ float bf16_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

// |x| as bits: integer max over these is an exact amax in which NaN (above 0x7f800000) wins.
__device__ __forceinline__ uint32_t abs_bits(float x) { return __float_as_uint(x) & 0x7fffffffu; }

// Loads this thread's 4 x 16 elements of the tile at (row0, col0); elements outside the tensor read
// as zero (they never raise an amax and are never stored). cols must be a multiple of 16, so a chunk
// is entirely inside or entirely outside.
__device__ __forceinline__ void load_rows(const uint16_t* __restrict__ x, int64_t rows, int64_t cols,
                                          int64_t row0, int64_t col0, uint4 (&v)[kRowsPerThread][2]) {
  const RowPhase p = row_phase();
  const int64_t c = col0 + kColsPerThread * p.chunk;
#pragma unroll
  for (int k = 0; k < kRowsPerThread; ++k) {
    const int64_t r = row0 + p.r0 + 32 * k;
    if (r < rows && c < cols) {
      const uint4* src = reinterpret_cast<const uint4*>(x + r * cols + c);
      v[k][0] = __ldg(src);
      v[k][1] = __ldg(src + 1);
    } else {
      v[k][0] = v[k][1] = make_uint4(0, 0, 0, 0);
    }
  }
}

__device__ __forceinline__ void unpack16(const uint4 (&v)[2], float (&f)[16]) {
  const uint32_t w[8] = {v[0].x, v[0].y, v[0].z, v[0].w, v[1].x, v[1].y, v[1].z, v[1].w};
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    f[2 * i] = bf16_lo(w[i]);
    f[2 * i + 1] = bf16_hi(w[i]);
  }
}

// Packs 16 codes (code[0] in the lowest byte) into one 16-byte store.
__device__ __forceinline__ uint4 pack16(const uint8_t (&q)[16]) {
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    w[i] = static_cast<uint32_t>(q[4 * i]) | static_cast<uint32_t>(q[4 * i + 1]) << 8 |
           static_cast<uint32_t>(q[4 * i + 2]) << 16 | static_cast<uint32_t>(q[4 * i + 3]) << 24;
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

__device__ __forceinline__ void park_rows(Smem& s, const uint4 (&v)[kRowsPerThread][2]) {
  const RowPhase p = row_phase();
#pragma unroll
  for (int k = 0; k < kRowsPerThread; ++k) {
    uint4* dst = reinterpret_cast<uint4*>(&s.x[p.r0 + 32 * k][kColsPerThread * p.chunk]);
    dst[0] = v[k][0];
    dst[1] = v[k][1];
  }
}

// Column phase: this lane's 64 rows of its column, as floats.
__device__ __forceinline__ void read_column(const Smem& s, float (&f)[kColRows]) {
  const ColPhase p = col_phase();
#pragma unroll
  for (int i = 0; i < kColRows; ++i) f[i] = __uint_as_float(static_cast<uint32_t>(s.x[kColRows * p.half + i][p.col]) << 16);
}

// Max of `v` over the 2^log2_lanes consecutive lanes of an aligned group (1 = pairs, 3 = eights).
template <int kLog2Lanes>
__device__ __forceinline__ uint32_t group_max(uint32_t v) {
#pragma unroll
  for (int m = 1; m < (1 << kLog2Lanes); m <<= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, m));
  return v;
}

// Max over the block (every thread must call it); the result is valid in thread 0.
__device__ __forceinline__ uint32_t block_max(Smem& s, uint32_t v) {
  v = group_max<5>(v);
  if ((threadIdx.x & 31) == 0) s.warp_part[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
#pragma unroll
    for (int w = 1; w < kThreads / 32; ++w) v = max(v, s.warp_part[w]);
  }
  return v;
}

}  // namespace nibble::cuda::fp8_tile
