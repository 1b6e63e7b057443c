// Error metrics: a hand-built tensor with known answers, then properties on fresh random data for
// every recipe and role (metrics agree with an independent recomputation; clipping means what the
// header says: never with current scaling or the MX round-up rule, exactly the mask for quartet).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "nibble/format/minifloat.hpp"
#include "nibble/quant.hpp"
#include "nibble/quant/error_metrics.hpp"
#include "test_seed.hpp"

using namespace nibble::quant;

TEST(ErrorMetrics, SaturationThresholds) {
  EXPECT_EQ(saturation_threshold(ElementFormat::e4m3), 464.0);
  EXPECT_EQ(saturation_threshold(ElementFormat::e5m2), 61440.0);
  EXPECT_EQ(saturation_threshold(ElementFormat::e2m1), 7.0);
  EXPECT_TRUE(std::isinf(saturation_threshold(ElementFormat::bf16)));
}

TEST(ErrorMetrics, HandBuiltE4M3) {
  // One per-tensor block with decode scale 1: 500 saturates to 448 (clipped), 460 rounds to 448
  // by plain nearest rounding (not clipped), 1e-5 flushes to zero, 1 and 3 are exact.
  const std::vector<float> x = {1.0f, 500.0f, 1e-5f, 3.0f, 460.0f};
  QuantizedTensor q = make_quantized_tensor(1, 5, ElementFormat::e4m3, 1, 5, ScaleFormat::fp32, false);
  for (int c = 0; c < 5; ++c) q.set_code(0, c, nibble::fmt::encode_e4m3(x[c]));
  q.produced_by = "hand-built";
  const ErrorMetrics m = measure_quantization_error(x.data(), q);
  const double e2 = 52.0 * 52.0 + 1e-5 * 1e-5 + 12.0 * 12.0;
  double s2 = 0;
  for (float v : x) s2 += static_cast<double>(v) * v;
  EXPECT_NEAR(m.rel_mse, e2 / s2, 1e-15);
  EXPECT_NEAR(m.snr_db, -10.0 * std::log10(e2 / s2), 1e-12);
  EXPECT_EQ(m.max_abs_err, 52.0);
  EXPECT_EQ(m.clipped_frac, 1.0 / 5);
  EXPECT_EQ(m.zero_frac, 1.0 / 5);
  EXPECT_EQ(m.elements, 5);
  EXPECT_EQ(m.nonfinite, 0);
  EXPECT_EQ(m.produced_by, "hand-built");

  // A scale of 2 halves the scaled magnitudes: 500 / 2 = 250 no longer saturates.
  q.scales_fp32[0] = 2.0f;
  for (int c = 0; c < 5; ++c) q.set_code(0, c, nibble::fmt::encode_e4m3(x[c] / 2));
  EXPECT_EQ(measure_quantization_error(x.data(), q).clipped_frac, 0.0);
}

TEST(ErrorMetrics, ExactAndAllZero) {
  auto x = nibble::testing::fresh_normal_floats(4 * 64);
  for (float& v : x) v = nibble::fmt::round_bf16(v);  // bf16 then represents x exactly
  const ErrorMetrics exact = quantization_error(Recipe::bf16, x.data(), 4, 64);
  EXPECT_EQ(exact.rel_mse, 0.0);
  EXPECT_TRUE(std::isinf(exact.snr_db) && exact.snr_db > 0);
  EXPECT_EQ(exact.max_abs_err, 0.0);
  EXPECT_EQ(exact.clipped_frac, 0.0);
  EXPECT_EQ(exact.zero_frac, 0.0);

  const std::vector<float> zeros(2 * 128, 0.0f);
  for (Recipe r : {Recipe::fp8_current, Recipe::mxfp4, Recipe::nvfp4, Recipe::quartet}) {
    const ErrorMetrics m = quantization_error(r, zeros.data(), 2, 128);
    EXPECT_EQ(m.rel_mse, 0.0) << recipe_name(r);
    EXPECT_TRUE(std::isinf(m.snr_db)) << recipe_name(r);
    EXPECT_EQ(m.zero_frac, 0.0) << recipe_name(r);  // nothing non-zero to flush
  }
}

