// The 64 x 128 row + column tile shared by the MXFP4-output quantizers (the Quartet backward
// quantizer and the MXFP4 recipe's row + column quantizer): a CTA stages the tile in
// shared memory (as float) and writes the row-wise and the column-wise MXFP4 copies with every warp
// store covering whole 32-byte sectors. What happens to each 32-group (rotation, scale rule,
// rounding) is the `Groups` policy: apply(v, index0, codes, scales) quantizes the 32 values v of
// output element index0 (uint64_t, a multiple of 32) and stores them. A tile that gives each lane of
// a store a different output row (such as a 32 x 256 tile) makes every 16-byte code store and every
// scale byte its own L2 sector: ncu on the H200 finds such a kernel L2-bound (72.6% L2 vs 25% DRAM
// throughput). Here:
//  - row-wise: lane (row = lane / 4, group = lane % 4): 4 lanes write one row's 64 contiguous code
//    bytes (two full sectors) and its 4 scale bytes;
//  - column-wise: lane (column = lane / 2, 32-row half = lane % 2): 2 lanes write one transposed
//    row's 32 contiguous code bytes (one full sector) and its 2 scale bytes.
// Shared-memory layout (all accesses conflict-free): element (r, c) lives at
//   r * 144 + (r / 32) * 16 + (c & ~31) + 4 * (((c / 4) % 8) ^ ((c / 32) % 4)) + c % 4,
// i.e. rows padded to 144 floats, rows 32..63 shifted by 16 more words, and the 16-byte chunks
// of each 32-column group XOR-permuted by the group's index. Row-wise float4 reads of a quarter warp
// (2 rows x 4 groups) then hit 8 distinct 16-byte bank groups, and column reads of a warp (16
// consecutive columns x both halves) hit 32 distinct banks.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "fp4/fp4_kernel_io.cuh"
#include "fp4/quartet_fused_group_math.cuh"
#include "nibble/kernels/quartet.hpp"
#include "nibble/kernels/scale_layout.hpp"
#include "nibble/format/e8m0.hpp"
#include "nibble/format/minifloat.hpp"

namespace nibble::cuda::rowcol {

// A 16-entry E2M1 decode table in shared memory: 16 words in 16 banks, so any lane pattern is
// conflict-free (equal addresses broadcast); one LDS instead of the generic bit decode.
__device__ __forceinline__ void init_e2m1_table(float* lut) {
  if (threadIdx.x < 16) lut[threadIdx.x] = fmt::decode_e2m1(static_cast<uint8_t>(threadIdx.x));
}

// Dequantizes one MXFP4 32-group (as quant::dequantize: decode_e2m1(code) * decode_e8m0(scale)),
// handing out float4s: put(j, value of elements j..j+3) for j = 0, 4, ..., 28.
template <class Put>
__device__ __forceinline__ void decode_mxfp4_group(const float* lut, const uint4& packed, uint32_t scale, Put&& put) {
  const float s = fmt::decode_e8m0(static_cast<uint8_t>(scale));
#pragma unroll
  for (int j = 0; j < 32; j += 4) {
    float d[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) d[k] = lut[fp4::unpack_e2m1(packed, j + k)] * s;
    put(j, make_float4(d[0], d[1], d[2], d[3]));
  }
}

// The 16 bytes of one vector load as floats: 8 BF16 (low half of each word = even element) or 4 FP32.
template <class In>
__device__ __forceinline__ void unpack_chunk(const uint4& raw, float* v) {
  const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if constexpr (sizeof(In) == 2) {
      v[2 * j] = fmt::bits_float(w[j] << 16);
      v[2 * j + 1] = fmt::bits_float(w[j] & 0xffff0000u);
    } else {
      v[j] = fmt::bits_float(w[j]);
    }
  }
}

// ---- the 64 x 128 tile ----------------------------------------------------------------------
constexpr int kThreads = 256;
constexpr int kRows = 64;
constexpr int kCols = 128;
constexpr int kStride = kCols + 16;
constexpr int kHalfShift = 16;
constexpr int kSmemFloats = kRows * kStride + kHalfShift;

