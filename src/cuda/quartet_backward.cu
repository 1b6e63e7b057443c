// Quartet backward quantizer: random-sign Hadamard along the GEMM's inner dimension, then the
// 3/4-prescaled absmax MXFP4 quantizer (quant::quartet_backward_group), nearest or stochastic.
//
// Two kernels:
//  - row-wise only: one thread per rotation block, 16-byte loads, everything in registers;
//  - tile: a CTA stages a 32 x 256 tile in shared memory (as float) and produces the row-wise copy
//    (thread = one row's 32-group) and the column-wise copy (thread = one column's 32 rows, written
//    as a row of the transposed tensor) from the same read. Padding each smem row by 4 floats makes
//    both access patterns conflict-free: a quarter warp reads 8 different rows (row reads) or 8
//    consecutive words of one row (column reads).
// Signs: the sign vector depends only on (seed, j), so the host evaluates quant::rotation_sign once
// and passes it as bits; multiplying by -1 is the same as negating (NaN aside, and a NaN block
// becomes a NaN-scale block with zero codes either way). The transform itself is
// quant::fwht_normalized, exactly as quant::rotate_block_forward runs it.
#include "fp4_kernel_io.cuh"
#include "quartet_fused_group_math.cuh"
#include "nibble/format/e8m0.hpp"
#include "nibble/quant/element_codecs.hpp"
#include "nibble/quant/hadamard.hpp"

namespace nibble::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kTileRows = 32;
constexpr int kTileCols = 256;
constexpr int kSmemStride = kTileCols + 4;  // floats per smem row (padding: conflict-free columns)

// The random signs as +-1.0f multipliers, passed by value: the kernel parameter lives in the
// constant bank, so each sign is an FMUL with a constant operand (no per-element bit tests).
// Multiplying by -1 is exact negation (NaN aside: a NaN block becomes a NaN-scale block either way).
struct SignBits {
  float m[128];
};

SignBits host_sign_bits(const QuartetBackwardOptions& o) {
  SignBits s;
  for (float& m : s.m) m = 1.0f;
  if (!o.rotate) return s;
  const quant::Rotation rot{o.hadamard_size, quant::SignKind::seeded, o.sign_seed};
  for (int j = 0; j < o.hadamard_size; ++j) s.m[j] = quant::rotation_sign(rot, j);
  return s;
}

// (x * s) H for each rotation block of R values in v[0..N).
template <int R, int N>
__device__ __forceinline__ void rotate_signed(float* v, const SignBits& s) {
  if constexpr (R > 0) {
#pragma unroll
    for (int b = 0; b < N / R; ++b) {
#pragma unroll
      for (int j = 0; j < R; ++j) v[b * R + j] *= s.m[j];
      quant::fwht_normalized(v + b * R, R);
    }
  }
}

// Quantizes 32 values (already rotated) of output element index `index0` (a multiple of 32) and
// writes the packed codes and the scale of group index0 / 32. kSr is a template parameter so the
// nearest-even kernels carry no generator code and no registers for it.
template <bool kSr>
__device__ __forceinline__ void quantize_store_group(const float* v, const quant::SrKey& key, int64_t index0,
                                                     uint8_t* __restrict__ codes, uint8_t* __restrict__ scales) {
  uint4 packed;
  const uint8_t s = fp4::backward_group_packed<kSr>(v, key, static_cast<uint64_t>(index0), packed);
  reinterpret_cast<uint4*>(codes)[index0 / 32] = packed;
  scales[index0 / 32] = s;
}

template <int R, bool kSr, class In>
__global__ void __launch_bounds__(kThreads)
    backward_rowwise_kernel(const In* __restrict__ x, int64_t rows, int64_t cols, SignBits signs, quant::SrKey key,
                            uint8_t* __restrict__ codes, uint8_t* __restrict__ scales) {
  constexpr int N = R > 32 ? R : 32;
  const int64_t per_row = cols / N;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (item >= rows * per_row) return;
  const int64_t base = (item / per_row) * cols + (item % per_row) * N;
  float v[N];
  fp4::load_dense<N>(x + base, v);
  rotate_signed<R, N>(v, signs);
#pragma unroll
  for (int g = 0; g < N / 32; ++g) quantize_store_group<kSr>(v + 32 * g, key, base + 32 * g, codes, scales);
}