TEST(ErrorMetrics, EveryRecipeAndRoleMatchesIndependentRecomputation) {
  const int64_t rows = 128, cols = 256;
  const auto x = nibble::testing::fresh_normal_floats(static_cast<size_t>(rows * cols), 0.02f);
  for (Recipe r : kAllRecipes) {
    for (Role role : {Role::x, Role::w, Role::dy}) {
      QuantOptions o;
      o.role = role;
      o.seed = nibble::testing::fresh_seed();
      const ErrorMetrics m = quantization_error(r, x.data(), rows, cols, o);
      const std::vector<float> xq = quantize_dequantize(r, x.data(), rows, cols, o);
      double e2 = 0, s2 = 0, mx = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        const double e = static_cast<double>(x[i]) - xq[i];
        e2 += e * e;
        s2 += static_cast<double>(x[i]) * x[i];
        mx = std::max(mx, std::fabs(e));
      }
      const std::string what = std::string(recipe_name(r)) + " role " + role_name(role);
      EXPECT_NEAR(m.rel_mse, e2 / s2, 1e-12 * (e2 / s2) + 1e-300) << what;
      EXPECT_EQ(m.max_abs_err, mx) << what;
      EXPECT_GT(m.rel_mse, 0.0) << what;  // no recipe is exact on random floats
      EXPECT_LT(m.rel_mse, 0.05) << what;
      EXPECT_GE(m.clipped_frac, 0.0) << what;
      EXPECT_LE(m.clipped_frac, 1.0) << what;
      EXPECT_GE(m.zero_frac, 0.0) << what;
      EXPECT_LE(m.zero_frac, 1.0) << what;
      EXPECT_FALSE(m.produced_by.empty()) << what;
      if (r == Recipe::fp8_current || r == Recipe::fp8_delayed || r == Recipe::bf16 || r == Recipe::fp8_block) {
        // amax-derived scales put the largest magnitude at (or, for power-of-two block scales,
        // below) fmax: nothing saturates.
        EXPECT_EQ(m.clipped_frac, 0.0) << what;
      }
    }
  }
}

TEST(ErrorMetrics, MxRoundUpNeverClipsOcpSometimesDoes) {
  // Gaussian 32-blocks: under the OCP rule amax / 2^k lands in [4, 8), and anything >= 7 saturates.
  const int64_t rows = 256, cols = 512;
  const auto x = nibble::testing::fresh_normal_floats(static_cast<size_t>(rows * cols));
  QuantOptions ocp, up;
  up.mx_scale_rule = MxScaleRule::te;
  EXPECT_GT(quantization_error(Recipe::mxfp4, x.data(), rows, cols, ocp).clipped_frac, 0.0);
  EXPECT_EQ(quantization_error(Recipe::mxfp4, x.data(), rows, cols, up).clipped_frac, 0.0);
  EXPECT_EQ(quantization_error(Recipe::mxfp8, x.data(), rows, cols, up).clipped_frac, 0.0);
}

TEST(ErrorMetrics, QuartetClippedIsTheUntrustedFraction) {
  const int64_t rows = 64, cols = 256;
  const auto x = nibble::testing::fresh_normal_floats(static_cast<size_t>(rows * cols), 3.0f);
  const QuantizedTensor q = quantize(Recipe::quartet, x.data(), rows, cols);
  ASSERT_TRUE(q.has_mask());
  const auto mask = unpack_mask(q);
  size_t untrusted = 0;
  for (uint8_t b : mask) untrusted += b == 0;
  const ErrorMetrics m = measure_quantization_error(x.data(), q);
  EXPECT_EQ(m.clipped_frac, static_cast<double>(untrusted) / static_cast<double>(mask.size()));
  EXPECT_GT(m.clipped_frac, 0.0);  // QuEST clips about 1 in 40 Gaussian elements at 2.92 sigma
}

TEST(ErrorMetrics, NonFiniteInputs) {
  const int64_t rows = 2, cols = 128;
  auto x = nibble::testing::fresh_normal_floats(static_cast<size_t>(rows * cols));
  x[5] = std::numeric_limits<float>::quiet_NaN();
  // fp8-block: a NaN block gets scale 1 and its other elements still encode: finite metrics.
  const ErrorMetrics block = quantization_error(Recipe::fp8_block, x.data(), rows, cols);
  EXPECT_EQ(block.nonfinite, 1);
  EXPECT_EQ(block.poisoned, 0);
  EXPECT_TRUE(std::isfinite(block.rel_mse));
  // mxfp8: the NaN poisons its block's E8M0 scale, so 31 finite neighbours come back NaN: infinite error.
  const ErrorMetrics mx = quantization_error(Recipe::mxfp8, x.data(), rows, cols);
  EXPECT_EQ(mx.nonfinite, 1);
  EXPECT_EQ(mx.poisoned, 31);
  EXPECT_EQ(nonfinite_note(mx), "1 non-finite inputs left out; 31 finite inputs came back non-finite: a NaN or inf "
                                "shared their block's scale");
  EXPECT_EQ(nonfinite_note(block), "1 non-finite inputs left out");
  EXPECT_TRUE(std::isinf(mx.rel_mse));
  EXPECT_TRUE(std::isinf(mx.max_abs_err));
}

TEST(ErrorMetrics, ShapeTheBlocksDoNotDivideThrows) {
  const auto x = nibble::testing::fresh_normal_floats(30);
  EXPECT_THROW(quantization_error(Recipe::mxfp4, x.data(), 1, 30), std::invalid_argument);
  const auto w = nibble::testing::fresh_normal_floats(8 * 32);
  QuantOptions o;
  o.role = Role::w;
  EXPECT_THROW(quantization_error(Recipe::nvfp4, w.data(), 8, 32, o), std::invalid_argument);
}