__host__ __device__ constexpr int row_part(int r) { return r * kStride + (r >> 5) * kHalfShift; }
__host__ __device__ constexpr int col_part(int c) {
  return (c & ~31) + ((((c >> 2) & 7) ^ ((c >> 5) & 3)) << 2) + (c & 3);
}
__host__ __device__ constexpr int at(int r, int c) { return row_part(r) + col_part(c); }
// Offset of the float4 at column j (j = 0, 4, ..., 28) of 32-group `grp` from row_part(r) + 32 grp:
// col_part(32 grp + j) - 32 grp = j ^ 4 grp, written as a run-time part (j & 12) ^ g4 (g4 = 4 grp), of
// which there are four, plus a constant (j & 16): the compiler keeps four base registers and folds
// the rest into the loads' immediate offsets (the XOR of the whole index cost ~3 integer ops a load).
__host__ __device__ constexpr int group_chunk(int j, int g4) { return (j & 16) + ((j & 12) ^ g4); }

// The two shortcuts the loaders and the row reads take, checked over their whole domain at compile time:
// group_chunk is col_part relative to the group, and a pass of R rows (R divides 32) starting at r0 < R
// stays in the 32-row half of its first row, so row_part splits into row_part(r0) + row_part(i R).
constexpr bool group_chunk_is_col_part() {
  for (int g = 0; g < 4; ++g) {
    for (int j = 0; j < 32; j += 4) {
      if (group_chunk(j, 4 * g) != col_part(32 * g + j) - 32 * g) return false;
    }
  }
  return true;
}
constexpr bool row_part_splits(int rows_per_pass) {
  for (int r0 = 0; r0 < rows_per_pass; ++r0) {
    for (int i = 0; i * rows_per_pass < kRows; ++i) {
      if (row_part(r0 + i * rows_per_pass) != row_part(r0) + row_part(i * rows_per_pass)) return false;
    }
  }
  return true;
}
static_assert(group_chunk_is_col_part(), "group_chunk(j, 4 grp) must equal col_part(32 grp + j) - 32 grp");
static_assert(row_part_splits(8) && row_part_splits(16), "DenseLoader's passes must split row_part");

struct Extent {
  int rows;  // 32 or 64 valid rows (rows % 32 == 0)
  int cols;  // 32, 64, 96 or 128 valid columns (cols % 32 == 0)
};

// The tile of this CTA: its first row and column and how much of it lies inside the tensor.
struct TileOrigin {
  int64_t row0, col0;
  Extent e;
};
__device__ __forceinline__ TileOrigin tile_origin(int64_t rows, int64_t cols) {
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * kCols;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kRows;
  return {row0, col0,
          Extent{static_cast<int>(rows - row0 < kRows ? rows - row0 : kRows),
                 static_cast<int>(cols - col0 < kCols ? cols - col0 : kCols)}};
}

