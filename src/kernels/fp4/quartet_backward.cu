// Quartet backward quantizer: random-sign Hadamard along the GEMM's inner dimension, then the
// 3/4-prescaled absmax MXFP4 quantizer (quant::quartet_backward_group), nearest or stochastic.
//
// Two kernels:
//  - row-wise only: one thread per rotation block, 16-byte loads, everything in registers;
//  - tile (fp4_rowcol_tile.cuh with the Quartet group policy): a CTA stages a 64 x 128 tile in
//    XOR-swizzled shared memory and writes the row-wise and column-wise copies from the same read,
//    with warp stores that cover whole 32-byte sectors. On the H200 it beats a 32 x 256 tile (a CTA
//    per tile, and a persistent-CTA variant of it, slower still): row+col nearest 0.132 vs 0.165 ms on
//    15872x4096, 0.495 vs 0.671 ms on 15872x16384; from-MXFP4 transposed 0.087 vs 0.096 and 0.322 vs
//    0.366 ms.
// Signs: the sign vector depends only on (seed, j), so the host evaluates quant::rotation_sign once
// and passes it as +-1 multipliers; multiplying by -1 is the same as negating (NaN aside, and a NaN
// block becomes a NaN-scale block with zero codes either way). The transform itself is
// quant::fwht_normalized, exactly as quant::rotate_block_forward runs it.
#include <stdexcept>
#include <string>

#include "fp4/quartet_backward_parts.cuh"
#include "nibble/format/e8m0.hpp"
#include "nibble/quant/element_codecs.hpp"
#include "nibble/quant/hadamard.hpp"

namespace nibble::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kGroupRows = 32;  // the column-wise copy quantizes 32-row groups

using bwd::host_sign_bits;
using bwd::quantize_store_group;
using bwd::rotate_signed;
using bwd::SignBits;

template <int R, bool kSr, class In>
__global__ void __launch_bounds__(kThreads)
    backward_rowwise_kernel(const In* __restrict__ x, int64_t rows, int64_t cols, SignBits signs, fp4::SrDraw key,
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
  for (int g = 0; g < N / 32; ++g) quantize_store_group<kSr>(v + 32 * g, key, static_cast<uint64_t>(base + 32 * g), codes, scales);
}

template <int R, bool kSr, class Loader>
void launch_tile_variant(const Loader& load, int64_t rows, int64_t cols, const SignBits& s, const quant::SrKey& key,
                         Mxfp4Planes rowwise, Mxfp4Planes colwise, cudaStream_t stream) {
  rowcol::launch(load, rows, cols, bwd::QuartetGroups<R, kSr>{s, key}, rowwise, colwise, stream);
}

template <int R, class Loader>
void launch_tile(const Loader& load, int64_t rows, int64_t cols, const SignBits& s, const quant::SrKey& key,
                 Mxfp4Planes rowwise, Mxfp4Planes colwise, cudaStream_t stream) {
  if (key.enabled) {
    launch_tile_variant<R, true>(load, rows, cols, s, key, rowwise, colwise, stream);
  } else {
    launch_tile_variant<R, false>(load, rows, cols, s, key, rowwise, colwise, stream);
  }
}

template <class Loader>
void dispatch_tile(const Loader& load, int64_t rows, int64_t cols, const QuartetBackwardOptions& o,
                   Mxfp4Planes rowwise, Mxfp4Planes colwise, cudaStream_t stream) {
  const SignBits s = host_sign_bits(o);
  const quant::SrKey& k = o.rounding;
  if (!o.rotate) return launch_tile<0>(load, rows, cols, s, k, rowwise, colwise, stream);
  if (o.hadamard_size == 16) return launch_tile<16>(load, rows, cols, s, k, rowwise, colwise, stream);
  return launch_tile<32>(load, rows, cols, s, k, rowwise, colwise, stream);
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

}  // namespace

const char* quartet_backward_quantize(const void* x, Fp4DenseType type, int64_t rows, int64_t cols,
                                      const QuartetBackwardOptions& options, Mxfp4Planes rowwise,
                                      Mxfp4Planes colwise, cudaStream_t stream) {
  constexpr const char* fn = "quartet_backward_quantize";
  fp4::check_shape(fn, rows, cols);
  fp4::check_not_null(fn, "x", x);
  fp4::check_aligned(fn, "x", x);
  fp4::check_rowcol_planes(fn, rowwise, colwise);
  const bool tile = colwise.codes != nullptr;
  if (options.rotate) fp4::check_hadamard_size(fn, options.hadamard_size, tile ? 32 : 128);
  const int n = options.rotate && options.hadamard_size > 32 ? options.hadamard_size : 32;
  fp4::check_multiple(fn, "cols", cols, n, "groups and rotation blocks run along cols");
  if (tile) {
    fp4::check_multiple(fn, "rows", rows, kGroupRows, "the column-wise copy quantizes 32-row groups");
    if (type == Fp4DenseType::bf16) {
      const auto* p = static_cast<const uint16_t*>(x);
      dispatch_tile(rowcol::DenseLoader<uint16_t>{p, cols}, rows, cols, options, rowwise, colwise, stream);
    } else {
      const auto* p = static_cast<const float*>(x);
      dispatch_tile(rowcol::DenseLoader<float>{p, cols}, rows, cols, options, rowwise, colwise, stream);
    }
    return rowwise.codes != nullptr
               ? "cuda quartet_backward signed-hadamard+absmax, row-wise and column-wise copies from one 64x128 "
                 "smem tile (sector-wide stores)"
               : "cuda quartet_backward signed-hadamard+absmax, column-wise copy from a 64x128 smem tile "
                 "(sector-wide stores)";
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
  fp4::check_grid_scales(fn, "q", q);
  fp4::check_not_null(fn, "colwise.codes", colwise.codes);
  fp4::check_planes(fn, "colwise", colwise);
  if (options.rotate) fp4::check_hadamard_size(fn, options.hadamard_size, 32);
  fp4::check_multiple(fn, "cols", cols, 32, "the MXFP4 input has 1x32 groups along cols");
  fp4::check_multiple(fn, "rows", rows, kGroupRows, "the column-wise copy quantizes 32-row groups");
  dispatch_tile(rowcol::Mxfp4Loader{q.codes, q.scales, cols}, rows, cols, options, Mxfp4Planes{}, colwise, stream);
  return "cuda quartet_backward from mxfp4 (decode, transpose, signed-hadamard+absmax) via 64x128 smem tile "
         "(sector-wide stores)";
}

}  // namespace nibble::cuda
