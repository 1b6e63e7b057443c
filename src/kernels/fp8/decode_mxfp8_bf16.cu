// Exact MXFP8 -> BF16 decode for the emulated mxfp8 GEMM on Hopper (docs/spec.md §4), straight or transposed.
#include "fp8/fp8_preconditions.hpp"
#include "fp8/fp8_tile_128x128.cuh"
#include "nibble/kernels/check.hpp"
#include "nibble/kernels/mxfp8_decode_math.hpp"
#include "nibble/kernels/quantize_fp8.hpp"
#include "nibble/kernels/scale_layout.hpp"

namespace nibble::cuda {
namespace {

namespace tile = fp8_tile;
constexpr int kMxBlock = 32;
constexpr int kThreads = 256;

// 16 codes of one block -> 16 BF16 (two 16-byte stores' worth), one element at a time through the
// shared scalar function: the reference path, used for NaN codes and extreme scales.
__device__ __forceinline__ void decode16_scalar(uint4 codes, uint8_t scale, uint4 (&o)[2]) {
  const uint32_t w[4] = {codes.x, codes.y, codes.z, codes.w};
  uint32_t r[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const uint32_t pair = w[i / 2] >> (16 * (i % 2));
    r[i] = mxfp8_decode_bf16(static_cast<uint8_t>(pair), scale) |
           static_cast<uint32_t>(mxfp8_decode_bf16(static_cast<uint8_t>(pair >> 8), scale)) << 16;
  }
  o[0] = make_uint4(r[0], r[1], r[2], r[3]);
  o[1] = make_uint4(r[4], r[5], r[6], r[7]);
}

// Scales 2^(k-127) with k in [15, 246] keep every product of a non-NaN E4M3 value (2^-9 .. 448) a
// normal BF16, so the decode is exact bit arithmetic: the hardware widens two codes to FP16
// (cvt.rn.f16x2.e4m3x2, exact), and an FP16 with a 3-bit mantissa becomes the BF16 of
// value * 2^(k-127) by dropping 3 mantissa bits and adding (k - 15) to the exponent field.
constexpr int kFastScaleMin = 15, kFastScaleMax = 246;

// Two codes (low byte -> low half) -> two BF16; `bias` = (k - 15) << 7.
__device__ __forceinline__ uint32_t decode2_fast(uint32_t code_pair, uint32_t bias) {
  uint32_t h;
  asm("{\n\t.reg .b16 c;\n\tcvt.u16.u32 c, %1;\n\tcvt.rn.f16x2.e4m3x2 %0, c;\n\t}" : "=r"(h) : "r"(code_pair));
  const uint32_t mag = (h & 0x7fff7fffu) >> 3;  // the high half's dropped bits are zero: no spill-over
  const uint32_t nonzero = ((mag + 0x7fff7fffu) & 0x80008000u) >> 15;  // 1 per non-zero half
  return (nonzero * bias + mag) | (h & 0x80008000u);  // zero keeps its sign and no exponent
}

// True if any of the 16 codes is NaN (0x7F / 0xFF).
__device__ __forceinline__ bool any_nan16(uint4 c) {
  auto nan_bytes = [](uint32_t w) { return ((w & 0x7f7f7f7fu) + 0x01010101u) & 0x80808080u; };
  return (nan_bytes(c.x) | nan_bytes(c.y) | nan_bytes(c.z) | nan_bytes(c.w)) != 0;
}

// == decode16_scalar for every input (tests/kernels/test_quantize_fp8_mx.cu checks all codes x scales).
__device__ __forceinline__ void decode16(uint4 codes, uint8_t scale, uint4 (&o)[2]) {
  if (scale < kFastScaleMin || scale > kFastScaleMax || any_nan16(codes)) {
    decode16_scalar(codes, scale, o);
    return;
  }
  const uint32_t bias = static_cast<uint32_t>(scale - 15) << 7;
  const uint32_t w[4] = {codes.x, codes.y, codes.z, codes.w};
  uint32_t r[8];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    r[2 * i] = decode2_fast(w[i] & 0xffffu, bias);
    r[2 * i + 1] = decode2_fast(w[i] >> 16, bias);
  }
  o[0] = make_uint4(r[0], r[1], r[2], r[3]);
  o[1] = make_uint4(r[4], r[5], r[6], r[7]);
}

// Straight: two 16-code chunks per thread (both loads in flight before any math); a warp covers
// 1024 contiguous codes.
constexpr int kChunksPerThread = 2;

// Where the scale of (row r, column c) lives: the grid [rows, cols/32] or cuBLASLt's 128x4 tiles.
template <bool kGrid>
__device__ __forceinline__ int64_t scale_at(int64_t cols, int64_t r, int64_t c) {
  if constexpr (kGrid) {
    return r * (cols / kMxBlock) + c / kMxBlock;
  } else {
    return scale_layout::tiled_index(cols, kMxBlock, r, c);
  }
}

__global__ void __launch_bounds__(kThreads)
    decode_mxfp8_bf16_kernel(const uint4* __restrict__ codes, const uint8_t* __restrict__ scales, int64_t chunks,
                             uint4* __restrict__ out) {
  const int64_t first = int64_t{blockIdx.x} * (kThreads * kChunksPerThread) + threadIdx.x;
  uint4 c[kChunksPerThread];
  uint8_t sc[kChunksPerThread];
#pragma unroll
  for (int u = 0; u < kChunksPerThread; ++u) {
    const int64_t i = first + u * kThreads;
    if (i < chunks) {
      c[u] = __ldg(codes + i);
      sc[u] = __ldg(scales + i / 2);  // a 32-block is two chunks
    }
  }
#pragma unroll
  for (int u = 0; u < kChunksPerThread; ++u) {
    const int64_t i = first + u * kThreads;
    if (i >= chunks) break;
    uint4 o[2];
    decode16(c[u], sc[u], o);
    out[2 * i] = o[0];
    out[2 * i + 1] = o[1];
  }
}

// Straight with 128x4-tiled scales: a block covers 64 rows x 128 codes (half a scale tile), 8 lanes per
// row, rows t / 8 and t / 8 + 32; so a warp's scale bytes are 4 rows x 4 bytes of one tile (2 sectors)
// and the index needs no division (the linear kernel above would divide the chunk index by the row).
constexpr int kTiledRows = 64, kTiledCols = 128;
__global__ void __launch_bounds__(kThreads)
    decode_mxfp8_bf16_tiled_kernel(const uint8_t* __restrict__ codes, const uint8_t* __restrict__ scales,
                                   int64_t rows, int64_t cols, uint16_t* __restrict__ out) {
  const int64_t c = int64_t{blockIdx.x} * kTiledCols + 16 * (threadIdx.x % 8);
  const int64_t r0 = int64_t{blockIdx.y} * kTiledRows + threadIdx.x / 8;
  uint4 in[2];
  uint8_t sc[2];
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    const int64_t r = r0 + 32 * u;
    if (r < rows && c < cols) {
      in[u] = __ldg(reinterpret_cast<const uint4*>(codes + r * cols + c));
      sc[u] = __ldg(scales + scale_at<false>(cols, r, c));
    }
  }
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    const int64_t r = r0 + 32 * u;
    if (r >= rows || c >= cols) break;
    uint4 o[2];
    decode16(in[u], sc[u], o);
    uint4* dst = reinterpret_cast<uint4*>(out + r * cols + c);
    dst[0] = o[0];
    dst[1] = o[1];
  }
}

