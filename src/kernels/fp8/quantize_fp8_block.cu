// fp8-block: E4M3 with power-of-two FP32 scales per 1x128 block (X, dY: row-wise and column-wise
// copies) or per 128x128 block (W). One 128x128 tile per thread block, so every 1x128 block of
// either orientation and every 128x128 block lies inside one tile: the input is read once.
#include "fp8/fp8_preconditions.hpp"
#include "fp8/fp8_tile_128x128.cuh"
#include "nibble/kernels/check.hpp"
#include "nibble/kernels/fp8_hw_convert_math.hpp"
#include "nibble/kernels/quantize_fp8.hpp"
#include "nibble/kernels/scale_layout.hpp"
#include "nibble/quant/scale_rules.hpp"

namespace nibble::cuda {
namespace {

using quant::ElementFormat;
namespace tile = fp8_tile;
namespace sl = scale_layout;

enum class Granularity { vec1x128, blk128x128 };

struct BlockScales {
  float* rowwise;
  float* colwise;
  BlockScaleLayout layout;
};

struct Pow2Scale {
  float enc;  // 2^k
  float dec;  // 2^-k, the stored FP32 scale
};
__device__ __forceinline__ Pow2Scale block_scale(uint32_t amax_bits) {
  const int k = quant::fp8_block_scale_exponent(quant::amax_from_bits(amax_bits), fmt::kE4M3Max);
  return {fmt::pow2f(k), fmt::pow2f(-k)};
}

template <Granularity G, bool kSr>
__global__ void __launch_bounds__(tile::kThreads)
    quantize_fp8_block_kernel(const uint16_t* __restrict__ x, int64_t rows, int64_t cols, Fp8Copies out,
                              BlockScales sc, quant::SrKey sr) {
  __shared__ tile::Smem s;
  __shared__ uint32_t tile_amax;
  constexpr ElementFormat F = ElementFormat::e4m3;
  const tile::TileCoord t = tile::block_tile(out.colwise != nullptr);
  const int64_t tr = t.tr, tc = t.tc;
  const int64_t row0 = tr * tile::kTile, col0 = tc * tile::kTile;
  const int64_t row_blocks = (cols + tile::kTile - 1) / tile::kTile;  // blocks along a row
  const int64_t col_blocks = (rows + tile::kTile - 1) / tile::kTile;  // blocks along a column
  const bool cublaslt = sc.layout == BlockScaleLayout::cublaslt;

  uint4 v[tile::kRowsPerThread][2];
  tile::load_rows(x, rows, cols, row0, col0, v);
  const tile::RowPhase rp = tile::row_phase();
  const int64_t c = col0 + tile::kColsPerThread * rp.chunk;
  uint32_t am[tile::kRowsPerThread];
#pragma unroll
  for (int k = 0; k < tile::kRowsPerThread; ++k) am[k] = tile::amax16_bits(v[k]);
  if constexpr (G == Granularity::blk128x128) {
    uint32_t m = am[0];
#pragma unroll
    for (int k = 1; k < tile::kRowsPerThread; ++k) m = max(m, am[k]);
    m = tile::block_max(m);
    if (threadIdx.x == 0) {
      tile_amax = m;
      const float dec = block_scale(m).dec;
      if (sc.rowwise != nullptr) sc.rowwise[cublaslt ? sl::blk128_index(cols, row0, col0) : tr * row_blocks + tc] = dec;
      if (sc.colwise != nullptr) sc.colwise[cublaslt ? sl::blk128_index(rows, col0, row0) : tc * col_blocks + tr] = dec;
    }
    __syncthreads();
  }
  const Pow2Scale whole = G == Granularity::blk128x128 ? block_scale(tile_amax) : Pow2Scale{1.0f, 1.0f};

  // Row-wise copy: a 1x128 block is one tile row = 8 consecutive lanes.
#pragma unroll
  for (int k = 0; k < tile::kRowsPerThread; ++k) {
    Pow2Scale ps = whole;
    const int64_t r = row0 + rp.r0 + 32 * k;
    if constexpr (G == Granularity::vec1x128) {
      ps = block_scale(tile::group_max<3>(am[k]));
      if (rp.chunk == 0 && sc.rowwise != nullptr && r < rows) {
        sc.rowwise[cublaslt ? sl::vec128_index(rows, r, col0) : r * row_blocks + tc] = ps.dec;
      }
    }
    if (out.rowwise != nullptr && r < rows && c < cols) {
      float f[16];
      tile::unpack16(v[k], f);
      *reinterpret_cast<uint4*>(out.rowwise + r * cols + c) = tile::encode16<F, kSr>(f, ps.enc, sr, r * cols + c);
    }
  }
  if (out.colwise == nullptr) return;

  // Column-wise copy: a 1x128 block is one tile column, i.e. the 8 lanes (rc = 0..7) that share a
  // column pair; their packed halfword amaxes meet in three shuffles.
  tile::park_rows(s, v);
  __syncthreads();
  auto col_scale_index = [&](int64_t col) { return cublaslt ? sl::vec128_index(cols, col, row0) : col * col_blocks + tr; };
#pragma unroll
  for (int pass = 0; pass < tile::kColPasses; ++pass) {
    const tile::ColPhase cp = tile::col_phase(pass);
    uint32_t w[tile::kColRows];
    tile::read_column_pair(s, cp, w);
    const int64_t col = col0 + 2 * cp.word, r = row0 + tile::kColRows * cp.rc;
    Pow2Scale lo = whole, hi = whole;
    if constexpr (G == Granularity::vec1x128) {
      const uint32_t m2 = tile::group_max2<3>(tile::column_pair_amax2(w));
      lo = block_scale(tile::lo_amax_bits(m2));
      hi = block_scale(tile::hi_amax_bits(m2));
      if (cp.rc == 0 && col < cols) {  // cols is a multiple of 16: col + 1 exists too
        sc.colwise[col_scale_index(col)] = lo.dec;
        sc.colwise[col_scale_index(col + 1)] = hi.dec;
      }
    }
    if (col < cols && r < rows) {
      float f[tile::kColRows];
      tile::column_lo(w, f);
      *reinterpret_cast<uint4*>(out.colwise + col * rows + r) = tile::encode16<F, kSr>(f, lo.enc, sr, col * rows + r);
      tile::column_hi(w, f);
      *reinterpret_cast<uint4*>(out.colwise + (col + 1) * rows + r) =
          tile::encode16<F, kSr>(f, hi.enc, sr, (col + 1) * rows + r);
    }
  }
}

template <Granularity G>
const char* launch_block(const char* fn, const uint16_t* x, int64_t rows, int64_t cols, Fp8Copies out,
                         BlockScales sc, const quant::SrKey& sr, cudaStream_t stream) {
  fp8_check::tile_io(fn, x, rows, cols, out);
  if (out.rowwise != nullptr) check_not_null(fn, "scale_inv_rowwise (needed with out.rowwise)", sc.rowwise);
  if (out.colwise != nullptr) check_not_null(fn, "scale_inv_colwise (needed with out.colwise)", sc.colwise);
  if (out.rowwise == nullptr && out.colwise == nullptr) {
    throw std::invalid_argument(std::string(fn) + ": out.rowwise and out.colwise are both null; nothing to do");
  }
  const dim3 grid(static_cast<unsigned>((cols + tile::kTile - 1) / tile::kTile),
                  static_cast<unsigned>((rows + tile::kTile - 1) / tile::kTile));
  if (grid.y > 65535) throw std::invalid_argument(std::string(fn) + ": rows too large for one launch; split along rows");
  if (sr.enabled) {
    quantize_fp8_block_kernel<G, true><<<grid, tile::kThreads, 0, stream>>>(x, rows, cols, out, sc, sr);
  } else {
    quantize_fp8_block_kernel<G, false><<<grid, tile::kThreads, 0, stream>>>(x, rows, cols, out, sc, sr);
  }
  NIBBLE_CHECK_LAUNCH();
  return G == Granularity::vec1x128 ? "fp8-block 1x128 (row-wise + column-wise, one pass, 128x128 tiles)"
                                    : "fp8-block 128x128 (row-wise + column-wise, one pass)";
}

}  // namespace

const char* quantize_fp8_block_1x128(const uint16_t* x, int64_t rows, int64_t cols, Fp8Copies out,
                                     float* scale_inv_rowwise, float* scale_inv_colwise, BlockScaleLayout layout,
                                     const quant::SrKey& sr, cudaStream_t stream) {
  return launch_block<Granularity::vec1x128>("quantize_fp8_block_1x128", x, rows, cols, out,
                                             BlockScales{scale_inv_rowwise, scale_inv_colwise, layout}, sr, stream);
}

const char* quantize_fp8_block_128x128(const uint16_t* x, int64_t rows, int64_t cols, Fp8Copies out,
                                       float* scale_inv_rowwise, float* scale_inv_colwise, BlockScaleLayout layout,
                                       const quant::SrKey& sr, cudaStream_t stream) {
  return launch_block<Granularity::blk128x128>("quantize_fp8_block_128x128", x, rows, cols, out,
                                               BlockScales{scale_inv_rowwise, scale_inv_colwise, layout}, sr, stream);
}

}  // namespace nibble::cuda
