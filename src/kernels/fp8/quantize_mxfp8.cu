// mxfp8: E4M3 elements with one E8M0 scale per 32 elements, row-wise (1x32) and column-wise (32x1,
// i.e. 1x32 along the transposed tensor) copies from one read of the input. The TE (default) and OCP
// scale rules are quant::mx_scale_code_of_abs_bits's.
#include <cstdlib>

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
constexpr ElementFormat kF = ElementFormat::e4m3;
constexpr int kMxBlock = 32;

struct MxScales {
  uint8_t* rowwise;
  uint8_t* colwise;
  MxScaleLayout layout;
  quant::MxScaleRule rule;
};

__device__ __forceinline__ uint8_t mx_code(uint32_t amax_bits, quant::MxScaleRule rule) {
  return quant::mx_scale_code_of_abs_bits(amax_bits, rule, kF);
}

// One 128x4 scale tile (cuBLASLt VEC32_UE8M0); scale (r, c) of it at scale_layout::tile_offset(r, c).
constexpr int kTiledScaleBytes = static_cast<int>(scale_layout::kTileRows * scale_layout::kTileCols);
static_assert(tile::kTile == scale_layout::kTileRows && tile::kTile == 32 * scale_layout::kTileCols,
              "a 128x128 data tile owns exactly one 128x4 scale tile per copy");

// Warp kWarp stores the staged tile: 32 lanes x 16 bytes, whole sectors. Call after a barrier.
template <int kWarp>
__device__ __forceinline__ void store_tiled_scales(const uint8_t* staged, uint8_t* scales, int64_t tile_offset) {
  if ((threadIdx.x >> 5) != kWarp) return;
  const int lane = threadIdx.x & 31;
  reinterpret_cast<uint4*>(scales + tile_offset)[lane] = reinterpret_cast<const uint4*>(staged)[lane];
}

// kGrid: the scale layout (MxScaleLayout::grid, else tiled128x4) is a template argument, so the
// kernel carries neither the other layout's index arithmetic nor a branch on it. (Walking the
// row-phase stores by pointer instead of recomputing r * cols saved 16 more instructions but cost
// 28 bytes of spill at 64 registers: not taken.)
template <bool kSr, int kMinBlocks, bool kGrid>
__global__ void __launch_bounds__(tile::kThreads, kMinBlocks)
    quantize_mxfp8_kernel(const uint16_t* __restrict__ x, int64_t rows, int64_t cols, Fp8Copies out, MxScales sc,
                          quant::SrKey sr) {
  __shared__ tile::Smem s;
  // Tiled layout: a 128x128 data tile's scales are exactly one 128x4 scale tile per copy (512 bytes),
  // staged here and stored by one warp in whole 16-byte pieces (padding included: out-of-range rows and
  // blocks load as zeros, whose scale code is 0, so the kernel writes the padding's zeros itself).
  __shared__ __align__(16) uint8_t stage[kGrid ? 1 : 2][kGrid ? 1 : kTiledScaleBytes];
  const tile::TileCoord t = tile::block_tile(out.colwise != nullptr);
  const int64_t row0 = t.tr * tile::kTile, col0 = t.tc * tile::kTile;
  uint4 v[tile::kRowsPerThread][2];
  tile::load_rows(x, rows, cols, row0, col0, v);

  if (out.rowwise != nullptr) {
    // A 1x32 block is two 16-column chunks: lanes 2i and 2i+1.
    const tile::RowPhase rp = tile::row_phase();
    const int64_t c = col0 + tile::kColsPerThread * rp.chunk, r_first = row0 + rp.r0;
#pragma unroll
    for (int k = 0; k < tile::kRowsPerThread; ++k) {
      const uint8_t code = mx_code(tile::group_max<1>(tile::amax16_bits(v[k])), sc.rule);
      const int64_t r = r_first + 32 * k;
      if constexpr (!kGrid) {
        if ((rp.chunk & 1) == 0) stage[0][sl::tile_offset(rp.r0 + 32 * k, rp.chunk / 2)] = code;
      }
      if (r < rows && c < cols) {
        if constexpr (kGrid) {
          if ((rp.chunk & 1) == 0) sc.rowwise[r * (cols / kMxBlock) + c / kMxBlock] = code;
        }
        float f[16];
        tile::unpack16(v[k], f);
        *reinterpret_cast<uint4*>(out.rowwise + r * cols + c) = tile::encode16_mx<kF, kSr>(f, code, sr, r * cols + c);
      }
    }
  }
  // The row copy's staged scale tile, stored after the next barrier (whichever path comes to one).
  auto store_row_scales = [&] {
    if constexpr (!kGrid) {
      if (out.rowwise != nullptr) store_tiled_scales<0>(stage[0], sc.rowwise, sl::tiled_index(cols, kMxBlock, row0, col0));
    }
  };
  if (out.colwise == nullptr) {
    if constexpr (!kGrid) {
      __syncthreads();
      store_row_scales();
    }
    return;
  }

  // A 32x1 block is 32 consecutive rows of one column: the lane pair (rc, rc ^ 1) of a column pair.
  tile::park_rows(s, v);
  __syncthreads();
  store_row_scales();
#pragma unroll
  for (int pass = 0; pass < tile::kColPasses; ++pass) {
    const tile::ColPhase cp = tile::col_phase(pass);
    uint32_t w[tile::kColRows];
    tile::read_column_pair(s, cp, w);
    const uint32_t m2 = tile::group_max2<1>(tile::column_pair_amax2(w));
    const uint8_t lo = mx_code(tile::lo_amax_bits(m2), sc.rule), hi = mx_code(tile::hi_amax_bits(m2), sc.rule);
    const int64_t col = col0 + 2 * cp.word, r = row0 + tile::kColRows * cp.rc;
    if constexpr (!kGrid) {
      if ((cp.rc & 1) == 0) {
        stage[1][sl::tile_offset(2 * cp.word, cp.rc / 2)] = lo;
        stage[1][sl::tile_offset(2 * cp.word + 1, cp.rc / 2)] = hi;
      }
    }
    if (col >= cols || r >= rows) continue;  // rows is a multiple of 32: the whole 32-block exists
    if constexpr (kGrid) {
      if ((cp.rc & 1) == 0) {
        uint8_t* grid_scale = sc.colwise + col * (rows / kMxBlock) + r / kMxBlock;
        grid_scale[0] = lo;
        grid_scale[rows / kMxBlock] = hi;  // column col + 1
      }
    }
    uint8_t* codes = out.colwise + col * rows + r;  // column col + 1: + rows
    float f[tile::kColRows];
    tile::column_lo(w, f);
    *reinterpret_cast<uint4*>(codes) = tile::encode16_mx<kF, kSr>(f, lo, sr, col * rows + r);
    tile::column_hi(w, f);
    *reinterpret_cast<uint4*>(codes + rows) = tile::encode16_mx<kF, kSr>(f, hi, sr, (col + 1) * rows + r);
  }
  if constexpr (!kGrid) {
    __syncthreads();
    store_tiled_scales<1>(stage[1], sc.colwise, sl::tiled_index(rows, kMxBlock, col0, row0));
  }
}

