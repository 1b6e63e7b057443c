// MXFP4 quantizer (1x32, E8M0 scales, OCP or TE rule, optional stochastic rounding) and the
// exact MXFP4 -> BF16 decode of the emulated GEMM. One thread per 32-group: four 16-byte loads in
// flight, fp4::mx_group_packed in registers (quant::quantize_mx_group's expressions with the one-add
// E2M1 encoder and one Philox block per 4 elements: e2m1_element_math.cuh), one 16-byte
// store of packed codes. The row + column variant runs the same group math in the 64x128 tile of
// fp4_rowcol_tile.cuh.
#include <stdexcept>
#include <string>
#include <utility>

#include "fp4/fp4_kernel_io.cuh"
#include "fp4/fp4_rowcol_tile.cuh"
#include "fp4/quartet_fused_group_math.cuh"
#include "nibble/kernels/quantize_fp4.hpp"
#include "nibble/format/e8m0.hpp"
#include "nibble/quant/element_codecs.hpp"

namespace nibble::cuda {
namespace {

constexpr int kThreads = 256;

template <bool kStochastic, class In>
__global__ void __launch_bounds__(kThreads)
    quantize_mxfp4_kernel(const In* __restrict__ x, int64_t groups, quant::MxScaleRule rule, fp4::SrDraw key,
                          uint8_t* __restrict__ codes, uint8_t* __restrict__ scales) {
  const int64_t gi = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (gi >= groups) return;
  float v[32];
  fp4::load_dense<32>(x + gi * 32, v);
  uint4 packed;
  const uint8_t s =
      fp4::mx_group_encode<kStochastic, sizeof(In) == 2>(v, rule, key, static_cast<uint64_t>(gi) * 32, packed);
  reinterpret_cast<uint4*>(codes)[gi] = packed;
  scales[gi] = s;
}

template <class In>
void launch_quantize(const In* x, int64_t groups, quant::MxScaleRule rule, const quant::SrKey& sr, Mxfp4Planes out,
                     cudaStream_t stream) {
  const unsigned grid = fp4::blocks_for(groups, kThreads);
  if (sr.enabled) {
    quantize_mxfp4_kernel<true, In><<<grid, kThreads, 0, stream>>>(x, groups, rule, sr, out.codes, out.scales);
  } else {
    quantize_mxfp4_kernel<false, In><<<grid, kThreads, 0, stream>>>(x, groups, rule, sr, out.codes, out.scales);
  }
}

// The MX rule as a rowcol::kernel group policy; kBf16 when the tile holds BF16 input (nearest rounding
// then takes the BF16-pair encoder).
template <bool kStochastic_, bool kBf16>
struct MxGroups {
  static constexpr bool kStochastic = kStochastic_;
  // rowcol::launch: with the BF16-pair encoder 5 CTAs run 2-3% faster than 4 on the H200 (with the FP32
  // encoder 5 is 0.5-2% slower). FP32 input stays at 4 (Loader::kFitsFiveCtas).
  static constexpr int kNearestCtas = kBf16 ? 5 : 4;
  static_assert(kNearestCtas == 4 || kNearestCtas == 5, "rowcol::launch instantiates 4 and 5 CTAs per SM");
  quant::MxScaleRule rule;
  fp4::SrDraw key;
  __device__ __forceinline__ void apply(float* v, uint64_t index0, uint8_t* __restrict__ codes,
                                        uint8_t* __restrict__ scales) const {
    uint4 packed;
    const uint8_t s = fp4::mx_group_encode<kStochastic_, kBf16>(v, rule, key, index0, packed);
    reinterpret_cast<uint4*>(codes)[index0 / 32] = packed;
    scales[index0 / 32] = s;
  }
  // The same on 16 BF16 pairs (the BF16 tile: nearest rounding of BF16 input only); returns the scale
  // code, which the tile stores in its scale layout.
  __device__ __forceinline__ uint8_t apply_pairs(const uint32_t* w, uint64_t index0, uint8_t* __restrict__ codes) const {
    static_assert(!kStochastic_ && kBf16, "BF16 pairs: nearest rounding of BF16 input");
    uint4 packed;
    const uint8_t s = fp4::mx_group_packed_bf16_pairs(w, rule, packed);
    reinterpret_cast<uint4*>(codes)[index0 / 32] = packed;
    return s;
  }
};

// The row + column quantizer's tile: BF16 input with nearest rounding takes the BF16 tile (about 10% fewer
// instructions, which pays where the kernel is issue-bound, as on the H200; on an H100 within -1.0% to
// +1.2% of the float tile); stochastic rounding and FP32 input take the float tile.
void launch_rowcol_bf16(const uint16_t* x, int64_t rows, int64_t cols, quant::MxScaleRule rule, const quant::SrKey& sr,
                        Mxfp4Planes rowwise, Mxfp4Planes colwise, bool tiled, cudaStream_t stream) {
  if (sr.enabled) {
    rowcol::launch(rowcol::DenseLoader<uint16_t>{x, cols}, rows, cols, MxGroups<true, true>{rule, sr}, rowwise, colwise,
                   stream);
  } else {
    rowcol::launch(rowcol::Bf16TileLoader{{x, cols}}, rows, cols, MxGroups<false, true>{rule, sr}, rowwise, colwise,
                   stream, tiled);
  }
}

void launch_rowcol_f32(const float* x, int64_t rows, int64_t cols, quant::MxScaleRule rule, const quant::SrKey& sr,
                       Mxfp4Planes rowwise, Mxfp4Planes colwise, cudaStream_t stream) {
  const rowcol::DenseLoader<float> load{x, cols};
  if (sr.enabled) {
    rowcol::launch(load, rows, cols, MxGroups<true, false>{rule, sr}, rowwise, colwise, stream);
  } else {
    rowcol::launch(load, rows, cols, MxGroups<false, false>{rule, sr}, rowwise, colwise, stream);
  }
}

__global__ void __launch_bounds__(kThreads)
    decode_mxfp4_bf16_kernel(const uint8_t* __restrict__ codes, const uint8_t* __restrict__ scales, int64_t groups,
                             uint16_t* __restrict__ out) {
  const int64_t gi = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (gi >= groups) return;
  const uint4 packed = __ldg(reinterpret_cast<const uint4*>(codes) + gi);
  const float s = fmt::decode_e8m0(__ldg(scales + gi));
  // A NaN scale decodes the block as the canonical quiet NaN, as the CPU reference's 0 * NaN does
  // (the GPU's multiply would produce a different NaN payload).
  const bool nan_block = s != s;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    uint32_t w[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int e = 8 * i + 2 * j;
      w[j] = static_cast<uint32_t>(fmt::encode_bf16(fmt::decode_e2m1(fp4::unpack_e2m1(packed, e)) * s)) |
             (static_cast<uint32_t>(fmt::encode_bf16(fmt::decode_e2m1(fp4::unpack_e2m1(packed, e + 1)) * s)) << 16);
    }
    if (nan_block) w[0] = w[1] = w[2] = w[3] = 0x7fc07fc0u;
    reinterpret_cast<uint4*>(out + gi * 32)[i] = make_uint4(w[0], w[1], w[2], w[3]);
  }
}

}  // namespace

