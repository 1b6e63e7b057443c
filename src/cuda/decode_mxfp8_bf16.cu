// Exact MXFP8 -> BF16 decode for the emulated mxfp8 GEMM on Hopper (SPEC 4), straight or transposed.
#include "fp8_preconditions.hpp"
#include "fp8_tile_128x128.cuh"
#include "nibble/cuda/check.hpp"
#include "nibble/cuda/mxfp8_decode_math.hpp"
#include "nibble/cuda/quantize_fp8.hpp"

namespace nibble::cuda {
namespace {

namespace tile = fp8_tile;
constexpr int kMxBlock = 32;
constexpr int kThreads = 256;

// 16 codes of one block -> 16 BF16 (two 16-byte stores' worth).
__device__ __forceinline__ void decode16(uint4 codes, uint8_t scale, uint4 (&o)[2]) {
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

// Straight: one 16-code chunk per thread; a warp covers 512 contiguous codes.
__global__ void __launch_bounds__(kThreads)
    decode_mxfp8_bf16_kernel(const uint4* __restrict__ codes, const uint8_t* __restrict__ scales, int64_t chunks,
                             uint4* __restrict__ out) {
  const int64_t i = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (i >= chunks) return;
  uint4 o[2];
  decode16(__ldg(codes + i), __ldg(scales + i / 2), o);
  out[2 * i] = o[0];
  out[2 * i + 1] = o[1];
}

// Transposed: a 128x128 tile of codes is decoded row-wise into shared memory (BF16), then each lane
// writes 64 rows of one column as a contiguous 128-byte run of the [cols, rows] output.
__global__ void __launch_bounds__(tile::kThreads)
    decode_mxfp8_bf16_transpose_kernel(const uint8_t* __restrict__ codes, const uint8_t* __restrict__ scales,
                                       int64_t rows, int64_t cols, uint16_t* __restrict__ out) {
  __shared__ tile::Smem s;
  const int64_t row0 = int64_t{blockIdx.y} * tile::kTile, col0 = int64_t{blockIdx.x} * tile::kTile;
  const tile::RowPhase rp = tile::row_phase();
  const int64_t c = col0 + tile::kColsPerThread * rp.chunk;
  uint4 in[tile::kRowsPerThread];
  uint8_t sc[tile::kRowsPerThread];
#pragma unroll
  for (int k = 0; k < tile::kRowsPerThread; ++k) {
    const int64_t r = row0 + rp.r0 + 32 * k;
    const bool ok = r < rows && c < cols;
    in[k] = ok ? __ldg(reinterpret_cast<const uint4*>(codes + r * cols + c)) : make_uint4(0, 0, 0, 0);
    sc[k] = ok ? __ldg(scales + r * (cols / kMxBlock) + c / kMxBlock) : 0;
  }
#pragma unroll
  for (int k = 0; k < tile::kRowsPerThread; ++k) {
    uint4 o[2];
    decode16(in[k], sc[k], o);
    uint4* dst = reinterpret_cast<uint4*>(&s.x[rp.r0 + 32 * k][tile::kColsPerThread * rp.chunk]);
    dst[0] = o[0];
    dst[1] = o[1];
  }
  __syncthreads();
  const tile::ColPhase cp = tile::col_phase();
  const int64_t col = col0 + cp.col;
  if (col >= cols) return;
#pragma unroll
  for (int j = 0; j < tile::kColRows / 8; ++j) {
    const int rl = tile::kColRows * cp.half + 8 * j;
    const int64_t r = row0 + rl;
    if (r >= rows) break;
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = s.x[rl + 2 * i][cp.col] | static_cast<uint32_t>(s.x[rl + 2 * i + 1][cp.col]) << 16;
    *reinterpret_cast<uint4*>(out + col * rows + r) = make_uint4(w[0], w[1], w[2], w[3]);
  }
}

}  // namespace

const char* decode_mxfp8_bf16(const uint8_t* codes, const uint8_t* scales, int64_t rows, int64_t cols, uint16_t* out,
                              bool transpose_out, cudaStream_t stream) {
  constexpr const char* fn = "decode_mxfp8_bf16";
  fp8_check::positive_shape(fn, rows, cols);
  fp8_check::not_null(fn, "codes", codes);
  fp8_check::not_null(fn, "scales", scales);
  fp8_check::not_null(fn, "out", out);
  fp8_check::multiple_of(fn, "cols", cols, kMxBlock, "1x32 MX blocks along cols");
  fp8_check::multiple_of(fn, "rows", rows, kMxBlock, "rows of the transposed output are stored 16 bytes at a time");
  fp8_check::aligned16(fn, "codes", codes);
  fp8_check::aligned16(fn, "out", out);
  if (!transpose_out) {
    const int64_t chunks = rows * cols / 16;
    decode_mxfp8_bf16_kernel<<<static_cast<unsigned>((chunks + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
        reinterpret_cast<const uint4*>(codes), scales, chunks, reinterpret_cast<uint4*>(out));
    NIBBLE_CHECK_LAUNCH();
    return "decode mxfp8 -> bf16 (exact, straight)";
  }
  const dim3 grid(static_cast<unsigned>((cols + tile::kTile - 1) / tile::kTile),
                  static_cast<unsigned>((rows + tile::kTile - 1) / tile::kTile));
  if (grid.y > 65535) throw std::invalid_argument("decode_mxfp8_bf16: rows too large for one launch; split along rows");
  decode_mxfp8_bf16_transpose_kernel<<<grid, tile::kThreads, 0, stream>>>(codes, scales, rows, cols, out);
  NIBBLE_CHECK_LAUNCH();
  return "decode mxfp8 -> bf16 (exact, transposed through 128x128 shared-memory tiles)";
}

}  // namespace nibble::cuda
