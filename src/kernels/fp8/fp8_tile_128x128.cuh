// The 128x128 BF16 tile that every FP8-family quantizer walks (per-tensor cast+transpose, 1x128 and
// 128x128 blocks, MXFP8 32-blocks). One block of 256 threads owns one tile and reads it from HBM once:
//  - row phase: each thread holds 4 rows x 16 columns in registers (8 loads of 16 bytes in flight),
//    writes the row-wise FP8 copy with 16-byte stores and parks the BF16 tile in shared memory;
//  - column phase (two passes): lane (rc = lane & 7, p = lane >> 3) of warp w reads one 32-bit word
//    (a column pair) from 16 consecutive rows 16 rc .. 16 rc + 15 and so holds 16 rows of 2 columns;
//    the 8 lanes sharing p then write one 128-byte line of each of their 2 transposed rows, i.e. every
//    16-byte store instruction of the column-wise copy fills 4 whole lines (one column per lane would
//    touch 32 lines with 16 bytes each, which caps the kernels near 0.6 of a copy's speed).
// Shared memory holds the tile as 128 rows x 64 words with the word index XOR-swizzled by the row
// (see swizzle()), so the column phase's 32 lanes (8 row runs x 4 consecutive words) hit 32 distinct
// banks, while the row phase's 16-byte groups stay 16-byte aligned.
// Private to src/kernels: the kernels that include it differ only in how they pick scales.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "common/bf16x2_amax.cuh"
#include "common/block_reduce.cuh"
#include "nibble/kernels/fp8_hw_convert_math.hpp"
#include "nibble/format.hpp"
#include "nibble/quant/element_codecs.hpp"

namespace nibble::cuda::fp8_tile {

inline constexpr int kTile = 128;
inline constexpr int kThreads = 256;
inline constexpr int kRowsPerThread = 4;   // row phase: rows r0, r0+32, r0+64, r0+96
inline constexpr int kColsPerThread = 16;  // row phase: one 16-column chunk = two 16-byte loads
inline constexpr int kWords = kTile / 2;   // 32-bit words (BF16 column pairs) per tile row
inline constexpr int kColRows = 16;        // column phase: rows per lane
inline constexpr int kColPasses = 2;       // column phase: 8 warps x 4 words x 2 passes = 64 words

struct Smem {
  alignas(16) uint32_t x[kTile][kWords];  // swizzled: word q of row r sits at x[r][slot(r, q)]
};

// Multiples of 4 words keep 16-byte groups intact. The bank quad is ((r >> 3) & 7) ^ ((r >> 6) & 1):
// a bijection over the 8 lanes of both column reads (rows 16 rc + i, and rows 8 rc + i / 64 + 8 rc + i
// of read_column_pair_split), so neither has a bank conflict (checked by enumeration).
__device__ __forceinline__ int swizzle(int r) { return (((r >> 3) & 7) ^ ((r >> 6) & 1)) << 2; }
// Where word q of row r lives. The extra term flips the quad of words 32..63, so the row phase's
// quarter-warp (one row, chunks 0..7, words 8 c .. 8 c + 3) also hits 32 distinct banks.
__device__ __forceinline__ int slot(int r, int q) { return q ^ swizzle(r) ^ ((q >> 3) & 4); }

// ---- which tile a block takes ---------------------------------------------------------------------
// With a transposed copy, blocks walk groups of kGroupRows tile rows column by column: the ~500
// blocks resident at once then cover ~32 x 16 tiles, so every input row is read in runs of ~16 tiles
// (4 KB) and every transposed row is written in runs of 32 x 128 bytes (4 KB). Plain row-major order
// (kept for row-wise-only calls, whose outputs follow the input) writes the transposed rows in
// 128-byte pieces spread over the whole output once cols is large.
inline constexpr int kGroupRows = 32;
struct TileCoord {
  int64_t tr, tc;  // tile row and tile column
};
// 32-bit arithmetic (a grid has < 2^31 blocks): 64-bit division is a long subroutine.
__device__ __forceinline__ TileCoord tile_coord(uint32_t b, uint32_t tiles_r, uint32_t tiles_c, bool grouped) {
  if (!grouped) return {b / tiles_c, b % tiles_c};
  const uint32_t per_group = kGroupRows * tiles_c;
  const uint32_t first = b / per_group * kGroupRows, in = b % per_group;
  const uint32_t n = min(static_cast<uint32_t>(kGroupRows), tiles_r - first);  // the last group may be shorter
  return {first + in % n, in / n};
}
// The tile of this block in a (tiles_c, tiles_r) grid; reversed: the order runs from the last tile back
// (a second pass over a tensor then starts with the tiles a first pass read last, while they are in L2).
__device__ __forceinline__ TileCoord block_tile(bool grouped, bool reversed = false) {
  const uint32_t b = blockIdx.y * gridDim.x + blockIdx.x;
  return tile_coord(reversed ? gridDim.x * gridDim.y - 1 - b : b, gridDim.y, gridDim.x, grouped);
}

// Where this thread sits in the row phase.
struct RowPhase {
  int chunk;  // 16-column chunk 0..7 inside the tile
  int r0;     // first row 0..31 inside the tile
};
__device__ __forceinline__ RowPhase row_phase() { return {static_cast<int>(threadIdx.x & 7), static_cast<int>(threadIdx.x >> 3)}; }

// Where this thread sits in column pass `pass` (0 or 1).
struct ColPhase {
  int word;  // column pair 0..63 inside the tile: columns 2 word and 2 word + 1
  int rc;    // rows [16 rc, 16 rc + 16)
};
__device__ __forceinline__ ColPhase col_phase(int pass) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  return {32 * pass + 4 * warp + (lane >> 3), lane & 7};
}