const char* quantize_mxfp4(const void* x, Fp4DenseType type, int64_t rows, int64_t cols, quant::MxScaleRule rule,
                           const quant::SrKey& sr, Mxfp4Planes out, cudaStream_t stream) {
  constexpr const char* fn = "quantize_mxfp4";
  fp4::check_shape(fn, rows, cols);
  fp4::check_multiple(fn, "cols", cols, 32, "MXFP4 blocks are 1x32 along cols");
  fp4::check_not_null(fn, "x", x);
  fp4::check_not_null(fn, "out.codes", out.codes);
  fp4::check_not_null(fn, "out.scales", out.scales);
  fp4::check_aligned(fn, "x", x);
  fp4::check_aligned(fn, "out.codes", out.codes);
  fp4::check_grid_scales(fn, "out", out);
  const int64_t groups = rows * cols / 32;
  if (type == Fp4DenseType::bf16) {
    launch_quantize(static_cast<const uint16_t*>(x), groups, rule, sr, out, stream);
  } else {
    launch_quantize(static_cast<const float*>(x), groups, rule, sr, out, stream);
  }
  NIBBLE_CHECK_LAUNCH();
  return rule == quant::MxScaleRule::ocp ? "cuda quantize_mxfp4 ocp scale, thread per 1x32 group"
                                         : "cuda quantize_mxfp4 te scale, thread per 1x32 group";
}

