// fp8-block kernels (1x128 and 128x128, row-wise and column-wise copies, cuBLASLt and grid scale
// layouts) bit-exact against a host reference built from nibble::quant's shared functions.
#include <gtest/gtest.h>

#include "gpu_test_support.hpp"
#include "nibble/kernels/quantize_fp8.hpp"
#include "nibble/kernels/scale_layout.hpp"
#include "nibble/quant/scale_rules.hpp"
#include "test_quantize_fp8_support.hpp"

namespace {

using nibble::quant::ElementFormat;
using nibble::quant::SrKey;
using namespace nibble::testing;
namespace nc = nibble::cuda;
namespace nq = nibble::quant;
namespace sl = nibble::cuda::scale_layout;

struct Shape {
  int64_t rows, cols;
};
// 4240 rows: 34 tile rows, i.e. one full group of 32 tile rows and a short one (tile_coord).
const Shape kShapes[] = {{256, 384}, {272, 144}, {16, 48}, {400, 656}, {4240, 144}};

// Reference for one orientation: y is the operand [n_rows, k] (x itself, or its transpose), blocks of
// block_rows x 128 along k. Scales go to index `scale_at(row, kk)`.
struct Operand {
  std::vector<uint8_t> codes;
  std::vector<float> scales;
};
template <typename ScaleAt>
Operand reference_operand(const std::vector<float>& y, int64_t n_rows, int64_t k, int64_t block_rows,
                          size_t scale_count, ScaleAt scale_at, const SrKey& key) {
  Operand o{std::vector<uint8_t>(y.size()), std::vector<float>(scale_count, 0.0f)};
  for (int64_t rb = 0; rb < n_rows; rb += block_rows) {
    for (int64_t kb = 0; kb < k; kb += 128) {
      uint32_t m = 0;
      for (int64_t r = rb; r < std::min(n_rows, rb + block_rows); ++r)
        for (int64_t c = kb; c < std::min(k, kb + 128); ++c) m = nq::amax_combine_bits(m, nq::abs_bits(y[r * k + c]));
      const int e = nq::fp8_block_scale_exponent(nq::amax_from_bits(m), nibble::fmt::kE4M3Max);
      for (int64_t r = rb; r < std::min(n_rows, rb + block_rows); ++r) {
        o.scales[scale_at(r, kb)] = nibble::fmt::pow2f(-e);
        for (int64_t c = kb; c < std::min(k, kb + 128); ++c) {
          o.codes[r * k + c] = nq::encode_scaled(ElementFormat::e4m3, y[r * k + c], nibble::fmt::pow2f(e), key,
                                                 static_cast<uint64_t>(r * k + c));
        }
      }
    }
  }
  return o;
}

void run_case(std::mt19937_64& rng, Shape sh, bool weights, nc::BlockScaleLayout layout, bool sr) {
  const int64_t rows = sh.rows, cols = sh.cols;
  const auto x = make_bf16_tensor(rng, rows, cols, true);
  std::vector<float> xf(x.size()), xt(x.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) xt[c * rows + r] = xf[r * cols + c] = bf16f(x[r * cols + c]);
  const SrKey key{sr, rng(), nq::kStreamFp8};
  const bool lt = layout == nc::BlockScaleLayout::cublaslt;
  const int64_t br = weights ? 128 : 1;
  const int64_t rblk = (cols + 127) / 128, cblk = (rows + 127) / 128;
  size_t nrow_sc, ncol_sc;
  Operand want_row, want_col;
  if (weights) {
    nrow_sc = lt ? sl::blk128_count(rows, cols) : cblk * rblk;
    ncol_sc = lt ? sl::blk128_count(cols, rows) : rblk * cblk;
    want_row = reference_operand(xf, rows, cols, br, nrow_sc,
                                 [&](int64_t r, int64_t kk) { return lt ? sl::blk128_index(cols, r, kk) : (r / 128) * rblk + kk / 128; }, key);
    want_col = reference_operand(xt, cols, rows, br, ncol_sc,
                                 [&](int64_t r, int64_t kk) { return lt ? sl::blk128_index(rows, r, kk) : (r / 128) * cblk + kk / 128; }, key);
  } else {
    nrow_sc = lt ? sl::vec128_count(rows, cols) : rows * rblk;
    ncol_sc = lt ? sl::vec128_count(cols, rows) : cols * cblk;
    want_row = reference_operand(xf, rows, cols, br, nrow_sc,
                                 [&](int64_t r, int64_t kk) { return lt ? sl::vec128_index(rows, r, kk) : r * rblk + kk / 128; }, key);
    want_col = reference_operand(xt, cols, rows, br, ncol_sc,
                                 [&](int64_t r, int64_t kk) { return lt ? sl::vec128_index(cols, r, kk) : r * cblk + kk / 128; }, key);
  }
  DeviceBuffer<uint16_t> dx(x.size());
  dx.upload(x);
  DeviceBuffer<uint8_t> row(x.size()), col(x.size());
  DeviceBuffer<float> srow(nrow_sc), scol(ncol_sc);
  for (uint8_t p : kPoisons) {
    row.poison(p);
    col.poison(p);
    // Padding entries of the cuBLASLt layouts are never written: start them at 0 like the reference.
    NIBBLE_CUDA_CHECK(cudaMemset(srow.ptr, 0, nrow_sc * sizeof(float)));
    NIBBLE_CUDA_CHECK(cudaMemset(scol.ptr, 0, ncol_sc * sizeof(float)));
    if (!lt) {
      srow.poison(p);
      scol.poison(p);
    }
    if (weights) {
      nc::quantize_fp8_block_128x128(dx.ptr, rows, cols, {row.ptr, col.ptr}, srow.ptr, scol.ptr, layout, key, nullptr);
    } else {
      nc::quantize_fp8_block_1x128(dx.ptr, rows, cols, {row.ptr, col.ptr}, srow.ptr, scol.ptr, layout, key, nullptr);
    }
    SCOPED_TRACE(::testing::Message() << rows << "x" << cols << (weights ? " 128x128" : " 1x128")
                                      << (lt ? " cublaslt" : " grid") << (sr ? " stochastic" : " nearest") << " poison "
                                      << int(p));
    auto in_row = [&](size_t i) { return describe_bf16(x[i]); };
    auto in_col = [&](size_t i) {
      return describe_bf16(x[(static_cast<int64_t>(i) % rows) * cols + static_cast<int64_t>(i) / rows]);
    };
    EXPECT_TRUE(same_bits("rowwise codes", row.download(), want_row.codes, in_row));
    EXPECT_TRUE(same_bits("colwise codes", col.download(), want_col.codes, in_col));
    EXPECT_TRUE(same_bits("rowwise scales", srow.download(), want_row.scales, [](size_t i) { return "scale #" + std::to_string(i); }));
    EXPECT_TRUE(same_bits("colwise scales", scol.download(), want_col.scales, [](size_t i) { return "scale #" + std::to_string(i); }));
  }
}

TEST(QuantizeFp8Block, Activations1x128) {
  NIBBLE_REQUIRE_GPU();
  auto rng = fresh_rng();
  for (Shape sh : kShapes)
    for (auto layout : {nc::BlockScaleLayout::cublaslt, nc::BlockScaleLayout::grid})
      for (bool sr : {false, true}) run_case(rng, sh, false, layout, sr);
}

TEST(QuantizeFp8Block, Weights128x128) {
  NIBBLE_REQUIRE_GPU();
  auto rng = fresh_rng();
  for (Shape sh : kShapes)
    for (auto layout : {nc::BlockScaleLayout::cublaslt, nc::BlockScaleLayout::grid})
      for (bool sr : {false, true}) run_case(rng, sh, true, layout, sr);
}

TEST(QuantizeFp8Block, BadShapesThrowBeforeLaunch) {
  NIBBLE_REQUIRE_GPU();
  DeviceBuffer<uint16_t> x(64 * 64);
  DeviceBuffer<float> s(64);
  DeviceBuffer<uint8_t> o(64 * 64);
  EXPECT_THROW(nc::quantize_fp8_block_1x128(x.ptr, 24, 64, {o.ptr, o.ptr}, s.ptr, s.ptr, nc::BlockScaleLayout::grid, {}, nullptr),
               std::invalid_argument);
  EXPECT_THROW(nc::quantize_fp8_block_128x128(x.ptr, 64, 64, {o.ptr, o.ptr}, nullptr, s.ptr, nc::BlockScaleLayout::grid, {}, nullptr),
               std::invalid_argument);
}

}  // namespace