// Dense BF16/FP32 input: thread q of each pass loads 16-byte chunk q of the tile (row-major, so a
// warp reads whole rows) and parks it as float4s.
template <class In>
struct DenseLoader {
  static constexpr bool kBf16Tile = false;  // parks floats in the float tile
  const In* x;
  int64_t cols;
  static constexpr int kPer = 16 / sizeof(In);
  static constexpr bool kFitsFiveCtas = sizeof(In) == 2;  // see launch()
  static constexpr int kChunksPerRow = kCols / kPer;
  static constexpr int kRowsPerPass = kThreads / kChunksPerRow;  // 16 (BF16) or 8 (FP32)
  static constexpr int kIters = kRows / kRowsPerPass;
  static_assert(kThreads % kChunksPerRow == 0 && 32 % kRowsPerPass == 0, "passes of whole rows inside 32-row halves");
  struct Regs {
    uint4 raw[kIters];
  };
  // Thread t loads chunk t % kChunksPerRow of rows t / kChunksPerRow + i kRowsPerPass (unsigned
  // arithmetic on threadIdx: shifts, no signed-division fix-ups).
  __device__ static int first_row() { return static_cast<int>(threadIdx.x / kChunksPerRow); }
  __device__ static int chunk() { return static_cast<int>(threadIdx.x % kChunksPerRow); }
  __device__ void fetch(Regs& g, int64_t row0, int64_t col0, Extent e) const {
    const int r0 = first_row(), ch = chunk();
    if (ch * kPer >= e.cols) return;
    const In* p = x + (row0 + r0) * cols + col0 + ch * kPer;
    const int64_t pass_stride = kRowsPerPass * cols;
    if (e.rows == kRows) {  // every pass in the tensor: no per-pass test, one pointer walk
#pragma unroll
      for (int i = 0; i < kIters; ++i) g.raw[i] = __ldg(reinterpret_cast<const uint4*>(p + i * pass_stride));
      return;
    }
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      if (r0 + i * kRowsPerPass < e.rows) g.raw[i] = __ldg(reinterpret_cast<const uint4*>(p + i * pass_stride));
    }
  }
  __device__ void park(float* smem, const float*, const Regs& g, Extent e) const {
    const int r0 = first_row(), ch = chunk();
    if (ch * kPer >= e.cols) return;
    // r0 < kRowsPerPass, which divides 32, so row r0 + i kRowsPerPass lies in the same 32-row half as
    // row i kRowsPerPass: row_part splits into row_part(r0) and a constant per pass.
    float* base = smem + row_part(r0);
    int cp[kPer / 4];
#pragma unroll
    for (int k = 0; k < kPer; k += 4) cp[k / 4] = col_part(ch * kPer + k);
    auto put = [&](int i) {
      float v[kPer];
      unpack_chunk<In>(g.raw[i], v);
#pragma unroll
      for (int k = 0; k < kPer; k += 4) {
        *reinterpret_cast<float4*>(base + cp[k / 4] + row_part(i * kRowsPerPass)) =
            make_float4(v[k], v[k + 1], v[k + 2], v[k + 3]);
      }
    };
    if (e.rows == kRows) {
#pragma unroll
      for (int i = 0; i < kIters; ++i) put(i);
      return;
    }
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      if (r0 + i * kRowsPerPass < e.rows) put(i);
    }
  }
};

// MXFP4 input (dequantized as quant::dequantize: decode_e2m1(code) * decode_e8m0(scale)): thread =
// (row = warp * 8 + lane / 4, group = lane % 4), so 4 lanes load one row's 64 contiguous code bytes.
struct Mxfp4Loader {
  static constexpr bool kBf16Tile = false;
  static constexpr bool kFitsFiveCtas = true;  // see launch()
  const uint8_t* codes;
  const uint8_t* scales;
  int64_t cols;
  struct Regs {
    uint4 packed;
    uint32_t scale;
  };
  __device__ static int row() { return static_cast<int>((threadIdx.x / 32) * 8 + (threadIdx.x % 32) / 4); }
  __device__ static int group() { return static_cast<int>(threadIdx.x % 4); }
  __device__ void fetch(Regs& g, int64_t row0, int64_t col0, Extent e) const {
    const int r = row(), grp = group();
    if (r >= e.rows || grp * 32 >= e.cols) return;
    const int64_t e0 = (row0 + r) * cols + col0 + grp * 32;
    g.packed = __ldg(reinterpret_cast<const uint4*>(codes) + e0 / 32);
    g.scale = __ldg(scales + e0 / 32);
  }
  __device__ void park(float* smem, const float* lut, const Regs& g, Extent e) const {
    const int r = row(), grp = group();
    if (r >= e.rows || grp * 32 >= e.cols) return;
    float* base = smem + row_part(r) + 32 * grp;
    decode_mxfp4_group(lut, g.packed, g.scale, [&](int j, float4 f) {
      *reinterpret_cast<float4*>(base + group_chunk(j, 4 * grp)) = f;
    });
  }
};

