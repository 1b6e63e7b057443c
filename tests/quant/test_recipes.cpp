// Every recipe through the one entry point: per-role formats and layouts, range, round-trip error,
// names and bad input; then zero, NaN, inf and subnormal inputs through every recipe.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "nibble/quant.hpp"
#include "nibble/quant/layer_shape_rule.hpp"
#include "test_seed.hpp"

using namespace nibble::quant;
namespace fmt = nibble::fmt;

namespace {
double rel_mse(const std::vector<float>& a, const std::vector<float>& b) {
  double e = 0, r = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    e += double(a[i] - b[i]) * (a[i] - b[i]);
    r += double(b[i]) * b[i];
  }
  return e / r;
}
}  // namespace

TEST(Recipes, NamesRoundTripAndUnknownNamesListValidOnes) {
  for (Recipe r : kAllRecipes) EXPECT_EQ(parse_recipe(recipe_name(r)), r);
  try {
    parse_recipe("fp4");
    FAIL() << "expected a throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("fp4"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find(recipe_name_list()), std::string::npos);
  }
  EXPECT_EQ(parse_role("dy"), Role::dy);
  EXPECT_THROW(parse_role("grad"), std::invalid_argument);
}

TEST(Recipes, PerRoleFormatsAndLayouts) {
  const int64_t rows = 128, cols = 256;
  const std::vector<float> x = testdata::gaussian(rows, cols, testdata::fresh_seed());
  auto q = [&](Recipe r, Role role) { return quantize(r, x.data(), rows, cols, QuantOptions{.role = role}); };
  EXPECT_EQ(q(Recipe::fp8_current, Role::x).element, ElementFormat::e4m3);
  EXPECT_EQ(q(Recipe::fp8_current, Role::w).element, ElementFormat::e4m3);
  EXPECT_EQ(q(Recipe::fp8_current, Role::dy).element, ElementFormat::e5m2);
  EXPECT_EQ(q(Recipe::fp8_delayed, Role::dy).element, ElementFormat::e5m2);
  EXPECT_EQ(q(Recipe::fp8_block, Role::x).block_rows, 1);
  EXPECT_EQ(q(Recipe::fp8_block, Role::w).block_rows, 128);
  EXPECT_EQ(q(Recipe::fp8_block, Role::dy).block_cols, 128);
  EXPECT_EQ(q(Recipe::mxfp8, Role::x).scale_format, ScaleFormat::e8m0);
  EXPECT_EQ(q(Recipe::nvfp4, Role::w).block_rows, 16);
  EXPECT_EQ(q(Recipe::nvfp4, Role::x).block_rows, 1);
  EXPECT_TRUE(q(Recipe::nvfp4, Role::dy).stochastic);
  EXPECT_FALSE(q(Recipe::nvfp4, Role::x).stochastic);
  EXPECT_EQ(q(Recipe::nvfp4, Role::x).rotation.size, 0) << "plain nvfp4 activations are not rotated";
  EXPECT_TRUE(q(Recipe::quartet, Role::x).has_mask());
  EXPECT_EQ(q(Recipe::quartet, Role::dy).prescale, 0.75f);
  EXPECT_EQ(q(Recipe::quartet, Role::dy).rotation.signs, SignKind::seeded);
  EXPECT_EQ(q(Recipe::mxfp4, Role::x).codes.size(), static_cast<size_t>(rows * cols / 2));
  EXPECT_NE(q(Recipe::mxfp4, Role::w).produced_by.find("mxfp4"), std::string::npos);
}

TEST(Recipes, RoundTripErrorIsWhatEachFormatAllows) {
  const int64_t rows = 128, cols = 512;
  const std::vector<float> x = testdata::gaussian(rows, cols, testdata::fresh_seed());
  const struct { Recipe r; double bound; } cases[] = {
      {Recipe::bf16, 1e-5},        {Recipe::fp8_current, 5e-3}, {Recipe::fp8_delayed, 5e-3},
      {Recipe::fp8_block, 3e-3},   {Recipe::mxfp8, 3e-3},       {Recipe::nvfp4, 3e-2},
      {Recipe::mxfp4, 8e-2},       {Recipe::quartet, 1e-1}};
  for (const auto& c : cases) {
    for (Role role : {Role::x, Role::w, Role::dy}) {
      const std::vector<float> back = quantize_dequantize(c.r, x.data(), rows, cols, QuantOptions{.role = role});
      const double e = rel_mse(back, x);
      EXPECT_LT(e, c.bound) << recipe_name(c.r) << " role " << role_name(role);
      EXPECT_GT(e, 0.0) << recipe_name(c.r);
    }
  }
}

