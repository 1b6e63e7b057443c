// Quartet backward quantizer: random-sign Hadamard along the GEMM's inner dimension, then the
// 3/4-prescaled absmax MXFP4 quantizer (quant::quartet_backward_group), nearest or stochastic.
//
// Two kernels:
//  - row-wise only: one thread per rotation block, 16-byte loads, everything in registers;
//  - tile: a CTA stages a 32 x 256 tile in shared memory (as float) and produces the row-wise copy
//    (thread = one row's 32-group) and the column-wise copy (thread = one column's 32 rows, written
//    as a row of the transposed tensor) from the same read. Padding each smem row by 4 floats makes
//    both access patterns conflict-free: a quarter warp reads 8 different rows (row reads) or 8
//    consecutive words of one row (column reads). Version 1 (default) launches a CTA per tile;
//    version 2 launches as many CTAs as fit and walks the tiles, fetching the next tile into
//    registers before quantizing the current one (NIBBLE_QUARTET_TILE=2; slower on the H200).
// Signs: the sign vector depends only on (seed, j), so the host evaluates quant::rotation_sign once
// and passes it as +-1 multipliers; multiplying by -1 is the same as negating (NaN aside, and a NaN
// block becomes a NaN-scale block with zero codes either way). The transform itself is
// quant::fwht_normalized, exactly as quant::rotate_block_forward runs it.
#include <array>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "quartet_backward_parts.cuh"
#include "nibble/format/e8m0.hpp"
#include "nibble/quant/element_codecs.hpp"
#include "nibble/quant/hadamard.hpp"

namespace nibble::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kTileRows = 32;
constexpr int kTileCols = 256;
constexpr int kSmemStride = kTileCols + 4;  // floats per smem row (padding: conflict-free columns)

using bwd::host_sign_bits;
using bwd::quantize_store_group;
using bwd::rotate_signed;
using bwd::SignBits;

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

// Tile loaders, in two steps so a persistent CTA can fetch the next tile while it quantizes this
// one: fetch() issues the global loads of the tile at (row0, col0) into registers (all of a thread's
// loads in flight together), park() turns them into floats in smem[r][c] (`tile_cols` valid columns).
template <class In>
struct DenseTileLoader {
  const In* x;
  int64_t cols;
  static constexpr int kPer = 16 / sizeof(In);                      // elements per 16-byte chunk
  static constexpr int kChunksPerRow = kTileCols / kPer;
  static constexpr int kIters = kTileRows * kChunksPerRow / kThreads;  // chunks per thread
  struct Regs {
    uint4 raw[kIters];
  };
  __device__ void fetch(Regs& g, int64_t row0, int64_t col0, int tile_cols) const {
    const int valid_chunks = tile_cols / kPer;
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int q = threadIdx.x + i * kThreads, r = q / kChunksPerRow, ch = q % kChunksPerRow;
      if (ch < valid_chunks) g.raw[i] = __ldg(reinterpret_cast<const uint4*>(x + (row0 + r) * cols + col0 + ch * kPer));
    }
  }
  __device__ void park(float* smem, const float*, const Regs& g, int tile_cols) const {
    const int valid_chunks = tile_cols / kPer;
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int q = threadIdx.x + i * kThreads, r = q / kChunksPerRow, ch = q % kChunksPerRow;
      if (ch >= valid_chunks) continue;
      float v[kPer];
      rowcol::unpack_chunk<In>(g.raw[i], v);
#pragma unroll
      for (int k = 0; k < kPer; k += 4) {
        *reinterpret_cast<float4*>(smem + r * kSmemStride + ch * kPer + k) = make_float4(v[k], v[k + 1], v[k + 2], v[k + 3]);
      }
    }
  }
};

// Dequantizes an MXFP4 tile (as quant::dequantize: decode_e2m1(code) * decode_e8m0(scale)).
// One thread per (row = lane, 32-group = warp): 16 bytes of codes and one scale byte; float4 stores
// of a quarter warp then hit 8 different rows, i.e. 8 different bank groups. E2M1 decodes through a
// 16-entry table in shared memory: 16 words in 16 banks, so any lane pattern is conflict-free (equal
// addresses broadcast); one LDS instead of the generic bit decode.
struct Mxfp4TileLoader {
  const uint8_t* codes;
  const uint8_t* scales;
  int64_t cols;
  struct Regs {
    uint4 packed;
    uint32_t scale;
  };
  __device__ void fetch(Regs& g, int64_t row0, int64_t col0, int tile_cols) const {
    const int r = threadIdx.x % 32, grp = threadIdx.x / 32;
    if (grp * 32 >= tile_cols) return;
    const int64_t e0 = (row0 + r) * cols + col0 + grp * 32;
    g.packed = __ldg(reinterpret_cast<const uint4*>(codes) + e0 / 32);
    g.scale = __ldg(scales + e0 / 32);
  }
  __device__ void park(float* smem, const float* lut, const Regs& g, int tile_cols) const {
    const int r = threadIdx.x % 32, grp = threadIdx.x / 32;
    if (grp * 32 >= tile_cols) return;
    rowcol::decode_mxfp4_group(lut, g.packed, g.scale, [&](int j, float4 f) {
      *reinterpret_cast<float4*>(smem + r * kSmemStride + grp * 32 + j) = f;
    });
  }
};