// Tile loaders: fill smem[r][c] (float) for the tile at (row0, col0) with `tile_cols` valid columns.
template <class In>
struct DenseTileLoader {
  const In* x;
  int64_t cols;
  __device__ void operator()(float* smem, int64_t row0, int64_t col0, int tile_cols) const {
    constexpr int kPer = 16 / sizeof(In);                      // elements per 16-byte chunk
    constexpr int kChunksPerRow = kTileCols / kPer;
    constexpr int kIters = kTileRows * kChunksPerRow / kThreads;  // chunks per thread
    const int valid_chunks = tile_cols / kPer;
    float v[kIters][kPer];
    // All loads first, so kIters 16-byte loads are in flight per thread.
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int q = threadIdx.x + i * kThreads, r = q / kChunksPerRow, ch = q % kChunksPerRow;
      if (ch < valid_chunks) fp4::load_dense<kPer>(x + (row0 + r) * cols + col0 + ch * kPer, v[i]);
    }
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int q = threadIdx.x + i * kThreads, r = q / kChunksPerRow, ch = q % kChunksPerRow;
      if (ch >= valid_chunks) continue;
#pragma unroll
      for (int k = 0; k < kPer; k += 4) {
        *reinterpret_cast<float4*>(smem + r * kSmemStride + ch * kPer + k) =
            make_float4(v[i][k], v[i][k + 1], v[i][k + 2], v[i][k + 3]);
      }
    }
  }
};

// Dequantizes an MXFP4 tile (as quant::dequantize: decode_e2m1(code) * decode_e8m0(scale)).
struct Mxfp4TileLoader {
  const uint8_t* codes;
  const uint8_t* scales;
  int64_t cols;
  __device__ void operator()(float* smem, int64_t row0, int64_t col0, int tile_cols) const {
    // One thread per (row = lane, 32-group = warp): 16 bytes of codes and one scale byte; float4
    // stores of a quarter warp then hit 8 different rows, i.e. 8 different bank groups.
    // E2M1 decode through a 16-entry table: 16 words in 16 banks, so any lane pattern is
    // conflict-free (equal addresses broadcast); one LDS instead of the generic bit decode.
    __shared__ float lut[16];
    if (threadIdx.x < 16) lut[threadIdx.x] = fmt::decode_e2m1(static_cast<uint8_t>(threadIdx.x));
    __syncthreads();
    const int r = threadIdx.x % 32, g = threadIdx.x / 32;
    if (g * 32 >= tile_cols) return;
    const int64_t e0 = (row0 + r) * cols + col0 + g * 32;
    const uint4 packed = __ldg(reinterpret_cast<const uint4*>(codes) + e0 / 32);
    const float s = fmt::decode_e8m0(__ldg(scales + e0 / 32));
#pragma unroll
    for (int j = 0; j < 32; j += 4) {
      float d[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) d[k] = lut[fp4::unpack_e2m1(packed, j + k)] * s;
      *reinterpret_cast<float4*>(smem + r * kSmemStride + g * 32 + j) = make_float4(d[0], d[1], d[2], d[3]);
    }
  }
};