TEST(Recipes, NothingExceedsTheFormatRange) {
  const int64_t rows = 128, cols = 256;
  const std::vector<float> x = testdata::with_outliers(rows, cols, testdata::fresh_seed());
  for (Recipe r : kAllRecipes) {
    for (Role role : {Role::x, Role::w, Role::dy}) {
      const QuantizedTensor q = quantize(r, x.data(), rows, cols, QuantOptions{.role = role});
      if (q.element == ElementFormat::bf16) continue;
      const float fmax = element_max(q.element);
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < cols; ++j) {
          const float d = decode_element(q.element, q.code_at(i, j));
          ASSERT_TRUE(std::isfinite(d));
          ASSERT_LE(std::fabs(d), fmax);
          // block scales are finite and non-negative (nvfp4 flushes a block whose amax is below the
          // UE4M3 range relative to the global scale: scale code 0)
          const float s = q.block_scale_at(i, j);
          ASSERT_TRUE(std::isfinite(s) && (s > 0 || (s == 0 && r == Recipe::nvfp4))) << recipe_name(r) << " role " << role_name(role) << " scale " << s;
        }
      }
    }
  }
}

TEST(Recipes, TeMxRuleNeverClipsOcpMay) {
  // A block whose amax is 500 * 2^k: OCP saturates it to 448 * 2^k, te keeps it.
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = 0.37f * (i - 15);
  x[7] = 500.0f;
  const QuantizedTensor ocp = quantize_mx(x.data(), 1, 32, ElementFormat::e4m3, MxScaleRule::ocp);
  const QuantizedTensor up = quantize_mx(x.data(), 1, 32, ElementFormat::e4m3, MxScaleRule::te);
  EXPECT_EQ(ocp.value_at(0, 7), 448.0f);
  EXPECT_EQ(up.value_at(0, 7), 512.0f);  // nearest E4M3 at scale 2: 256 * 2 (step 32 in [256, 448])
}

TEST(Recipes, DelayedScalingUsesHistoryThenRecords) {
  const int64_t rows = 4, cols = 64;
  std::vector<float> x = testdata::gaussian(rows, cols, testdata::fresh_seed(), 0.0f);
  const float amax = amax_of(x.data(), rows * cols);
  AmaxHistory h(3, 1);
  QuantOptions o;
  o.history = &h;
  QuantizedTensor q0 = quantize(Recipe::fp8_delayed, x.data(), rows, cols, o);
  EXPECT_EQ(q0.tensor_scale, 1.0f) << "first step (Transformer Engine) -> scale 1";
  EXPECT_NE(q0.produced_by.find("first step: scale 1"), std::string::npos) << q0.produced_by;
  EXPECT_EQ(h.size(), 1);
  EXPECT_EQ(h.max(), amax);
  QuantizedTensor q1 = quantize(Recipe::fp8_delayed, x.data(), rows, cols, o);
  const float s1 = (448.0f * 0.5f) / amax;
  EXPECT_EQ(q1.tensor_scale, 1.0f / s1);
  EXPECT_EQ(h.encode_scale(448.0f, 123.0f), s1) << "the step's own amax plays no part once a scale exists";
  for (float m : {100.0f, 1.0f, 2.0f, 3.0f}) h.record(m, 448.0f);  // window 3 drops the 100
  EXPECT_EQ(h.max(), 3.0f);
  EXPECT_EQ(h.encode_scale(448.0f, 0.0f), 224.0f / 3.0f);
  // A non-finite amax makes the history max non-finite: the previous scale stays until it leaves.
  h.record(NAN, 448.0f);
  EXPECT_TRUE(std::isnan(h.max()));
  EXPECT_EQ(h.encode_scale(448.0f, 0.0f), 224.0f / 3.0f);
  h.record(8.0f, 448.0f);
  h.record(INFINITY, 448.0f);
  EXPECT_EQ(h.encode_scale(448.0f, 0.0f), 224.0f / 3.0f);
  h.record(16.0f, 448.0f);
  h.record(4.0f, 448.0f);
  EXPECT_EQ(h.encode_scale(448.0f, 0.0f), 224.0f / 3.0f) << "inf still in the window";
  h.record(2.0f, 448.0f);
  EXPECT_EQ(h.encode_scale(448.0f, 0.0f), 224.0f / 16.0f);
  // An all-zero history keeps the previous scale too.
  AmaxHistory z(2);
  z.record(7.0f, 448.0f);
  z.record(0.0f, 448.0f);
  z.record(0.0f, 448.0f);
  EXPECT_EQ(z.max(), 0.0f);
  EXPECT_EQ(z.encode_scale(448.0f, 1.0f), 64.0f);
  EXPECT_THROW(AmaxHistory(0), std::invalid_argument);
  // DelayedFirstStep::own_amax: the first step uses the tensor's own amax (with the margin).
  AmaxHistory own(3, 1, DelayedFirstStep::own_amax);
  o.history = &own;
  QuantizedTensor first = quantize(Recipe::fp8_delayed, x.data(), rows, cols, o);
  EXPECT_EQ(first.tensor_scale, 1.0f / s1);
  EXPECT_NE(first.produced_by.find("first step: own amax"), std::string::npos) << first.produced_by;
  // One-shot (no history): the steady state, history = own amax == current scaling.
  const QuantizedTensor once = quantize(Recipe::fp8_delayed, x.data(), rows, cols);
  const QuantizedTensor cur = quantize(Recipe::fp8_current, x.data(), rows, cols);
  EXPECT_EQ(once.codes, cur.codes);
  EXPECT_EQ(once.tensor_scale, cur.tensor_scale);
  EXPECT_NE(once.produced_by.find("steady state: history = own amax"), std::string::npos) << once.produced_by;
}