// One 16-byte store, spelled out: left to itself, NVVM splits some of these into four 4-byte stores.
__device__ __forceinline__ void store16(uint16_t* p, const uint32_t (&w)[4]) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3])
               : "memory");
}

// Transposed: a 128x128 tile of codes is decoded row-wise into shared memory (BF16, the swizzled
// layout of fp8_tile), then each lane takes two 8-row runs of a column pair (read_column_pair_split)
// and writes 16 bytes per run and column: every store instruction fills 4 whole 128-byte lines.
template <bool kGrid>
__global__ void __launch_bounds__(tile::kThreads)
    decode_mxfp8_bf16_transpose_kernel(const uint8_t* __restrict__ codes, const uint8_t* __restrict__ scales,
                                       int64_t rows, int64_t cols, uint16_t* __restrict__ out) {
  __shared__ tile::Smem s;
  const tile::TileCoord t = tile::block_tile(true);
  const int64_t row0 = t.tr * tile::kTile, col0 = t.tc * tile::kTile;
  const tile::RowPhase rp = tile::row_phase();
  const int64_t c = col0 + tile::kColsPerThread * rp.chunk;
  uint4 in[tile::kRowsPerThread];
  uint8_t sc[tile::kRowsPerThread];
#pragma unroll
  for (int k = 0; k < tile::kRowsPerThread; ++k) {
    const int64_t r = row0 + rp.r0 + 32 * k;
    const bool ok = r < rows && c < cols;
    in[k] = ok ? __ldg(reinterpret_cast<const uint4*>(codes + r * cols + c)) : make_uint4(0, 0, 0, 0);
    sc[k] = ok ? __ldg(scales + scale_at<kGrid>(cols, r, c)) : 127;
  }
  uint4 v[tile::kRowsPerThread][2];
#pragma unroll
  for (int k = 0; k < tile::kRowsPerThread; ++k) decode16(in[k], sc[k], v[k]);
  tile::park_rows(s, v);
  __syncthreads();
#pragma unroll
  for (int pass = 0; pass < tile::kColPasses; ++pass) {
    const tile::ColPhase cp = tile::col_phase(pass);
    uint32_t w[tile::kColRows];
    tile::read_column_pair_split(s, cp, w);
    const int64_t col = col0 + 2 * cp.word;
    if (col >= cols) continue;
#pragma unroll
    for (int run = 0; run < 2; ++run) {
      const int64_t r = row0 + run * (tile::kTile / 2) + 8 * cp.rc;  // rows is a multiple of 32: whole runs
      if (r >= rows) continue;
      uint32_t lo[4], hi[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        lo[j] = __byte_perm(w[8 * run + 2 * j], w[8 * run + 2 * j + 1], 0x5410);  // low halves of 2 rows
        hi[j] = __byte_perm(w[8 * run + 2 * j], w[8 * run + 2 * j + 1], 0x7632);  // high halves
      }
      store16(out + col * rows + r, lo);
      store16(out + (col + 1) * rows + r, hi);
    }
  }
}

}  // namespace