__device__ __forceinline__ float bf16_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

// |x| as bits: integer max over these is an exact amax in which NaN (above 0x7f800000) wins.
__device__ __forceinline__ uint32_t abs_bits(float x) { return __float_as_uint(x) & 0x7fffffffu; }

// The same amax on two BF16 at once (bf16x2_amax.cuh); lo / hi = the even / odd column of a pair.
using bf16x2::abs_max2;
using bf16x2::both_amax_bits;
using bf16x2::hi_amax_bits;
using bf16x2::lo_amax_bits;

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

// Packed amax over 16 BF16 (8 words): per-halfword max, combined to float bits.
__device__ __forceinline__ uint32_t amax16_bits(const uint4 (&v)[2]) {
  uint32_t m = 0;
  m = abs_max2(m, v[0].x), m = abs_max2(m, v[0].y), m = abs_max2(m, v[0].z), m = abs_max2(m, v[0].w);
  m = abs_max2(m, v[1].x), m = abs_max2(m, v[1].y), m = abs_max2(m, v[1].z), m = abs_max2(m, v[1].w);
  return both_amax_bits(m);
}

__device__ __forceinline__ void unpack16(const uint4 (&v)[2], float (&f)[16]) {
  const uint32_t w[8] = {v[0].x, v[0].y, v[0].z, v[0].w, v[1].x, v[1].y, v[1].z, v[1].w};
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    f[2 * i] = bf16_lo(w[i]);
    f[2 * i + 1] = bf16_hi(w[i]);
  }
}

// ---- FP8 encoding, four codes per 32-bit word -------------------------------------------------
// Hardware RNE-satfinite conversion (as fp8x2_rn_hw) with the NaN fix-up done on the packed word:
// satfinite never produces inf, so an output byte is NaN iff its low 7 bits are 0x7F (E4M3) or
// >= 0x7C (E5M2), and nibble::fmt's NaN is 0x7F for both. ~1.5 instructions per 4 codes instead of
// a compare and a select per code. tests/kernels/test_quantize_fp8_hw_convert.cu checks every float.
template <quant::ElementFormat F>
__device__ __forceinline__ uint32_t fp8x4_canonical_nan(uint32_t w) {
  constexpr uint32_t kAdd = F == quant::ElementFormat::e4m3 ? 0x01010101u : 0x04040404u;
  const uint32_t n = ((w & 0x7f7f7f7fu) + kAdd) & 0x80808080u;  // 0x80 in each NaN byte
  if constexpr (F == quant::ElementFormat::e4m3) {
    return w & ~n;  // 0x7F / 0xFF -> 0x7F
  } else {
    return (w | (n - (n >> 7))) & ~n;  // 0x7D..0x7F, 0xFD..0xFF -> 0x7F
  }
}