TEST(Recipes, MxDefaultRuleIsTeForMxfp8AndOcpForMxfp4) {
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[i] = 0.37f * (i - 31);
  x[5] = 500.0f;   // OCP would saturate this block; te moves one binade up
  x[40] = 7.0f;    // E2M1: OCP k = 0 saturates 7 to 6; te k = 1
  for (Recipe r : {Recipe::mxfp8, Recipe::mxfp4}) {
    const MxScaleRule want = r == Recipe::mxfp8 ? MxScaleRule::te : MxScaleRule::ocp;
    EXPECT_EQ(default_mx_scale_rule(r), want);
    QuantOptions explicit_rule;
    explicit_rule.mx_scale_rule = want;
    const QuantizedTensor d = quantize(r, x.data(), 2, 32);
    const QuantizedTensor e = quantize(r, x.data(), 2, 32, explicit_rule);
    EXPECT_EQ(d.scale_codes, e.scale_codes) << recipe_name(r);
    EXPECT_EQ(d.codes, e.codes) << recipe_name(r);
    explicit_rule.mx_scale_rule = want == MxScaleRule::te ? MxScaleRule::ocp : MxScaleRule::te;
    EXPECT_NE(quantize(r, x.data(), 2, 32, explicit_rule).scale_codes, d.scale_codes) << recipe_name(r);
    EXPECT_NE(d.produced_by.find(std::string("(") + mx_scale_rule_name(want) + " scale)"), std::string::npos)
        << d.produced_by;
  }
  EXPECT_EQ(parse_mx_scale_rule("round-up"), MxScaleRule::te);
  EXPECT_THROW(parse_mx_scale_rule("up"), std::invalid_argument);
}