template <class Groups, class Loader, int kMinBlocks>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    kernel(Loader load, int64_t rows, int64_t cols, Groups groups, Mxfp4Planes rowwise, Mxfp4Planes colwise) {
  __shared__ __align__(16) float smem[kSmemFloats];
  __shared__ float lut[16];
  const TileOrigin t = tile_origin(rows, cols);
  const int64_t row0 = t.row0, col0 = t.col0;
  const Extent e = t.e;
  typename Loader::Regs g;
  load.fetch(g, row0, col0, e);
  init_e2m1_table(lut);
  __syncthreads();
  load.park(smem, lut, g, e);
  __syncthreads();
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  float v[32];
  if (rowwise.codes != nullptr) {
    const int r = warp * 8 + lane / 4, grp = lane % 4;
    if (r < e.rows && grp * 32 < e.cols) {
      const float* base = smem + row_part(r) + 32 * grp;
#pragma unroll
      for (int j = 0; j < 32; j += 4) {
        const float4 f = *reinterpret_cast<const float4*>(base + group_chunk(j, 4 * grp));
        v[j] = f.x;
        v[j + 1] = f.y;
        v[j + 2] = f.z;
        v[j + 3] = f.w;
      }
      groups.apply(v, static_cast<uint64_t>((row0 + r) * cols + col0 + grp * 32), rowwise.codes, rowwise.scales);
    }
  }
  if (colwise.codes != nullptr) {
    // Column c's 32-row half h is one group of the transposed tensor (row col0 + c, columns row0 + 32h..).
    const int c = warp * 16 + lane / 2, h = lane % 2;
    if (c < e.cols && h * 32 < e.rows) {
      const float* col = smem + at(h * 32, c);  // rows h*32 + i lie kStride floats apart
#pragma unroll
      for (int i = 0; i < 32; ++i) v[i] = col[i * kStride];
      groups.apply(v, static_cast<uint64_t>((col0 + c) * rows + row0 + h * 32), colwise.codes, colwise.scales);
    }
  }
}

// ---- the BF16 tile ----------------------------------------------------------------------------
// The same 64 x 128 tile kept as BF16 (half the shared-memory bytes, no unpacking when parking), for
// group policies that work on BF16 pairs (apply_pairs: 16 words, low halfword = even element): the MX
// rule with nearest rounding. Layout in bytes: row r starts at r * 320 + (r / 32) * 32 (rows padded by
// 64 bytes, the second 32-row half shifted by 32 more), and its 16-byte chunk k (columns 8k .. 8k+7)
// sits at slot k ^ ((k / 4) % 4). Conflict-free (checked at compile time below): the park's 16-byte
// stores (a quarter warp: one row, 8 consecutive chunks), the row reads (a quarter warp: 2 rows x
// 4 groups, chunk j of each group) and the column reads (a warp: 16 consecutive columns x rows i and
// 32 + i, 2 bytes each).
namespace b16 {
constexpr int kRowBytes = kCols * 2 + 64;
constexpr int kHalfShift = 32;
constexpr int kBytes = kRows * kRowBytes + kHalfShift;
__host__ __device__ constexpr int row_base(int r) { return r * kRowBytes + (r >> 5) * kHalfShift; }
__host__ __device__ constexpr int chunk_at(int k) { return (k ^ ((k >> 2) & 3)) << 4; }
__host__ __device__ constexpr int at(int r, int c) { return row_base(r) + chunk_at(c >> 3) + ((c & 7) << 1); }

// Bank-conflict checks over the whole access patterns (16-byte accesses: 8 distinct 16-byte bank groups
// per quarter warp; 2-byte accesses: distinct 4-byte words of a warp in distinct banks).
constexpr bool park_conflict_free() {
  for (int r = 0; r < kRows; ++r) {
    for (int k0 = 0; k0 < 16; k0 += 8) {
      int seen = 0;
      for (int k = k0; k < k0 + 8; ++k) seen |= 1 << (((row_base(r) + chunk_at(k)) >> 4) & 7);
      if (seen != 0xff) return false;
    }
  }
  return true;
}
constexpr bool row_reads_conflict_free() {
  for (int r0 = 0; r0 < kRows; r0 += 2) {
    for (int j = 0; j < 4; ++j) {
      int seen = 0;
      for (int lane = 0; lane < 8; ++lane) {
        const int r = r0 + lane / 4, grp = lane % 4;
        seen |= 1 << (((row_base(r) + chunk_at(4 * grp + j)) >> 4) & 7);
      }
      if (seen != 0xff) return false;
    }
  }
  return true;
}
constexpr bool column_reads_conflict_free() {
  for (int c0 = 0; c0 < kCols; c0 += 16) {
    for (int i = 0; i < 32; ++i) {
      int bank_word[32] = {};
      for (int b = 0; b < 32; ++b) bank_word[b] = -1;
      for (int lane = 0; lane < 32; ++lane) {
        const int w = at(32 * (lane % 2) + i, c0 + lane / 2) >> 2;
        const int b = w & 31;
        if (bank_word[b] != -1 && bank_word[b] != w) return false;
        bank_word[b] = w;
      }
    }
  }
  return true;
}
static_assert(park_conflict_free() && row_reads_conflict_free() && column_reads_conflict_free(),
              "the BF16 tile's layout must keep every shared-memory access pattern conflict-free");
}  // namespace b16

