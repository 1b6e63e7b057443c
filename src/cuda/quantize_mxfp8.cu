// mxfp8: E4M3 elements with one E8M0 scale per 32 elements, row-wise (1x32) and column-wise (32x1,
// i.e. 1x32 along the transposed tensor) copies from one read of the input. OCP and round-up scale
// rules are quant::mx_scale_code's.
#include <cstdlib>

#include "fp8_preconditions.hpp"
#include "fp8_tile_128x128.cuh"
#include "nibble/cuda/check.hpp"
#include "nibble/cuda/fp8_hw_convert_math.hpp"
#include "nibble/cuda/quantize_fp8.hpp"
#include "nibble/cuda/scale_layout.hpp"
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

// kGrid: the scale layout (MxScaleLayout::grid, else tiled128x4) is a template argument, so the
// kernel carries neither the other layout's index arithmetic nor a branch on it. (Walking the
// row-phase stores by pointer instead of recomputing r * cols saved 16 more instructions but cost
// 28 bytes of spill at 64 registers: not taken.)
template <bool kSr, int kMinBlocks, bool kGrid>
__global__ void __launch_bounds__(tile::kThreads, kMinBlocks)
    quantize_mxfp8_kernel(const uint16_t* __restrict__ x, int64_t rows, int64_t cols, Fp8Copies out, MxScales sc,
                          quant::SrKey sr) {
  __shared__ tile::Smem s;
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
      if (r < rows && c < cols) {
        if ((rp.chunk & 1) == 0) {
          if constexpr (kGrid) {
            sc.rowwise[r * (cols / kMxBlock) + c / kMxBlock] = code;
          } else {
            sc.rowwise[sl::tiled_index(cols, kMxBlock, r, c)] = code;
          }
        }
        float f[16];
        tile::unpack16(v[k], f);
        *reinterpret_cast<uint4*>(out.rowwise + r * cols + c) = tile::encode16_mx<kF, kSr>(f, code, sr, r * cols + c);
      }
    }
  }
  if (out.colwise == nullptr) return;

  // A 32x1 block is 32 consecutive rows of one column: the lane pair (rc, rc ^ 1) of a column pair.
  tile::park_rows(s, v);
  __syncthreads();
#pragma unroll
  for (int pass = 0; pass < tile::kColPasses; ++pass) {
    const tile::ColPhase cp = tile::col_phase(pass);
    uint32_t w[tile::kColRows];
    tile::read_column_pair(s, cp, w);
    const uint32_t m2 = tile::group_max2<1>(tile::column_pair_amax2(w));
    const uint8_t lo = mx_code(tile::lo_amax_bits(m2), sc.rule), hi = mx_code(tile::hi_amax_bits(m2), sc.rule);
    const int64_t col = col0 + 2 * cp.word, r = row0 + tile::kColRows * cp.rc;
    if (col >= cols || r >= rows) continue;  // rows is a multiple of 32: the whole 32-block exists
    if ((cp.rc & 1) == 0) {
      if constexpr (kGrid) {
        uint8_t* grid_scale = sc.colwise + col * (rows / kMxBlock) + r / kMxBlock;
        grid_scale[0] = lo;
        grid_scale[rows / kMxBlock] = hi;  // column col + 1
      } else {
        sc.colwise[sl::tiled_index(rows, kMxBlock, col, r)] = lo;
        sc.colwise[sl::tiled_index(rows, kMxBlock, col + 1, r)] = hi;
      }
    }
    uint8_t* codes = out.colwise + col * rows + r;  // column col + 1: + rows
    float f[tile::kColRows];
    tile::column_lo(w, f);
    *reinterpret_cast<uint4*>(codes) = tile::encode16_mx<kF, kSr>(f, lo, sr, col * rows + r);
    tile::column_hi(w, f);
    *reinterpret_cast<uint4*>(codes + rows) = tile::encode16_mx<kF, kSr>(f, hi, sr, (col + 1) * rows + r);
  }
}

// CTAs per SM the launch asks the compiler to fit: 4 for the nearest kernel (ptxas: 64 registers),
// none for the stochastic one (80 registers, its Philox state). 5 CTAs (48 registers) spill 160-220
// bytes; ncu (session 18) found the 4-CTA kernel latency-bound, but the 5-CTA build ran 8-13% slower
// on an H100 in session 22 and 31-40% slower in session 27 (docs/perf/2026-12-05-h100-session27.md),
// so that A/B knob (NIBBLE_MXFP8_MIN_BLOCKS) was removed.
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
  if (layout == MxScaleLayout::tiled128x4) {
    // The 128x4 tiles pad rows to 128 and scale columns to 4; cuBLASLt reads the padding, so zero it
    // (only where there is padding: otherwise the kernel writes every byte, and a memset is one more
    // launch per operand in each training step).
    auto zero_padding = [&](uint8_t* scales, int64_t n_rows, int64_t k) {
      const int64_t n = sl::tiled_count(n_rows, k, kMxBlock);
      if (n != n_rows * (k / kMxBlock)) NIBBLE_CUDA_CHECK(cudaMemsetAsync(scales, 0, n, stream));
    };
    if (out.rowwise != nullptr) zero_padding(scales_rowwise, rows, cols);
    if (out.colwise != nullptr) zero_padding(scales_colwise, cols, rows);
  }
  const MxScales sc{scales_rowwise, scales_colwise, layout, rule};
  if (sr.enabled) {
    launch<true>(grid, x, rows, cols, out, sc, sr, stream);
  } else {
    launch<false>(grid, x, rows, cols, out, sc, sr, stream);
  }
  NIBBLE_CHECK_LAUNCH();
  return rule == quant::MxScaleRule::ocp ? "mxfp8 OCP scale rule (row-wise + column-wise, one pass)"
                                         : "mxfp8 round-up scale rule (row-wise + column-wise, one pass)";
}

}  // namespace nibble::cuda
