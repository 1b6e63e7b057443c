// MXFP4 -> E4M3 re-encoding (exact when spread <= 14, counted when not), BF16 decode, and the
// reference GEMM against a naive loop.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "nibble/quant.hpp"
#include "test_seed.hpp"

using namespace nibble::quant;
namespace fmt = nibble::fmt;

namespace {
// An MXFP4 tensor with chosen block exponents and every code non-zero.
QuantizedTensor handmade_mxfp4(int64_t rows, int64_t cols, const std::vector<int>& block_exponents) {
  QuantizedTensor q = make_quantized_tensor(rows, cols, ElementFormat::e2m1, 1, 32, ScaleFormat::e8m0, false);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) q.set_code(r, c, static_cast<uint8_t>(1 + (r * 7 + c) % 15 % 7 + ((c & 1) << 3)));
  }
  for (size_t b = 0; b < q.scale_codes.size(); ++b) {
    q.scale_codes[b] = fmt::encode_e8m0_exponent(block_exponents[b % block_exponents.size()]);
  }
  return q;
}
}  // namespace

TEST(Reencode, ExactWhenSpreadAtMost14) {
  const int64_t rows = 32, cols = 512;
  const std::vector<float> x = testdata::gaussian(rows, cols, testdata::fresh_seed());
  for (Recipe r : {Recipe::mxfp4, Recipe::quartet}) {
    const QuantizedTensor q = quantize(r, x.data(), rows, cols);
    for (ReencodeSet set : {ReencodeSet::row, ReencodeSet::group_1x128}) {
      const E4M3Reencoding e = reencode_mxfp4_as_e4m3(q, set);
      EXPECT_EQ(e.violating_sets, 0);
      EXPECT_EQ(e.sets, set == ReencodeSet::row ? rows : rows * cols / 128);
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < cols; ++j) ASSERT_EQ(e.value_at(i, j), q.value_at(i, j)) << recipe_name(r);
      }
    }
  }
  // Spread exactly 14: the smallest E2M1 magnitude (0.5) lands on E4M3's smallest subnormal.
  const QuantizedTensor q14 = handmade_mxfp4(1, 64, {3, 3 - 14});
  const E4M3Reencoding e14 = reencode_mxfp4_as_e4m3(q14, ReencodeSet::row);
  EXPECT_TRUE(e14.exact());
  for (int64_t j = 0; j < 64; ++j) EXPECT_EQ(e14.value_at(0, j), q14.value_at(0, j));
}

TEST(Reencode, ViolationsAreCountedNeverHidden) {
  // Row set: blocks at 2^20 and 2^5 (spread 15) -> violated. 1x128 sets split them apart -> exact.
  const QuantizedTensor q = handmade_mxfp4(3, 256, {20, 20, 20, 20, 5, 5, 5, 5});
  EXPECT_EQ(count_reencode_violations(q, ReencodeSet::row), 3);
  EXPECT_EQ(count_reencode_violations(q, ReencodeSet::group_1x128), 0);
  const E4M3Reencoding e = reencode_mxfp4_as_e4m3(q, ReencodeSet::row);
  EXPECT_EQ(e.violating_sets, 3);
  int64_t lost = 0;
  for (int64_t j = 128; j < 256; ++j) lost += e.value_at(0, j) != q.value_at(0, j);
  EXPECT_GT(lost, 0) << "a violated set really loses values, which is why it must be counted";
  // All-zero blocks do not count toward the spread.
  QuantizedTensor z = handmade_mxfp4(1, 64, {20, -100});
  for (int64_t j = 32; j < 64; ++j) z.set_code(0, j, 0);
  EXPECT_EQ(count_reencode_violations(z, ReencodeSet::row), 0);
  // Wrong inputs
  const std::vector<float> x = testdata::gaussian(1, 96, testdata::fresh_seed());
  EXPECT_THROW(reencode_mxfp4_as_e4m3(quantize(Recipe::mxfp8, x.data(), 1, 96), ReencodeSet::row), std::invalid_argument);
  EXPECT_THROW(reencode_mxfp4_as_e4m3(quantize(Recipe::mxfp4, x.data(), 1, 96), ReencodeSet::group_1x128),
               std::invalid_argument);
}

TEST(DecodeBf16, ExactForMxfp8Nvfp4Mxfp4) {
  const int64_t rows = 32, cols = 256;
  const std::vector<float> x = testdata::with_outliers(rows, cols, testdata::fresh_seed());
  for (Recipe r : {Recipe::mxfp8, Recipe::nvfp4, Recipe::mxfp4, Recipe::fp8_current}) {
    for (Role role : {Role::x, Role::w}) {
      const QuantizedTensor q = quantize(r, x.data(), rows, cols, QuantOptions{.role = role});
      const std::vector<uint16_t> h = decode_to_bf16_unscaled(q);
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < cols; ++j) ASSERT_EQ(fmt::decode_bf16(h[i * cols + j]), q.unscaled_value_at(i, j));
      }
    }
  }
}

TEST(ReferenceGemm, MatchesNaiveLoopAndExactReencodedGemm) {
  const int64_t m = 24, n = 48, k = 256;
  const uint64_t seed = testdata::fresh_seed();
  const std::vector<float> a = testdata::gaussian(m, k, seed), b = testdata::gaussian(n, k, seed + 1);
  for (Recipe r : kAllRecipes) {
    const QuantizedTensor qa = quantize(r, a.data(), m, k, QuantOptions{.role = Role::x});
    const QuantizedTensor qb = quantize(r, b.data(), n, k, QuantOptions{.role = r == Recipe::fp8_block ? Role::x : Role::w});
    const std::vector<double> c = reference_gemm_f64(qa, qb);
    const std::vector<float> cf = reference_gemm(qa, qb);
    const std::vector<float> da = dequantize(qa), db = dequantize(qb);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double naive = 0, mag = 0;
        for (int64_t t = 0; t < k; ++t) {
          naive += double(da[i * k + t]) * db[j * k + t];
          mag += std::fabs(double(da[i * k + t]) * db[j * k + t]);
        }
        ASSERT_NEAR(c[i * n + j], naive, 1e-6 * mag + 1e-30) << recipe_name(r);
        ASSERT_EQ(cf[i * n + j], static_cast<float>(c[i * n + j]));
      }
    }
  }
  // MXFP4 through the exact E4M3 re-encoding gives the same GEMM (products exact, sum in double).
  const QuantizedTensor qa = quantize(Recipe::mxfp4, a.data(), m, k), qb = quantize(Recipe::mxfp4, b.data(), n, k);
  const E4M3Reencoding ea = reencode_mxfp4_as_e4m3(qa, ReencodeSet::row), eb = reencode_mxfp4_as_e4m3(qb, ReencodeSet::row);
  ASSERT_TRUE(ea.exact() && eb.exact());
  const std::vector<double> c = reference_gemm_f64(qa, qb);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t t = 0; t < k; ++t) s += double(ea.value_at(i, t)) * eb.value_at(j, t);
      ASSERT_EQ(s, c[i * n + j]);
    }
  }
  EXPECT_THROW(reference_gemm(qa, quantize(Recipe::mxfp4, b.data(), 2 * n, k / 2)), std::invalid_argument);
}
