// Zero, NaN, inf and subnormal inputs through every recipe, as docs/recipes.md documents.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "nibble/quant.hpp"
#include "test_seed.hpp"

using namespace nibble::quant;

namespace {
const Role kRoles[] = {Role::x, Role::w, Role::dy};
constexpr int64_t kRows = 128, kCols = 256;
}  // namespace

TEST(SpecialValues, AllZeroTensorDecodesToZero) {
  const std::vector<float> x(kRows * kCols, 0.0f);
  for (Recipe r : kAllRecipes) {
    for (Role role : kRoles) {
      for (float v : quantize_dequantize(r, x.data(), kRows, kCols, QuantOptions{.role = role})) {
        ASSERT_EQ(v, 0.0f) << recipe_name(r) << " " << role_name(role);
      }
    }
  }
}

TEST(SpecialValues, NanPoisonsOnlyWhatTheRecipeSays) {
  std::vector<float> x = testdata::gaussian(kRows, kCols, testdata::fresh_seed());
  const int64_t r0 = 5, c0 = 37;  // block (5, 1) of 1x32 groups; 1x128 block (5, 0)
  x[r0 * kCols + c0] = NAN;
  for (Recipe r : kAllRecipes) {
    for (Role role : kRoles) {
      const QuantizedTensor q = quantize(r, x.data(), kRows, kCols, QuantOptions{.role = role});
      const std::vector<float> d = dequantize(q);
      EXPECT_TRUE(std::isnan(d[r0 * kCols + c0])) << recipe_name(r) << " " << role_name(role);
      int64_t nans = 0;
      for (float v : d) nans += std::isnan(v);
      int64_t want = 1;  // per-tensor fp8, fp8-block, bf16: only the element itself
      if (r == Recipe::mxfp8 || r == Recipe::mxfp4 || r == Recipe::quartet) want = 32;  // its MX block
      if (r == Recipe::nvfp4) want = role == Role::w ? 256 : 16;                         // its nvfp4 block
      EXPECT_EQ(nans, want) << recipe_name(r) << " " << role_name(role);
    }
  }
}

TEST(SpecialValues, InfSaturatesOrPoisonsAsDocumented) {
  std::vector<float> x = testdata::gaussian(kRows, kCols, testdata::fresh_seed());
  const int64_t i = 9 * kCols + 200;
  x[i] = -INFINITY;
  auto deq = [&](Recipe r, Role role) { return dequantize(quantize(r, x.data(), kRows, kCols, QuantOptions{.role = role})); };
  // fp8 per-tensor: amax inf -> scale 1; the inf saturates to -fmax.
  EXPECT_EQ(deq(Recipe::fp8_current, Role::x)[i], -448.0f);
  EXPECT_EQ(deq(Recipe::fp8_current, Role::dy)[i], -57344.0f);
  EXPECT_EQ(deq(Recipe::fp8_block, Role::x)[i], -448.0f);
  // MX: the block scale becomes NaN.
  EXPECT_TRUE(std::isnan(deq(Recipe::mxfp8, Role::x)[i]));
  EXPECT_TRUE(std::isnan(deq(Recipe::mxfp4, Role::x)[i]));
  EXPECT_TRUE(std::isnan(deq(Recipe::quartet, Role::x)[i]));
  // nvfp4: global scale 1, block scale saturates to 448, the element to -6 * 448.
  EXPECT_EQ(deq(Recipe::nvfp4, Role::x)[i], -2688.0f);
  EXPECT_EQ(deq(Recipe::bf16, Role::x)[i], -INFINITY);
  // Elements of other blocks stay finite in every recipe.
  for (Recipe r : kAllRecipes) {
    const std::vector<float> d = deq(r, Role::x);
    EXPECT_TRUE(std::isfinite(d[0])) << recipe_name(r);
  }
}

TEST(SpecialValues, SubnormalInputsStayFiniteAndNeverGrow) {
  std::vector<float> x = testdata::gaussian(kRows, kCols, testdata::fresh_seed(), 0.0f);
  for (float& v : x) v *= 1e-39f;  // float32 subnormals
  for (Recipe r : kAllRecipes) {
    for (Role role : kRoles) {
      const std::vector<float> d = quantize_dequantize(r, x.data(), kRows, kCols, QuantOptions{.role = role});
      for (size_t i = 0; i < d.size(); ++i) {
        ASSERT_TRUE(std::isfinite(d[i])) << recipe_name(r);
        ASSERT_LE(std::fabs(d[i]), 8 * 1e-39f * 6) << recipe_name(r) << " " << role_name(role);
      }
    }
  }
  // Per-tensor fp8 rescales them into range (scale FLT_MAX), so they survive.
  const std::vector<float> d = quantize_dequantize(Recipe::fp8_current, x.data(), kRows, kCols);
  int64_t nonzero = 0;
  for (float v : d) nonzero += v != 0.0f;
  EXPECT_GT(nonzero, kRows * kCols / 2);
}