// BF16 input into the BF16 tile: DenseLoader<uint16_t>'s loads, parked as they are.
struct Bf16TileLoader {
  static constexpr bool kBf16Tile = true;
  static constexpr bool kFitsFiveCtas = true;  // see launch()
  DenseLoader<uint16_t> dense;
  using Regs = DenseLoader<uint16_t>::Regs;
  using D = DenseLoader<uint16_t>;
  __device__ void fetch(Regs& g, int64_t row0, int64_t col0, Extent e) const { dense.fetch(g, row0, col0, e); }
  __device__ void park(uint8_t* smem, const Regs& g, Extent e) const {
    const int r0 = D::first_row(), ch = D::chunk();
    if (ch * D::kPer >= e.cols) return;
    // r0 < 16, so rows r0 + 16 i stay in the half of row 16 i: row_base splits as in DenseLoader::park.
    uint8_t* base = smem + b16::row_base(r0) + b16::chunk_at(ch);
#pragma unroll
    for (int i = 0; i < D::kIters; ++i) {
      if (e.rows == kRows || r0 + i * D::kRowsPerPass < e.rows) {
        *reinterpret_cast<uint4*>(base + b16::row_base(i * D::kRowsPerPass)) = g.raw[i];
      }
    }
  }
};
static_assert(DenseLoader<uint16_t>::kRowsPerPass == 16, "Bf16TileLoader::park splits row_base at 16-row passes");