// Codes of (a, b, c, d), a in the lowest byte. kFiniteIn: the caller guarantees finite inputs, so
// satfinite produces no NaN byte and the fix-up is skipped (3 instructions per 4 codes).
template <quant::ElementFormat F, bool kFiniteIn = false>
__device__ __forceinline__ uint32_t fp8x4_rn(float a, float b, float c, float d) {
  static_assert(F == quant::ElementFormat::e4m3 || F == quant::ElementFormat::e5m2, "FP8 formats only");
  uint32_t w;
  // PTX: the first source of cvt lands in the upper byte of its 16-bit result.
  if constexpr (F == quant::ElementFormat::e4m3) {
    asm("{\n\t.reg .b16 lo, hi;\n\t"
        "cvt.rn.satfinite.e4m3x2.f32 lo, %2, %1;\n\t"
        "cvt.rn.satfinite.e4m3x2.f32 hi, %4, %3;\n\t"
        "mov.b32 %0, {lo, hi};\n\t}"
        : "=r"(w)
        : "f"(a), "f"(b), "f"(c), "f"(d));
  } else {
    asm("{\n\t.reg .b16 lo, hi;\n\t"
        "cvt.rn.satfinite.e5m2x2.f32 lo, %2, %1;\n\t"
        "cvt.rn.satfinite.e5m2x2.f32 hi, %4, %3;\n\t"
        "mov.b32 %0, {lo, hi};\n\t}"
        : "=r"(w)
        : "f"(a), "f"(b), "f"(c), "f"(d));
  }
  if constexpr (kFiniteIn) {
    return w;
  } else {
    return fp8x4_canonical_nan<F>(w);
  }
}

// code[i] = quant::encode_scaled(F, x[i], s, sr, index0 + i), 16 codes in one 16-byte word.
// kFiniteIn: every x[i] * s is finite (see fp8x4_rn).
template <quant::ElementFormat F, bool kSr, bool kFiniteIn = false>
__device__ __forceinline__ uint4 encode16(const float (&x)[16], float s, const quant::SrKey& sr, uint64_t index0) {
  if constexpr (kSr) {
    return encode16_scaled<F, true>(x, s, sr, index0);  // software encoder + Philox bits
  } else {
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      w[i] = fp8x4_rn<F, kFiniteIn>(x[4 * i] * s, x[4 * i + 1] * s, x[4 * i + 2] * s, x[4 * i + 3] * s);
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
  }
}

// MX elements (quant::mx_encode_element): a NaN block scale writes zero codes. Any other code comes
// from a finite block amax (quant::mx_scale_code gives NaN for inf or NaN), so every element is finite,
// and so is x * 2^-k (x <= amax < 2^(k + emax + 1)): no NaN fix-up.
template <quant::ElementFormat F, bool kSr>
__device__ __forceinline__ uint4 encode16_mx(const float (&x)[16], uint8_t sc, const quant::SrKey& sr,
                                             uint64_t index0) {
  if (sc == fmt::kE8M0Nan) return make_uint4(0, 0, 0, 0);
  return encode16<F, kSr, true>(x, quant::mx_encode_multiplier(sc), sr, index0);
}