using rowcol::init_e2m1_table;

// The row-wise and column-wise copies of one staged tile.
template <int R, bool kSr>
__device__ __forceinline__ void quantize_tile(const float* smem, int64_t row0, int64_t col0, int tile_cols,
                                              int64_t rows, int64_t cols, const SignBits& signs,
                                              const quant::SrKey& key, const Mxfp4Planes& rowwise,
                                              const Mxfp4Planes& colwise) {
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

// Version 1: one CTA per 32 x 256 tile.
template <int R, bool kSr, class Loader>
__global__ void __launch_bounds__(kThreads)
    backward_tile_kernel(Loader load, int64_t rows, int64_t cols, SignBits signs, quant::SrKey key,
                         Mxfp4Planes rowwise, Mxfp4Planes colwise) {
  __shared__ __align__(16) float smem[kTileRows * kSmemStride];
  __shared__ float lut[16];
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * kTileCols;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kTileRows;
  const int tile_cols = static_cast<int>(cols - col0 < kTileCols ? cols - col0 : kTileCols);
  typename Loader::Regs g;
  load.fetch(g, row0, col0, tile_cols);
  init_e2m1_table(lut);
  __syncthreads();
  load.park(smem, lut, g, tile_cols);
  __syncthreads();
  quantize_tile<R, kSr>(smem, row0, col0, tile_cols, rows, cols, signs, key, rowwise, colwise);
}

// Version 2: persistent CTAs walk the tiles (column tiles fastest, as version 1's grid), fetching
// the next tile into registers before quantizing the current one, so its loads are in flight
// during the arithmetic instead of after it.
// Three CTAs per SM (<= 85 registers): without the bound ptxas takes 128 and only two fit.
template <int R, bool kSr, class Loader>
__global__ void __launch_bounds__(kThreads, 4)
    backward_tile_persistent_kernel(Loader load, int64_t rows, int64_t cols, SignBits signs, quant::SrKey key,
                                    Mxfp4Planes rowwise, Mxfp4Planes colwise) {
  __shared__ __align__(16) float smem[kTileRows * kSmemStride];
  __shared__ float lut[16];
  const int64_t tiles_x = (cols + kTileCols - 1) / kTileCols;
  const int64_t tiles = tiles_x * (rows / kTileRows);
  auto origin = [&](int64_t t, int64_t& row0, int64_t& col0, int& tile_cols) {
    col0 = (t % tiles_x) * kTileCols;
    row0 = (t / tiles_x) * kTileRows;
    tile_cols = static_cast<int>(cols - col0 < kTileCols ? cols - col0 : kTileCols);
  };
  init_e2m1_table(lut);
  typename Loader::Regs g;
  int64_t row0 = 0, col0 = 0;
  int tile_cols = 0;
  int64_t t = blockIdx.x;
  if (t < tiles) {
    origin(t, row0, col0, tile_cols);
    load.fetch(g, row0, col0, tile_cols);
  }
  for (; t < tiles; t += gridDim.x) {
    __syncthreads();  // the previous tile's readers are done with smem (and the table is written)
    load.park(smem, lut, g, tile_cols);
    __syncthreads();
    const int64_t r0 = row0, c0 = col0;
    const int tc = tile_cols;
    if (t + gridDim.x < tiles) {
      origin(t + gridDim.x, row0, col0, tile_cols);
      load.fetch(g, row0, col0, tile_cols);
    }
    quantize_tile<R, kSr>(smem, r0, c0, tc, rows, cols, signs, key, rowwise, colwise);
  }
}

// NIBBLE_QUARTET_TILE selects the tile kernel, for A/B measurements. Version 3 (fp4_rowcol_tile.cuh:
// 64 x 128 tiles, sector-wide stores) is the default: on the H200 it beat version 1 (a CTA per 32x256
// tile) in the same run, row+col nearest 0.132 vs 0.165 ms on 15872x4096 and 0.495 vs 0.671 ms on
// 15872x16384, from-MXFP4 transposed 0.087 vs 0.096 and 0.322 vs 0.366 ms (docs/perf/2026-12-03-h200-
// session13.md). Version 2 (persistent CTAs) was slower than version 1 (0.218 and 1.10 ms).
enum class TileVersion { per_tile = 1, persistent = 2, wide = 3 };

TileVersion tile_version() {
  const char* v = std::getenv("NIBBLE_QUARTET_TILE");
  if (v == nullptr) return TileVersion::wide;
  const std::string s(v);
  if (s == "1") return TileVersion::per_tile;
  if (s == "2") return TileVersion::persistent;
  if (s == "3" || s.empty()) return TileVersion::wide;
  throw std::invalid_argument("NIBBLE_QUARTET_TILE='" + s + "' is unknown; use 3 (64x128 tiles, sector-wide "
                              "stores, the default), 1 (a CTA per 32x256 tile) or 2 (persistent CTAs)");
}

// What a tile launch produced, and the path string it returns (static storage: the API returns
// const char*).
enum class TileJob { row_and_col = 0, col = 1, from_mxfp4 = 2 };

const char* tile_path(TileVersion v, TileJob job) {
  static const auto table = [] {
    const char* jobs[3] = {
        "cuda quartet_backward signed-hadamard+absmax, row-wise and column-wise copies from one ",
        "cuda quartet_backward signed-hadamard+absmax, column-wise copy from a ",
        "cuda quartet_backward from mxfp4 (decode, transpose, signed-hadamard+absmax) via "};
    const char* tiles[3] = {"32x256 smem tile", "32x256 smem tile (persistent CTAs, next tile prefetched)",
                            "64x128 smem tile (sector-wide stores)"};
    std::array<std::array<std::string, 3>, 3> t;
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 3; ++k) t[j][k] = std::string(jobs[j]) + tiles[k];
    return t;
  }();
  return table[static_cast<int>(job)][static_cast<int>(v) - 1].c_str();
}