// Tiled (cuBLASLt 128x4) scales: a 64x128 tile owns half of one 512-byte scale tile per copy. The
// scale codes are staged in shared memory, 32 lines x 8 bytes per copy, and stored after a barrier:
//  - row copy: tile row r, group g -> staged line r % 32, byte (r / 32) * 4 + g; the scale tile's rows
//    row0 % 128 + r are bytes (row0 % 128 / 64) * 8 .. + 8 of its 16-byte lines, one 8-byte store per lane;
//  - column copy: tile column c, 32-row half h -> staged line c % 32, byte (c / 32) * 2 + h; scale-tile row
//    c, scale column (row0 % 128) / 32 + h, i.e. 2 bytes at (c / 32) * 4 + (row0 % 128) / 32 of line c % 32.
// Rows and groups outside the tensor stay 0 (the staging starts zeroed): the kernel writes the padding.
namespace tiled {
constexpr int kLines = 32, kLineBytes = 8, kColStage = kLines * kLineBytes, kStageBytes = 2 * kColStage;
__host__ __device__ constexpr int row_slot(int r, int grp) { return (r % 32) * kLineBytes + (r / 32) * 4 + grp; }
__host__ __device__ constexpr int col_slot(int c, int h) { return kColStage + (c % 32) * kLineBytes + (c / 32) * 2 + h; }
// Where store() puts staged byte p inside the 512-byte scale tile (r128 = row0 % 128): the row copy's
// lane p / 8 writes its 8 bytes at 16 (p / 8) + 8 (r128 / 64); the column copy's thread (line, q)
// writes its 2 bytes at 16 line + 4 q + r128 / 32.
__host__ __device__ constexpr int row_dest(int p, int r128) { return 16 * (p / kLineBytes) + p % kLineBytes + 8 * (r128 / 64); }
__host__ __device__ constexpr int col_dest(int p, int r128) {
  return 16 * (p / kLineBytes) + 4 * ((p % kLineBytes) / 2) + r128 / 32 + p % 2;
}
// Every staged scale lands where scale_layout::tiled_index puts it (offsets inside one tile).
constexpr bool staging_matches_tiled_index() {
  constexpr int kTileBytes = static_cast<int>(scale_layout::kTileRows * scale_layout::kTileCols);
  for (int r128 = 0; r128 <= 64; r128 += 64) {
    for (int r = 0; r < kRows; ++r) {
      for (int grp = 0; grp < 4; ++grp) {
        const auto want = scale_layout::tiled_index(kCols, 32, r128 + r, 32 * grp) % kTileBytes;
        if (row_dest(row_slot(r, grp), r128) != want) return false;
      }
    }
    for (int c = 0; c < kCols; ++c) {
      for (int h = 0; h < 2; ++h) {
        const auto want = scale_layout::tiled_index(kTileBytes, 32, c, r128 + 32 * h) % kTileBytes;
        if (col_dest(col_slot(c, h) - kColStage, r128) != want) return false;
      }
    }
  }
  return true;
}
static_assert(staging_matches_tiled_index(), "the staged scale tile must land on cuBLASLt's 128x4 layout");
// A group's scale code: staged (kTiled) or straight into the grid (index0 = the group's first element).
template <bool kTiled>
__device__ __forceinline__ void put(uint8_t s, uint8_t* stage, int slot, uint8_t* grid, uint64_t index0) {
  if constexpr (kTiled) {
    stage[slot] = s;
  } else {
    grid[index0 / 32] = s;
  }
}
// Warp 0 stores the row copy's half tile, warps 1-4 the column copy's (after a barrier).
__device__ __forceinline__ void store(const uint8_t* stage, int64_t rows, int64_t cols, int64_t row0, int64_t col0,
                                      uint8_t* row_scales, uint8_t* col_scales) {
  const int t = static_cast<int>(threadIdx.x);
  const int64_t r128 = row0 % 128;  // 0 or 64
  if (t < 32) {
    if (row_scales == nullptr) return;
    uint8_t* dst = row_scales + scale_layout::tiled_index(cols, 32, row0 - r128, col0) + (r128 / 64) * 8;
    *reinterpret_cast<uint2*>(dst + 16 * t) = reinterpret_cast<const uint2*>(stage)[t];
  } else if (t < 160) {
    if (col_scales == nullptr) return;
    const int line = (t - 32) / 4, q = (t - 32) % 4;
    uint8_t* dst = col_scales + scale_layout::tiled_index(rows, 32, col0, row0 - r128) + r128 / 32;
    *reinterpret_cast<uint16_t*>(dst + 16 * line + 4 * q) =
        *reinterpret_cast<const uint16_t*>(stage + kColStage + line * kLineBytes + 2 * q);
  }
}
}  // namespace tiled