namespace {
// Whether a row + column call writes tiled scales: the copies asked for agree on the layout, and tiled
// scales need the BF16 tile (BF16 input, nearest rounding).
bool check_tiled_request(const char* fn, const Mxfp4Planes& rowwise, const Mxfp4Planes& colwise, bool bf16_tile) {
  const bool row_tiled = rowwise.codes != nullptr && rowwise.scale_layout == MxScaleLayout::tiled128x4;
  const bool col_tiled = colwise.codes != nullptr && colwise.scale_layout == MxScaleLayout::tiled128x4;
  const bool both = rowwise.codes != nullptr && colwise.codes != nullptr;
  if (both && row_tiled != col_tiled) {
    throw std::invalid_argument(std::string(fn) + ": rowwise.scale_layout and colwise.scale_layout differ (one "
                                "tiled128x4, one grid); pass the same layout for both copies");
  }
  const bool tiled = row_tiled || col_tiled;
  if (tiled && !bf16_tile) {
    throw std::invalid_argument(std::string(fn) + ": tiled128x4 scales are written only from BF16 input with nearest "
                                "rounding (the BF16 tile); pass grid planes");
  }
  return tiled;
}
}  // namespace

const char* quantize_mxfp4_rowcol(const void* x, Fp4DenseType type, int64_t rows, int64_t cols,
                                  quant::MxScaleRule rule, const quant::SrKey& sr, Mxfp4Planes rowwise,
                                  Mxfp4Planes colwise, cudaStream_t stream) {
  constexpr const char* fn = "quantize_mxfp4_rowcol";
  fp4::check_shape(fn, rows, cols);
  fp4::check_multiple(fn, "cols", cols, 32, "MXFP4 blocks are 1x32 along cols");
  fp4::check_multiple(fn, "rows", rows, 32, "the column-wise copy has 1x32 blocks along rows");
  fp4::check_not_null(fn, "x", x);
  fp4::check_aligned(fn, "x", x);
  fp4::check_rowcol_planes<true>(fn, rowwise, colwise);
  const bool tile16 = type == Fp4DenseType::bf16 && !sr.enabled;
  const bool tiled = check_tiled_request(fn, rowwise, colwise, tile16);
  if (tiled && rows % 128 != 0 && rows % 128 <= 64) {
    // The last 128-row scale tile's second half (and, column-wise, its scale columns 2-3) belongs to no
    // 64-row tile: zero it here (the kernel writes every other padding byte).
    if (rowwise.codes != nullptr) {
      NIBBLE_CUDA_CHECK(cudaMemsetAsync(rowwise.scales, 0, scale_layout::tiled_count(rows, cols, 32), stream));
    }
    if (colwise.codes != nullptr) {
      NIBBLE_CUDA_CHECK(cudaMemsetAsync(colwise.scales, 0, scale_layout::tiled_count(cols, rows, 32), stream));
    }
  }
  if (type == Fp4DenseType::bf16) {
    launch_rowcol_bf16(static_cast<const uint16_t*>(x), rows, cols, rule, sr, rowwise, colwise, tiled, stream);
  } else {
    launch_rowcol_f32(static_cast<const float*>(x), rows, cols, rule, sr, rowwise, colwise, stream);
  }
  NIBBLE_CHECK_LAUNCH();
  const bool both = rowwise.codes != nullptr && colwise.codes != nullptr;
  const bool ocp = rule == quant::MxScaleRule::ocp;
  // Every combination as a literal (the caller keeps the pointer): rule x copies x tile.
  static const char* const kPaths[2][3][2] = {
      {{"cuda quantize_mxfp4 te scale, row-wise copy from a 64x128 smem tile",
        "cuda quantize_mxfp4 te scale, row-wise copy from a 64x128 BF16 smem tile"},
       {"cuda quantize_mxfp4 te scale, column-wise copy from a 64x128 smem tile",
        "cuda quantize_mxfp4 te scale, column-wise copy from a 64x128 BF16 smem tile"},
       {"cuda quantize_mxfp4 te scale, row-wise and column-wise copies from one 64x128 smem tile",
        "cuda quantize_mxfp4 te scale, row-wise and column-wise copies from one 64x128 BF16 smem tile"}},
      {{"cuda quantize_mxfp4 ocp scale, row-wise copy from a 64x128 smem tile",
        "cuda quantize_mxfp4 ocp scale, row-wise copy from a 64x128 BF16 smem tile"},
       {"cuda quantize_mxfp4 ocp scale, column-wise copy from a 64x128 smem tile",
        "cuda quantize_mxfp4 ocp scale, column-wise copy from a 64x128 BF16 smem tile"},
       {"cuda quantize_mxfp4 ocp scale, row-wise and column-wise copies from one 64x128 smem tile",
        "cuda quantize_mxfp4 ocp scale, row-wise and column-wise copies from one 64x128 BF16 smem tile"}}};
  static const char* const kTiledPaths[2][3] = {
      {"cuda quantize_mxfp4 te scale, row-wise copy from a 64x128 BF16 smem tile, 128x4-tiled scales",
       "cuda quantize_mxfp4 te scale, column-wise copy from a 64x128 BF16 smem tile, 128x4-tiled scales",
       "cuda quantize_mxfp4 te scale, row-wise and column-wise copies from one 64x128 BF16 smem tile, 128x4-tiled "
       "scales"},
      {"cuda quantize_mxfp4 ocp scale, row-wise copy from a 64x128 BF16 smem tile, 128x4-tiled scales",
       "cuda quantize_mxfp4 ocp scale, column-wise copy from a 64x128 BF16 smem tile, 128x4-tiled scales",
       "cuda quantize_mxfp4 ocp scale, row-wise and column-wise copies from one 64x128 BF16 smem tile, 128x4-tiled "
       "scales"}};
  const int copies = both ? 2 : (colwise.codes != nullptr ? 1 : 0);
  return tiled ? kTiledPaths[ocp ? 1 : 0][copies] : kPaths[ocp ? 1 : 0][copies][tile16 ? 1 : 0];
}

const char* decode_mxfp4_bf16(Mxfp4ConstPlanes q, int64_t rows, int64_t cols, uint16_t* out, cudaStream_t stream) {
  constexpr const char* fn = "decode_mxfp4_bf16";
  fp4::check_shape(fn, rows, cols);
  fp4::check_multiple(fn, "cols", cols, 32, "MXFP4 blocks are 1x32 along cols");
  fp4::check_not_null(fn, "q.codes", q.codes);
  fp4::check_not_null(fn, "q.scales", q.scales);
  fp4::check_grid_scales(fn, "q", q);
  fp4::check_not_null(fn, "out", out);
  fp4::check_aligned(fn, "q.codes", q.codes);
  fp4::check_aligned(fn, "out", out);
  const int64_t groups = rows * cols / 32;
  decode_mxfp4_bf16_kernel<<<fp4::blocks_for(groups, kThreads), kThreads, 0, stream>>>(q.codes, q.scales, groups, out);
  NIBBLE_CHECK_LAUNCH();
  return "cuda decode_mxfp4_bf16 exact, thread per 1x32 group";
}

}  // namespace nibble::cuda
