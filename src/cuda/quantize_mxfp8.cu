// mxfp8: E4M3 elements with one E8M0 scale per 32 elements, row-wise (1x32) and column-wise (32x1,
// i.e. 1x32 along the transposed tensor) copies from one read of the input. OCP and round-up scale
// rules are quant::mx_scale_code's.
#include <cstdlib>

#include "env_knobs.hpp"
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
  return quant::mx_scale_code(quant::amax_from_bits(amax_bits), rule, kF);
}

// kAsync: the tile goes to shared memory by cp.async (tile::load_tile_async) and the row phase reads
// it back, instead of 8 loads into registers parked afterwards; with kMinBlocks 5 or 6 more blocks fit
// per SM (the A/B knob NIBBLE_MXFP8_ASYNC).
template <bool kSr, int kMinBlocks, bool kAsync>
__global__ void __launch_bounds__(tile::kThreads, kMinBlocks)
    quantize_mxfp8_kernel(const uint16_t* __restrict__ x, int64_t rows, int64_t cols, Fp8Copies out, MxScales sc,
                          quant::SrKey sr) {
  __shared__ tile::Smem s;
  const tile::TileCoord t = tile::block_tile(out.colwise != nullptr);
  const int64_t row0 = t.tr * tile::kTile, col0 = t.tc * tile::kTile;
  const bool grid_layout = sc.layout == MxScaleLayout::grid;
  uint4 v[tile::kRowsPerThread][2];
  if constexpr (kAsync) {
    tile::load_tile_async(s, x, rows, cols, row0, col0);
    tile::wait_own_copies();
  } else {
    tile::load_rows(x, rows, cols, row0, col0, v);
  }

  if (out.rowwise != nullptr) {
    // A 1x32 block is two 16-column chunks: lanes 2i and 2i+1.
    const tile::RowPhase rp = tile::row_phase();
    const int64_t c = col0 + tile::kColsPerThread * rp.chunk;
#pragma unroll
    for (int k = 0; k < tile::kRowsPerThread; ++k) {
      if constexpr (kAsync) tile::row_from_smem(s, k, v[k]);
      const uint8_t code = mx_code(tile::group_max<1>(tile::amax16_bits(v[k])), sc.rule);
      const int64_t r = row0 + rp.r0 + 32 * k;
      if (r < rows && c < cols) {
        if ((rp.chunk & 1) == 0) {
          sc.rowwise[grid_layout ? r * (cols / kMxBlock) + c / kMxBlock : sl::tiled_index(cols, kMxBlock, r, c)] = code;
        }
        float f[16];
        tile::unpack16(v[k], f);
        *reinterpret_cast<uint4*>(out.rowwise + r * cols + c) = tile::encode16_mx<kF, kSr>(f, code, sr, r * cols + c);
      }
    }
  }
  if (out.colwise == nullptr) return;

  // A 32x1 block is 32 consecutive rows of one column: the lane pair (rc, rc ^ 1) of a column pair.
  if constexpr (!kAsync) tile::park_rows(s, v);
  __syncthreads();
  auto scale_index = [&](int64_t col, int64_t rb) {
    return grid_layout ? col * (rows / kMxBlock) + rb / kMxBlock : sl::tiled_index(rows, kMxBlock, col, rb);
  };
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
      sc.colwise[scale_index(col, r)] = lo;
      sc.colwise[scale_index(col + 1, r)] = hi;
    }
    float f[tile::kColRows];
    tile::column_lo(w, f);
    *reinterpret_cast<uint4*>(out.colwise + col * rows + r) = tile::encode16_mx<kF, kSr>(f, lo, sr, col * rows + r);
    tile::column_hi(w, f);
    *reinterpret_cast<uint4*>(out.colwise + (col + 1) * rows + r) =
        tile::encode16_mx<kF, kSr>(f, hi, sr, (col + 1) * rows + r);
  }
}

// CTAs per SM the launch asks the compiler to fit. By default none (0): ptxas picks 64 registers for
// the nearest kernel (4 CTAs per SM) and 80 for the stochastic one. 5 caps the nearest kernel at 48
// registers (ptxas: 20 bytes of spill); ncu (session 18) found the 4-CTA kernel latency-bound (42.5%
// of cycles with no eligible warp). NIBBLE_MXFP8_MIN_BLOCKS=5 picks the 5-CTA build (the A/B knob; on an
// H100 it was 8-13% slower, docs/perf/2026-12-05-h100-session22.md, so the default stays).
int min_blocks_knob() {
  static const int n = knobs::integer("NIBBLE_MXFP8_MIN_BLOCKS", 0);
  return n;
}

// NIBBLE_MXFP8_ASYNC=5 or 6: the cp.async tile (kAsync) built for 5 or 6 CTAs per SM (48 or 40
// registers; 6 x 32 KB of shared memory fits the SM's 227 KB). Unset or 0: the register tile.
int async_knob() {
  static const int n = knobs::integer("NIBBLE_MXFP8_ASYNC", 0);
  return n;
}

template <bool kSr>
void launch(dim3 grid, const uint16_t* x, int64_t rows, int64_t cols, Fp8Copies out, const MxScales& sc,
            const quant::SrKey& sr, cudaStream_t stream) {
  if constexpr (!kSr) {
    if (async_knob() == 5) {
      async_copy::prefer_max_shared<quantize_mxfp8_kernel<kSr, 5, true>>();
      quantize_mxfp8_kernel<kSr, 5, true><<<grid, tile::kThreads, 0, stream>>>(x, rows, cols, out, sc, sr);
      return;
    }
    if (async_knob() == 6) {
      async_copy::prefer_max_shared<quantize_mxfp8_kernel<kSr, 6, true>>();
      quantize_mxfp8_kernel<kSr, 6, true><<<grid, tile::kThreads, 0, stream>>>(x, rows, cols, out, sc, sr);
      return;
    }
    if (min_blocks_knob() == 5) {
      quantize_mxfp8_kernel<kSr, 5, false><<<grid, tile::kThreads, 0, stream>>>(x, rows, cols, out, sc, sr);
      return;
    }
  }
  quantize_mxfp8_kernel<kSr, 0, false><<<grid, tile::kThreads, 0, stream>>>(x, rows, cols, out, sc, sr);
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