template <class Groups, class Loader, int kMinBlocks, bool kTiled>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    kernel_bf16(Loader load, int64_t rows, int64_t cols, Groups groups, Mxfp4Planes rowwise, Mxfp4Planes colwise) {
  __shared__ __align__(16) uint8_t smem[b16::kBytes];
  __shared__ __align__(16) uint8_t stage[kTiled ? tiled::kStageBytes : 4];
  const TileOrigin t = tile_origin(rows, cols);
  const int64_t row0 = t.row0, col0 = t.col0;
  const Extent e = t.e;
  typename Loader::Regs g;
  load.fetch(g, row0, col0, e);
  if constexpr (kTiled) {
    if (threadIdx.x < tiled::kStageBytes / 4) reinterpret_cast<uint32_t*>(stage)[threadIdx.x] = 0;
  }
  load.park(smem, g, e);
  __syncthreads();
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  uint32_t w[16];
  if (rowwise.codes != nullptr) {
    const int r = warp * 8 + lane / 4, grp = lane % 4;
    if (r < e.rows && grp * 32 < e.cols) {
      const uint8_t* base = smem + b16::row_base(r);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint4 q = *reinterpret_cast<const uint4*>(base + b16::chunk_at(4 * grp + j));
        w[4 * j] = q.x;
        w[4 * j + 1] = q.y;
        w[4 * j + 2] = q.z;
        w[4 * j + 3] = q.w;
      }
      const uint64_t index0 = static_cast<uint64_t>((row0 + r) * cols + col0 + grp * 32);
      tiled::put<kTiled>(groups.apply_pairs(w, index0, rowwise.codes), stage, tiled::row_slot(r, grp), rowwise.scales,
                         index0);
    }
  }
  if (colwise.codes != nullptr) {
    const int c = warp * 16 + lane / 2, h = lane % 2;
    if (c < e.cols && h * 32 < e.rows) {
      const uint8_t* col = smem + b16::at(h * 32, c);  // rows h*32 + i lie kRowBytes apart
#pragma unroll
      for (int t = 0; t < 16; ++t) {
        const uint32_t lo = *reinterpret_cast<const uint16_t*>(col + (2 * t) * b16::kRowBytes);
        const uint32_t hi = *reinterpret_cast<const uint16_t*>(col + (2 * t + 1) * b16::kRowBytes);
        // An opaque byte permute: with lo | (hi << 16) the compiler kept all 32 halves live for the
        // rare fallback's unpacking, and spilled them.
        w[t] = fp4::prmt(lo, hi, 0x5410);
      }
      const uint64_t index0 = static_cast<uint64_t>((col0 + c) * rows + row0 + h * 32);
      tiled::put<kTiled>(groups.apply_pairs(w, index0, colwise.codes), stage, tiled::col_slot(c, h), colwise.scales,
                         index0);
    }
  }
  if constexpr (kTiled) {
    __syncthreads();
    tiled::store(stage, rows, cols, row0, col0, rowwise.codes != nullptr ? rowwise.scales : nullptr,
                 colwise.codes != nullptr ? colwise.scales : nullptr);
  }
}

inline dim3 grid(int64_t rows, int64_t cols) {
  return dim3(fp4::blocks_for(cols, kCols), fp4::blocks_for(rows, kRows));
}

// CTAs per SM the launch asks the compiler to fit (the register cap follows: 64 at 4, 48 at 5).
// The tile is issue-bound (ncu on the H200: 79-80% issue-slot use at 4 and at 5 CTAs), so more resident
// warps gain little: at 5 the Quartet backward tile runs 2.0-2.4% faster and the MXFP4 tile with its
// BF16-pair encoder 2-3% faster (with the FP32 encoder, 0.5-2% slower). Groups::kNearestCtas is each
// policy's choice for nearest rounding; 5 applies only where 48 registers do not spill (ptxas -v: BF16
// and MXFP4 input, Loader::kFitsFiveCtas); stochastic kernels (Philox state) always take 4.
template <class Groups, class Loader>
constexpr int kMinCtasPerSm = !Groups::kStochastic && Loader::kFitsFiveCtas && Groups::kNearestCtas == 5 ? 5 : 4;

// Launches the tile kernel for a group policy and a loader (kernel_bf16 for the BF16 tile, which alone
// writes tiled scales: `tiled`, and then both copies' planes are tiled).
template <class Groups, class Loader>
void launch(const Loader& load, int64_t rows, int64_t cols, const Groups& groups, Mxfp4Planes rowwise,
            Mxfp4Planes colwise, cudaStream_t stream, bool tiled = false) {
  const dim3 g = grid(rows, cols);
  constexpr int kCtas = kMinCtasPerSm<Groups, Loader>;
  if constexpr (Loader::kBf16Tile) {
    static_assert(!Groups::kStochastic, "the BF16 tile serves nearest-rounding BF16-pair policies");
    if (tiled) {
      kernel_bf16<Groups, Loader, kCtas, true><<<g, kThreads, 0, stream>>>(load, rows, cols, groups, rowwise, colwise);
    } else {
      kernel_bf16<Groups, Loader, kCtas, false><<<g, kThreads, 0, stream>>>(load, rows, cols, groups, rowwise, colwise);
    }
  } else {
    kernel<Groups, Loader, kCtas><<<g, kThreads, 0, stream>>>(load, rows, cols, groups, rowwise, colwise);
  }
  NIBBLE_CHECK_LAUNCH();
}

}  // namespace nibble::cuda::rowcol