template <int R, bool kSr, class Loader>
__global__ void __launch_bounds__(kThreads)
    backward_tile_kernel(Loader load, int64_t rows, int64_t cols, SignBits signs, quant::SrKey key,
                         Mxfp4Planes rowwise, Mxfp4Planes colwise) {
  __shared__ __align__(16) float smem[kTileRows * kSmemStride];
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * kTileCols;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kTileRows;
  const int tile_cols = static_cast<int>(cols - col0 < kTileCols ? cols - col0 : kTileCols);
  load(smem, row0, col0, tile_cols);
  __syncthreads();

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (rowwise.codes != nullptr && warp * 32 < tile_cols) {
    // Row-wise: thread (row = lane, group = warp); R <= 32 so a group holds whole rotation blocks.
    float v[32];
#pragma unroll
    for (int j = 0; j < 32; j += 4) {
      const float4 f = *reinterpret_cast<const float4*>(smem + lane * kSmemStride + warp * 32 + j);
      v[j] = f.x; v[j + 1] = f.y; v[j + 2] = f.z; v[j + 3] = f.w;
    }
    rotate_signed<R, 32>(v, signs);
    quantize_store_group<kSr>(v, key, (row0 + lane) * cols + col0 + warp * 32, rowwise.codes, rowwise.scales);
  }
  if (colwise.codes != nullptr && static_cast<int>(threadIdx.x) < tile_cols) {
    // Column-wise: thread = one column; its 32 rows are one group of the transposed tensor.
    float v[32];
#pragma unroll
    for (int r = 0; r < 32; ++r) v[r] = smem[r * kSmemStride + threadIdx.x];
    rotate_signed<R, 32>(v, signs);
    quantize_store_group<kSr>(v, key, (col0 + threadIdx.x) * rows + row0, colwise.codes, colwise.scales);
  }
}

template <int R, class Loader>
void launch_tile(const Loader& load, int64_t rows, int64_t cols, const SignBits& s, const quant::SrKey& key,
                 Mxfp4Planes rowwise, Mxfp4Planes colwise, cudaStream_t stream) {
  const dim3 grid(fp4::blocks_for(cols, kTileCols), static_cast<unsigned>(rows / kTileRows));
  if (key.enabled) {
    backward_tile_kernel<R, true, Loader><<<grid, kThreads, 0, stream>>>(load, rows, cols, s, key, rowwise, colwise);
  } else {
    backward_tile_kernel<R, false, Loader><<<grid, kThreads, 0, stream>>>(load, rows, cols, s, key, rowwise, colwise);
  }
  NIBBLE_CHECK_LAUNCH();
}

template <class Loader>
void dispatch_tile(const Loader& load, int64_t rows, int64_t cols, const QuartetBackwardOptions& o,
                   Mxfp4Planes rowwise, Mxfp4Planes colwise, cudaStream_t stream) {
  const SignBits s = host_sign_bits(o);
  if (!o.rotate) return launch_tile<0>(load, rows, cols, s, o.rounding, rowwise, colwise, stream);
  if (o.hadamard_size == 16) return launch_tile<16>(load, rows, cols, s, o.rounding, rowwise, colwise, stream);
  return launch_tile<32>(load, rows, cols, s, o.rounding, rowwise, colwise, stream);
}

template <int R, class In>
void launch_rowwise(const In* x, int64_t rows, int64_t cols, const SignBits& s, const quant::SrKey& key,
                    Mxfp4Planes out, cudaStream_t stream) {
  constexpr int N = R > 32 ? R : 32;
  const unsigned grid = fp4::blocks_for(rows * (cols / N), kThreads);
  if (key.enabled) {
    backward_rowwise_kernel<R, true, In><<<grid, kThreads, 0, stream>>>(x, rows, cols, s, key, out.codes, out.scales);
  } else {
    backward_rowwise_kernel<R, false, In><<<grid, kThreads, 0, stream>>>(x, rows, cols, s, key, out.codes, out.scales);
  }
  NIBBLE_CHECK_LAUNCH();
}

template <class In>
void dispatch_rowwise(const In* x, int64_t rows, int64_t cols, const QuartetBackwardOptions& o, Mxfp4Planes out,
                      cudaStream_t stream) {
  const SignBits s = host_sign_bits(o);
  if (!o.rotate) return launch_rowwise<0>(x, rows, cols, s, o.rounding, out, stream);
  switch (o.hadamard_size) {
    case 16: return launch_rowwise<16>(x, rows, cols, s, o.rounding, out, stream);
    case 32: return launch_rowwise<32>(x, rows, cols, s, o.rounding, out, stream);
    case 64: return launch_rowwise<64>(x, rows, cols, s, o.rounding, out, stream);
    default: return launch_rowwise<128>(x, rows, cols, s, o.rounding, out, stream);
  }
}