template <class Kernel>
unsigned persistent_grid(Kernel kernel, int64_t tiles) {
  int device = 0, sms = 0, per_sm = 0;
  NIBBLE_CUDA_CHECK(cudaGetDevice(&device));
  NIBBLE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  NIBBLE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, 0));
  const int64_t resident = static_cast<int64_t>(sms) * (per_sm > 0 ? per_sm : 1);
  return static_cast<unsigned>(tiles < resident ? tiles : resident);
}

// `load` feeds versions 1 and 2, `load64` version 3.
template <int R, bool kSr, class Loader, class Loader64>
void launch_tile_variant(const Loader& load, const Loader64& load64, int64_t rows, int64_t cols, const SignBits& s,
                         const quant::SrKey& key, Mxfp4Planes rowwise, Mxfp4Planes colwise, cudaStream_t stream) {
  const TileVersion v = tile_version();
  if (v == TileVersion::wide) {
    rowcol::kernel<<<rowcol::grid(rows, cols), rowcol::kThreads, 0, stream>>>(
        load64, rows, cols, bwd::QuartetGroups<R, kSr>{s, key}, rowwise, colwise);
  } else if (v == TileVersion::persistent) {
    const int64_t tiles = fp4::blocks_for(cols, kTileCols) * (rows / kTileRows);
    const unsigned grid = persistent_grid(backward_tile_persistent_kernel<R, kSr, Loader>, tiles);
    backward_tile_persistent_kernel<R, kSr, Loader><<<grid, kThreads, 0, stream>>>(load, rows, cols, s, key, rowwise,
                                                                                  colwise);
  } else {
    const dim3 grid(fp4::blocks_for(cols, kTileCols), static_cast<unsigned>(rows / kTileRows));
    backward_tile_kernel<R, kSr, Loader><<<grid, kThreads, 0, stream>>>(load, rows, cols, s, key, rowwise, colwise);
  }
  NIBBLE_CHECK_LAUNCH();
}

template <int R, class Loader, class Loader64>
void launch_tile(const Loader& load, const Loader64& load64, int64_t rows, int64_t cols, const SignBits& s,
                 const quant::SrKey& key, Mxfp4Planes rowwise, Mxfp4Planes colwise, cudaStream_t stream) {
  if (key.enabled) {
    launch_tile_variant<R, true>(load, load64, rows, cols, s, key, rowwise, colwise, stream);
  } else {
    launch_tile_variant<R, false>(load, load64, rows, cols, s, key, rowwise, colwise, stream);
  }
}

template <class Loader, class Loader64>
void dispatch_tile(const Loader& load, const Loader64& load64, int64_t rows, int64_t cols,
                   const QuartetBackwardOptions& o, Mxfp4Planes rowwise, Mxfp4Planes colwise, cudaStream_t stream) {
  const SignBits s = host_sign_bits(o);
  const quant::SrKey& k = o.rounding;
  if (!o.rotate) return launch_tile<0>(load, load64, rows, cols, s, k, rowwise, colwise, stream);
  if (o.hadamard_size == 16) return launch_tile<16>(load, load64, rows, cols, s, k, rowwise, colwise, stream);
  return launch_tile<32>(load, load64, rows, cols, s, k, rowwise, colwise, stream);
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
      const auto* p = static_cast<const uint16_t*>(x);
      dispatch_tile(DenseTileLoader<uint16_t>{p, cols}, rowcol::DenseLoader<uint16_t>{p, cols}, rows, cols,
                    options, rowwise, colwise, stream);
    } else {
      const auto* p = static_cast<const float*>(x);
      dispatch_tile(DenseTileLoader<float>{p, cols}, rowcol::DenseLoader<float>{p, cols}, rows, cols, options,
                    rowwise, colwise, stream);
    }
    return tile_path(tile_version(), rowwise.codes != nullptr ? TileJob::row_and_col : TileJob::col);
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
  dispatch_tile(Mxfp4TileLoader{q.codes, q.scales, cols}, rowcol::Mxfp4Loader{q.codes, q.scales, cols}, rows,
                cols, options, Mxfp4Planes{}, colwise, stream);
  return tile_path(tile_version(), TileJob::from_mxfp4);
}

}  // namespace nibble::cuda