// ---- shared-memory transpose ---------------------------------------------------------------------
__device__ __forceinline__ void park_rows(Smem& s, const uint4 (&v)[kRowsPerThread][2]) {
  const RowPhase p = row_phase();
#pragma unroll
  for (int k = 0; k < kRowsPerThread; ++k) {
    const int r = p.r0 + 32 * k;
    const int q = (kColsPerThread / 2) * p.chunk;  // first word of the chunk, a multiple of 8
    *reinterpret_cast<uint4*>(&s.x[r][slot(r, q)]) = v[k][0];  // slot(r, q + j) == slot(r, q) + j, j < 4
    *reinterpret_cast<uint4*>(&s.x[r][slot(r, q + 4)]) = v[k][1];
  }
}

// Column pass: the 16 words (rows 16 rc + i, column pair `word`) of this lane. slot(16 rc + i, word)
// takes two values, slot(16 rc, word) for i < 8 and that ^ 4 for i >= 8, so the 16 reads are two
// base addresses with constant offsets.
__device__ __forceinline__ void read_column_pair(const Smem& s, ColPhase p, uint32_t (&w)[kColRows]) {
  const uint32_t* rows = &s.x[kColRows * p.rc][0];
  const int q0 = slot(kColRows * p.rc, p.word), q1 = q0 ^ 4;
#pragma unroll
  for (int i = 0; i < kColRows; ++i) w[i] = rows[kWords * i + (i < 8 ? q0 : q1)];
}

// The same with the lane's rows split in two runs of 8: rows 8 rc + i (w[0..7]) and 64 + 8 rc + i
// (w[8..15]), whose slots are slot(8 rc, word) and that ^ 4. For 2-byte outputs: the 8 lanes of a
// pair then store 8 x 16 contiguous bytes per run.
__device__ __forceinline__ void read_column_pair_split(const Smem& s, ColPhase p, uint32_t (&w)[kColRows]) {
  const uint32_t* run0 = &s.x[8 * p.rc][0];
  const uint32_t* run1 = &s.x[kTile / 2 + 8 * p.rc][0];
  const int q0 = slot(8 * p.rc, p.word), q1 = q0 ^ 4;  // == slot(64 + 8 rc + i, word)
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    w[i] = run0[kWords * i + q0];
    w[8 + i] = run1[kWords * i + q1];
  }
}

// The low (even) or high (odd) column of the pair as 16 floats.
__device__ __forceinline__ void column_lo(const uint32_t (&w)[kColRows], float (&f)[kColRows]) {
#pragma unroll
  for (int i = 0; i < kColRows; ++i) f[i] = bf16_lo(w[i]);
}
__device__ __forceinline__ void column_hi(const uint32_t (&w)[kColRows], float (&f)[kColRows]) {
#pragma unroll
  for (int i = 0; i < kColRows; ++i) f[i] = bf16_hi(w[i]);
}

// Packed halfword amax of the 16 rows of both columns.
__device__ __forceinline__ uint32_t column_pair_amax2(const uint32_t (&w)[kColRows]) {
  uint32_t m = 0;
#pragma unroll
  for (int i = 0; i < kColRows; ++i) m = abs_max2(m, w[i]);
  return m;
}

// Max of `v` over the 2^log2_lanes consecutive lanes of an aligned group (1 = pairs, 3 = eights).
template <int kLog2Lanes>
__device__ __forceinline__ uint32_t group_max(uint32_t v) {
#pragma unroll
  for (int m = 1; m < (1 << kLog2Lanes); m <<= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, m));
  return v;
}
// The same on packed halfwords.
template <int kLog2Lanes>
__device__ __forceinline__ uint32_t group_max2(uint32_t v) {
#pragma unroll
  for (int m = 1; m < (1 << kLog2Lanes); m <<= 1) v = __vmaxu2(v, __shfl_xor_sync(0xffffffffu, v, m));
  return v;
}

// Max over the block (every thread must call it, once per kernel); the result is valid in thread 0.
__device__ __forceinline__ uint32_t block_max(uint32_t v) { return block::max_in_thread0<kThreads>(v); }

}  // namespace nibble::cuda::fp8_tile