TEST(Recipes, BadInputNamesTheFieldAndTheFix) {
  std::vector<float> x(300 * 200, 0.5f);
  try {
    quantize(Recipe::fp8_block, x.data(), 300, 200);
    FAIL();
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("cols 200"), std::string::npos) << m;
    EXPECT_NE(m.find("128"), std::string::npos) << m;
  }
  try {
    quantize(Recipe::fp8_block, x.data(), 200, 256, QuantOptions{.role = Role::w});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("rows 200"), std::string::npos) << e.what();
  }
  EXPECT_THROW(quantize(Recipe::mxfp4, x.data(), 1, 48), std::invalid_argument);
  EXPECT_THROW(quantize(Recipe::nvfp4, x.data(), 8, 32, QuantOptions{.role = Role::w}), std::invalid_argument);
  EXPECT_THROW(quantize(Recipe::quartet, x.data(), 1, 96, QuantOptions{.hadamard_size = 64}), std::invalid_argument);
  EXPECT_THROW(quantize(Recipe::quartet, x.data(), 1, 96, QuantOptions{.hadamard_size = 24}), std::invalid_argument);
  EXPECT_THROW(quantize(Recipe::mxfp8, nullptr, 1, 32), std::invalid_argument);
  EXPECT_THROW(quantize(Recipe::mxfp8, x.data(), 0, 32), std::invalid_argument);
  EXPECT_THROW(quantize(Recipe::fp8_block, x.data(), 1, 128, QuantOptions{.rounding = Rounding::stochastic}),
               std::invalid_argument);
}

// The layer rule the engine and the predictor share (layer_shape_rule.hpp): a layer it accepts is one
// whose six quantized tensors (X, W, dY and their transposes, each in its role) the reference quantizes;
// a layer with in_features off the recipe's block is refused, naming the dimension and the fix. For the
// block-scaled recipes the reference itself refuses that X too (for bf16 and per-tensor FP8 the multiple
// comes from cuBLASLt's 16-byte rows and the cast + transpose kernel's stores, not from the format).
TEST(LayerShapeRule, AcceptsWhatTheReferenceQuantizesAndNamesWhatItRefuses) {
  for (Recipe r : kAllRecipes) {
    const std::string name = recipe_name(r);
    const int64_t b = layer_multiple(name);
    ASSERT_TRUE(b == 8 || b == 16 || b == 32 || b == 128) << name;
    const int64_t t = 2 * b, i = 3 * b, o = b;
    EXPECT_EQ(layer_shape_error(name, "mlp_up", t, i, o), "") << name;
    const auto x = testdata::gaussian(t, i, testdata::fresh_seed());
    const auto w = testdata::gaussian(o, i, testdata::fresh_seed());
    const auto dy = testdata::gaussian(t, o, testdata::fresh_seed());
    const struct {
      const std::vector<float>* v;
      int64_t rows, cols;
      Role role;
    } tensors[] = {{&x, t, i, Role::x}, {&x, i, t, Role::x}, {&w, o, i, Role::w},
                   {&w, i, o, Role::w}, {&dy, t, o, Role::dy}, {&dy, o, t, Role::dy}};
    for (const auto& c : tensors) {
      EXPECT_NO_THROW(quantize(r, c.v->data(), c.rows, c.cols, QuantOptions{.role = c.role}))
          << name << " " << role_name(c.role) << " " << c.rows << "x" << c.cols;
    }
    const int64_t off = i + b / 2;
    const std::string e = layer_shape_error(name, "mlp_up", t, off, o);
    EXPECT_NE(e.find("in_features = " + std::to_string(off)), std::string::npos) << e;
    EXPECT_NE(e.find("not a multiple of " + std::to_string(b)), std::string::npos) << e;
    EXPECT_NE(e.find("next multiple " + std::to_string(i + b)), std::string::npos) << e;
    EXPECT_EQ(e.find("T (tokens)"), std::string::npos) << e;  // only the dimension that is off
    const std::string two = layer_shape_error(name, "mlp_up", t + b / 2, off, o);
    EXPECT_NE(two.find("T (tokens) = " + std::to_string(t + b / 2)), std::string::npos) << two;
    EXPECT_NE(two.find("are not multiples of " + std::to_string(b)), std::string::npos) << two;
    if (b >= 16 && r != Recipe::fp8_delayed && r != Recipe::fp8_current) {
      const auto x_off = testdata::gaussian(t, off, testdata::fresh_seed());
      EXPECT_THROW(quantize(r, x_off.data(), t, off, QuantOptions{.role = Role::x}), std::invalid_argument) << name;
    }
  }
  EXPECT_NE(layer_shape_error("fp6", "qkv", 128, 128, 128).find("valid recipes: bf16"), std::string::npos);
  EXPECT_EQ(layer_multiple("fp6"), 0);
}

// Zero, NaN, inf and subnormal inputs through every recipe, as docs/recipes.md documents.
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