void check_planes(const char* fn, const char* which, const Mxfp4Planes& p) {
  if (p.codes == nullptr) return;
  fp4::check_not_null(fn, (std::string(which) + ".scales").c_str(), p.scales);
  fp4::check_aligned(fn, (std::string(which) + ".codes").c_str(), p.codes);
}

}  // namespace

const char* quartet_backward_quantize(const void* x, Fp4DenseType type, int64_t rows, int64_t cols,
                                      const QuartetBackwardOptions& options, Mxfp4Planes rowwise,
                                      Mxfp4Planes colwise, cudaStream_t stream) {
  constexpr const char* fn = "quartet_backward_quantize";
  fp4::check_shape(fn, rows, cols);
  fp4::check_not_null(fn, "x", x);
  fp4::check_aligned(fn, "x", x);
  if (rowwise.codes == nullptr && colwise.codes == nullptr) {
    throw std::invalid_argument(std::string(fn) + ": neither rowwise.codes nor colwise.codes is set; ask for at "
                                "least one copy");
  }
  check_planes(fn, "rowwise", rowwise);
  check_planes(fn, "colwise", colwise);
  const bool tile = colwise.codes != nullptr;
  if (options.rotate) fp4::check_hadamard_size(fn, options.hadamard_size, tile ? 32 : 128);
  const int n = options.rotate && options.hadamard_size > 32 ? options.hadamard_size : 32;
  fp4::check_multiple(fn, "cols", cols, n, "groups and rotation blocks run along cols");
  if (tile) {
    fp4::check_multiple(fn, "rows", rows, kTileRows, "the column-wise copy quantizes 32-row groups");
    if (type == Fp4DenseType::bf16) {
      dispatch_tile(DenseTileLoader<uint16_t>{static_cast<const uint16_t*>(x), cols}, rows, cols, options, rowwise,
                    colwise, stream);
    } else {
      dispatch_tile(DenseTileLoader<float>{static_cast<const float*>(x), cols}, rows, cols, options, rowwise, colwise,
                    stream);
    }
    return rowwise.codes != nullptr
               ? "cuda quartet_backward signed-hadamard+absmax, row-wise and column-wise copies from one 32x256 smem tile"
               : "cuda quartet_backward signed-hadamard+absmax, column-wise copy from a 32x256 smem tile";
  }
  if (type == Fp4DenseType::bf16) {
    dispatch_rowwise(static_cast<const uint16_t*>(x), rows, cols, options, rowwise, stream);
  } else {
    dispatch_rowwise(static_cast<const float*>(x), rows, cols, options, rowwise, stream);
  }
  return "cuda quartet_backward signed-hadamard+absmax, row-wise, thread per rotation block";
}

const char* quartet_backward_quantize_mxfp4_transposed(Mxfp4ConstPlanes q, int64_t rows, int64_t cols,
                                                       const QuartetBackwardOptions& options,
                                                       Mxfp4Planes colwise, cudaStream_t stream) {
  constexpr const char* fn = "quartet_backward_quantize_mxfp4_transposed";
  fp4::check_shape(fn, rows, cols);
  fp4::check_not_null(fn, "q.codes", q.codes);
  fp4::check_not_null(fn, "q.scales", q.scales);
  fp4::check_aligned(fn, "q.codes", q.codes);
  fp4::check_not_null(fn, "colwise.codes", colwise.codes);
  check_planes(fn, "colwise", colwise);
  if (options.rotate) fp4::check_hadamard_size(fn, options.hadamard_size, 32);
  fp4::check_multiple(fn, "cols", cols, 32, "the MXFP4 input has 1x32 groups along cols");
  fp4::check_multiple(fn, "rows", rows, kTileRows, "the column-wise copy quantizes 32-row groups");
  dispatch_tile(Mxfp4TileLoader{q.codes, q.scales, cols}, rows, cols, options, Mxfp4Planes{}, colwise, stream);
  return "cuda quartet_backward from mxfp4 (decode, transpose, signed-hadamard+absmax) via 32x256 smem tile";
}

}  // namespace nibble::cuda