// CTAs per SM the launch asks the compiler to fit: 4 for the nearest kernel (ptxas: 64 registers),
// none for the stochastic one (80 registers, its Philox state). 5 CTAs (48 registers) spill 160-220
// bytes; ncu finds the 4-CTA kernel latency-bound, yet the 5-CTA build runs 8-40% slower on an H100
// (the spills cost more than the extra warps hide).
template <bool kSr, bool kGrid>
void launch(dim3 grid, const uint16_t* x, int64_t rows, int64_t cols, Fp8Copies out, const MxScales& sc,
            const quant::SrKey& sr, cudaStream_t stream) {
  quantize_mxfp8_kernel<kSr, kSr ? 0 : 4, kGrid><<<grid, tile::kThreads, 0, stream>>>(x, rows, cols, out, sc, sr);
}

template <bool kSr>
void launch(dim3 grid, const uint16_t* x, int64_t rows, int64_t cols, Fp8Copies out, const MxScales& sc,
            const quant::SrKey& sr, cudaStream_t stream) {
  if (sc.layout == MxScaleLayout::grid) {
    launch<kSr, true>(grid, x, rows, cols, out, sc, sr, stream);
  } else {
    launch<kSr, false>(grid, x, rows, cols, out, sc, sr, stream);
  }
}

}  // namespace

const char* quantize_mxfp8(const uint16_t* x, int64_t rows, int64_t cols, quant::MxScaleRule rule, Fp8Copies out,
                           uint8_t* scales_rowwise, uint8_t* scales_colwise, MxScaleLayout layout,
                           const quant::SrKey& sr, cudaStream_t stream) {
  constexpr const char* fn = "quantize_mxfp8";
  check_shape(fn, rows, cols);
  check_not_null(fn, "x", x);
  check_multiple(fn, "cols", cols, kMxBlock, "1x32 MX blocks along cols");
  check_multiple(fn, "rows", rows, kMxBlock, "32x1 MX blocks of the column-wise copy");
  check_aligned(fn, "x", x);
  check_aligned(fn, "out.rowwise", out.rowwise);
  check_aligned(fn, "out.colwise", out.colwise);
  if (out.rowwise != nullptr) check_not_null(fn, "scales_rowwise (needed with out.rowwise)", scales_rowwise);
  if (out.colwise != nullptr) check_not_null(fn, "scales_colwise (needed with out.colwise)", scales_colwise);
  if (out.rowwise == nullptr && out.colwise == nullptr) {
    throw std::invalid_argument("quantize_mxfp8: out.rowwise and out.colwise are both null; nothing to do");
  }
  const dim3 grid(static_cast<unsigned>((cols + tile::kTile - 1) / tile::kTile),
                  static_cast<unsigned>((rows + tile::kTile - 1) / tile::kTile));
  if (grid.y > 65535) throw std::invalid_argument("quantize_mxfp8: rows too large for one launch; split along rows");
  // The 128x4 tiles pad rows to 128 and scale columns to 4, and cuBLASLt reads the padding: the tiled
  // kernel writes whole tiles, padding zeros included (each 128x128 data tile owns one scale tile).
  if (layout == MxScaleLayout::tiled128x4) {
    check_aligned(fn, "scales_rowwise (tiled: 16-byte tile stores)", scales_rowwise);
    check_aligned(fn, "scales_colwise (tiled: 16-byte tile stores)", scales_colwise);
  }
  const MxScales sc{scales_rowwise, scales_colwise, layout, rule};
  if (sr.enabled) {
    launch<true>(grid, x, rows, cols, out, sc, sr, stream);
  } else {
    launch<false>(grid, x, rows, cols, out, sc, sr, stream);
  }
  NIBBLE_CHECK_LAUNCH();
  return rule == quant::MxScaleRule::ocp ? "mxfp8 OCP scale rule (row-wise + column-wise, one pass)"
                                         : "mxfp8 TE scale rule (row-wise + column-wise, one pass)";
}

}  // namespace nibble::cuda