const char* decode_mxfp8_bf16(const uint8_t* codes, const uint8_t* scales, int64_t rows, int64_t cols, uint16_t* out,
                              bool transpose_out, MxScaleLayout layout, cudaStream_t stream) {
  constexpr const char* fn = "decode_mxfp8_bf16";
  const bool grid_layout = layout == MxScaleLayout::grid;
  check_shape(fn, rows, cols);
  check_not_null(fn, "codes", codes);
  check_not_null(fn, "scales", scales);
  check_not_null(fn, "out", out);
  check_multiple(fn, "cols", cols, kMxBlock, "1x32 MX blocks along cols");
  check_multiple(fn, "rows", rows, kMxBlock, "rows of the transposed output are stored 16 bytes at a time");
  check_aligned(fn, "codes", codes);
  check_aligned(fn, "out", out);
  if (!transpose_out) {
    const int64_t chunks = rows * cols / 16, per_block = int64_t{kThreads} * kChunksPerThread;
    if (grid_layout) {
      decode_mxfp8_bf16_kernel<<<static_cast<unsigned>((chunks + per_block - 1) / per_block), kThreads, 0, stream>>>(
          reinterpret_cast<const uint4*>(codes), scales, chunks, reinterpret_cast<uint4*>(out));
    } else {
      const dim3 grid(static_cast<unsigned>((cols + kTiledCols - 1) / kTiledCols),
                      static_cast<unsigned>((rows + kTiledRows - 1) / kTiledRows));
      if (grid.y > 65535) throw std::invalid_argument("decode_mxfp8_bf16: rows too large for one launch; split along rows");
      decode_mxfp8_bf16_tiled_kernel<<<grid, kThreads, 0, stream>>>(codes, scales, rows, cols, out);
    }
    NIBBLE_CHECK_LAUNCH();
    return grid_layout ? "decode mxfp8 -> bf16 (exact, straight; bit arithmetic for scales 2^-112..2^119)"
                       : "decode mxfp8 -> bf16 (exact, straight, 128x4-tiled scales; bit arithmetic for scales "
                         "2^-112..2^119)";
  }
  const dim3 grid(static_cast<unsigned>((cols + tile::kTile - 1) / tile::kTile),
                  static_cast<unsigned>((rows + tile::kTile - 1) / tile::kTile));
  if (grid.y > 65535) throw std::invalid_argument("decode_mxfp8_bf16: rows too large for one launch; split along rows");
  if (grid_layout) {
    decode_mxfp8_bf16_transpose_kernel<true><<<grid, tile::kThreads, 0, stream>>>(codes, scales, rows, cols, out);
  } else {
    decode_mxfp8_bf16_transpose_kernel<false><<<grid, tile::kThreads, 0, stream>>>(codes, scales, rows, cols, out);
  }
  NIBBLE_CHECK_LAUNCH();
  return grid_layout ? "decode mxfp8 -> bf16 (exact, transposed through 128x128 shared-memory tiles)"
                     : "decode mxfp8 -> bf16 (exact, transposed through 128x128 shared-memory tiles, 128x4-tiled "
                       "scales)";
}

}  // namespace nibble::cuda
