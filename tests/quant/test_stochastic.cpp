// Stochastic rounding: unbiased within a statistical bound, reproducible for a seed, and the same
// whether a tensor is quantized whole or row by row with the right element-index offsets.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "nibble/quant.hpp"
#include "test_seed.hpp"

using namespace nibble::quant;
namespace fmt = nibble::fmt;

namespace {
// E2M1 grid gap around |v| (v in units of the block scale).
double e2m1_gap(double v) {
  const double a = std::fabs(v);
  return a < 2 ? 0.5 : (a < 4 ? 1.0 : 2.0);
}
}  // namespace

TEST(Stochastic, UnbiasedWithinStatisticalBound) {
  const int64_t cols = 64;
  const uint64_t seed = testdata::fresh_seed();
  const std::vector<float> x = testdata::gaussian(1, cols, seed, 0.0f);
  const int trials = 4000;
  std::vector<double> mx_sum(cols, 0.0), qb_sum(cols, 0.0);
  for (int t = 0; t < trials; ++t) {
    const SrKey key{true, seed + t, kStreamMx};
    const QuantizedTensor mx = quantize_mx(x.data(), 1, cols, ElementFormat::e2m1, MxScaleRule::te, key);
    const QuantizedTensor qb = quantize_quartet_backward(x.data(), 1, cols, 0, 32, false, SrKey{true, seed + t, kStreamQuartetBackward});
    for (int64_t c = 0; c < cols; ++c) {
      mx_sum[c] += mx.value_at(0, c);
      qb_sum[c] += qb.value_at(0, c) / 0.75;
    }
  }
  const QuantizedTensor ref = quantize_mx(x.data(), 1, cols, ElementFormat::e2m1, MxScaleRule::te);
  for (int64_t c = 0; c < cols; ++c) {
    const double s = ref.block_scale_at(0, c);
    // Var of one rounding <= gap^2 / 4: 6 standard errors of the mean.
    const double bound = 6 * e2m1_gap(x[c] / s) * s / 2 / std::sqrt(double(trials));
    EXPECT_NEAR(mx_sum[c] / trials, x[c], bound) << "mxfp4 sr, element " << c << " seed " << seed;
    EXPECT_NEAR(qb_sum[c] / trials, x[c], 2 * bound) << "quartet backward sr, element " << c << " seed " << seed;
  }
}

TEST(Stochastic, ReproducibleForASeedAndDifferentAcrossSeeds) {
  const int64_t rows = 16, cols = 128;
  const std::vector<float> x = testdata::gaussian(rows, cols, testdata::fresh_seed());
  QuantOptions o{.role = Role::dy, .seed = 42};
  for (Recipe r : {Recipe::nvfp4, Recipe::quartet}) {
    const QuantizedTensor a = quantize(r, x.data(), rows, cols, o);
    const QuantizedTensor b = quantize(r, x.data(), rows, cols, o);
    EXPECT_EQ(a.codes, b.codes) << recipe_name(r);
    QuantOptions o2 = o;
    o2.seed = 43;
    o2.rounding = Rounding::stochastic;
    o.rounding = Rounding::stochastic;
    EXPECT_NE(quantize(r, x.data(), rows, cols, o).codes, quantize(r, x.data(), rows, cols, o2).codes) << recipe_name(r);
  }
  const QuantizedTensor n = quantize(Recipe::nvfp4, x.data(), rows, cols, QuantOptions{.role = Role::dy});
  EXPECT_TRUE(n.stochastic);
  EXPECT_EQ(n.stream, kStreamNvfp4);
}

TEST(Stochastic, IndependentOfHowTheTensorIsSplit) {
  const int64_t rows = 8, cols = 96;
  const std::vector<float> x = testdata::gaussian(rows, cols, testdata::fresh_seed());
  const SrKey key{true, 7, kStreamMx};
  const QuantizedTensor whole = quantize_mx(x.data(), rows, cols, ElementFormat::e2m1, MxScaleRule::ocp, key);
  const QuantizedTensor whole_qb = quantize_quartet_backward(x.data(), rows, cols, 0, 32, false, key);
  // Row by row, and each row's groups in reverse order, through the shared group functions.
  uint8_t codes[32];
  for (int64_t r = rows - 1; r >= 0; --r) {
    for (int64_t b = cols / 32 - 1; b >= 0; --b) {
      const uint64_t first = static_cast<uint64_t>(r * cols + b * 32);
      EXPECT_EQ(quantize_mx_group(x.data() + first, 32, ElementFormat::e2m1, MxScaleRule::ocp, key, first, codes),
                whole.scale_codes[static_cast<size_t>(r * (cols / 32) + b)]);
      for (int i = 0; i < 32; ++i) EXPECT_EQ(codes[i], whole.code_at(r, b * 32 + i));
      quartet_backward_group(x.data() + first, 32, key, first, codes);
      for (int i = 0; i < 32; ++i) EXPECT_EQ(codes[i], whole_qb.code_at(r, b * 32 + i));
    }
  }
  // A row quantized alone as a 1 x cols tensor uses indices from 0: different bits, as documented.
  const QuantizedTensor row3 = quantize_mx(x.data() + 3 * cols, 1, cols, ElementFormat::e2m1, MxScaleRule::ocp, key);
  int differ = 0;
  for (int64_t c = 0; c < cols; ++c) differ += row3.code_at(0, c) != whole.code_at(3, c);
  EXPECT_GT(differ, 0);
}
