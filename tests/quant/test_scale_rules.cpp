// Scale rules checked against independent double-precision definitions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "nibble/quant.hpp"
#include "test_seed.hpp"

using namespace nibble::quant;
namespace fmt = nibble::fmt;

namespace {
float random_positive(std::mt19937_64& g) {
  // log-uniform over (almost) the whole normal float range, plus some subnormals
  std::uniform_real_distribution<double> e(-140.0, 127.0);
  std::uniform_real_distribution<double> m(1.0, 2.0);
  return static_cast<float>(m(g) * std::exp2(std::floor(e(g))));
}
}  // namespace

TEST(ScaleRules, PerTensorEncodeScale) {
  EXPECT_EQ(per_tensor_encode_scale(448.0f, 0.0f), 1.0f);
  EXPECT_EQ(per_tensor_encode_scale(448.0f, INFINITY), 1.0f);
  EXPECT_EQ(per_tensor_encode_scale(448.0f, NAN), 1.0f);
  EXPECT_EQ(per_tensor_encode_scale(448.0f, 1e-45f), kFloatMax);  // quotient overflows
  EXPECT_EQ(per_tensor_encode_scale(448.0f, 2.0f), 224.0f);
  EXPECT_EQ(per_tensor_encode_scale(448.0f, 2.0f, 3), 28.0f);
  std::mt19937_64 g(testdata::fresh_seed());
  for (int i = 0; i < 20000; ++i) {
    const float amax = random_positive(g);
    const float s = per_tensor_encode_scale(57344.0f, amax);
    if (std::isfinite(57344.0 / amax) && 57344.0 / amax < kFloatMax) {
      EXPECT_EQ(s, 57344.0f / amax);
      EXPECT_LE(fmt::decode_e5m2(fmt::encode_e5m2(amax * s)), 57344.0f);
    }
  }
}

TEST(ScaleRules, Fp8BlockExponentIsFloorLog2OfQuotient) {
  std::mt19937_64 g(testdata::fresh_seed());
  for (int i = 0; i < 50000; ++i) {
    const float amax = random_positive(g);
    const int k = fp8_block_scale_exponent(amax);
    const double q = 448.0 / static_cast<double>(amax);
    const int want = std::max(-127, std::min(127, static_cast<int>(std::floor(std::log2(q)))));
    ASSERT_EQ(k, want) << "amax " << amax;
    // amax * 2^k never exceeds 448 (nothing saturates) unless k is clamped
    if (k < 127) {
      EXPECT_LE(static_cast<double>(amax) * std::exp2(k), 448.0);
    }
  }
  // Ratios that are exact powers of two, and their neighbours.
  EXPECT_EQ(fp8_block_scale_exponent(448.0f), 0);
  EXPECT_EQ(fp8_block_scale_exponent(std::nextafter(448.0f, 1e9f)), -1);
  EXPECT_EQ(fp8_block_scale_exponent(224.0f), 1);
  EXPECT_EQ(fp8_block_scale_exponent(0.0f), 0);
  EXPECT_EQ(fp8_block_scale_exponent(NAN), 0);
  EXPECT_EQ(fp8_block_scale_exponent(INFINITY), 0);
}

TEST(ScaleRules, MxOcpAndTe) {
  std::mt19937_64 g(testdata::fresh_seed());
  for (ElementFormat f : {ElementFormat::e4m3, ElementFormat::e2m1}) {
    const double fmax = element_max(f);
    const int emax = element_emax(f);
    for (int i = 0; i < 50000; ++i) {
      const float amax = random_positive(g);
      const int ocp = fmt::e8m0_exponent(mx_scale_code(amax, MxScaleRule::ocp, f));
      const int up = fmt::e8m0_exponent(mx_scale_code(amax, MxScaleRule::te, f));
      const int want_ocp = std::max(-127, static_cast<int>(std::floor(std::log2(static_cast<double>(amax)))) - emax);
      // The te rule equals the exact ceil(log2(amax / fmax)) wherever amax * fl(1/fmax) is a normal float.
      const int want_up = std::max(-127, static_cast<int>(std::ceil(std::log2(static_cast<double>(amax) / fmax))));
      ASSERT_EQ(ocp, want_ocp) << "amax " << amax;
      if (static_cast<double>(amax) / fmax < 0x1p-125) continue;
      ASSERT_EQ(up, want_up) << "amax " << amax;
      if (up > -127) {
        EXPECT_LE(static_cast<double>(amax), fmax * std::exp2(up));        // never clips
        EXPECT_GT(static_cast<double>(amax), fmax * std::exp2(up - 1));   // and is the smallest such
      }
    }
  }
  // OCP can clip: amax in (448, 512) * 2^k saturates; te moves one binade up.
  EXPECT_EQ(fmt::e8m0_exponent(mx_scale_code(500.0f, MxScaleRule::ocp, ElementFormat::e4m3)), 0);
  EXPECT_EQ(fmt::e8m0_exponent(mx_scale_code(500.0f, MxScaleRule::te, ElementFormat::e4m3)), 1);
  EXPECT_EQ(fmt::e8m0_exponent(mx_scale_code(6.0f, MxScaleRule::te, ElementFormat::e2m1)), 0);
  EXPECT_EQ(fmt::e8m0_exponent(mx_scale_code(7.0f, MxScaleRule::te, ElementFormat::e2m1)), 1);
  EXPECT_EQ(fmt::e8m0_exponent(mx_scale_code(7.0f, MxScaleRule::ocp, ElementFormat::e2m1)), 0);
  EXPECT_EQ(mx_scale_code(0.0f, MxScaleRule::ocp, ElementFormat::e2m1), 0);
  EXPECT_EQ(mx_scale_code(NAN, MxScaleRule::ocp, ElementFormat::e2m1), fmt::kE8M0Nan);
  EXPECT_EQ(mx_scale_code(INFINITY, MxScaleRule::te, ElementFormat::e4m3), fmt::kE8M0Nan);
  // Where amax * fl(1/448) is subnormal it rounds on the 2^-149 grid: an amax just above 448 * 2^-127
  // lands exactly on 2^-127 (code 0, so the block saturates slightly, as in TE), while the exact
  // ceil would move to 2^-126.
  const float just_above = std::nextafter(448.0f * 0x1p-127f, 1.0f);
  EXPECT_EQ(mx_scale_code(just_above, MxScaleRule::te, ElementFormat::e4m3), 0);
  EXPECT_EQ(fmt::e8m0_exponent(mx_scale_code(just_above * 1.001f, MxScaleRule::te, ElementFormat::e4m3)), -126);
  EXPECT_EQ(mx_scale_code(448.0f * 0x1p-127f, MxScaleRule::te, ElementFormat::e4m3), 0);
  // amax = 448 * 2^k exactly: fl(1/448) is above 1/448 by less than half an ulp, so v = 2^k (no round up).
  for (int k = -100; k <= 100; k += 7) {
    EXPECT_EQ(fmt::e8m0_exponent(mx_scale_code(448.0f * std::ldexp(1.0f, k), MxScaleRule::te, ElementFormat::e4m3)), k);
    EXPECT_EQ(fmt::e8m0_exponent(mx_scale_code(std::nextafter(448.0f * std::ldexp(1.0f, k), 1e38f), MxScaleRule::te,
                                               ElementFormat::e4m3)), k + 1);
  }
}

namespace {
// The amaxes the closed forms below are checked on: every BF16 pattern (what the kernels see), every
// float exponent field with the fractions around each format's fmax and the extremes, and random
// float bits. Signs, zeros, subnormals, inf and NaN are all in there.
std::vector<float> amax_sweep() {
  std::vector<float> v;
  for (uint32_t b = 0; b < 0x10000u; ++b) v.push_back(fmt::bits_float(b << 16));
  const uint32_t fractions[] = {0u, 1u, 2u, 0x3fffffu, 0x400000u, 0x400001u, 0x5fffffu, 0x600000u,
                                0x600001u, 0x7ffffeu, 0x7fffffu};
  for (uint32_t e = 0; e < 256; ++e) {
    for (uint32_t f : fractions) v.push_back(fmt::bits_float(e << 23 | f));
  }
  std::mt19937_64 g(testdata::fresh_seed());
  for (int i = 0; i < 2000000; ++i) v.push_back(fmt::bits_float(static_cast<uint32_t>(g())));
  return v;
}
int clamp127(int k) { return std::clamp(k, -127, 127); }
}  // namespace

// mx_scale_code's closed form (no floor_log2 loop) against the rules' definitions in double.
TEST(ScaleRules, MxScaleCodeClosedFormMatchesTheDefinitions) {
  for (ElementFormat f : {ElementFormat::e4m3, ElementFormat::e5m2, ElementFormat::e2m1, ElementFormat::bf16}) {
    const double fmax = element_max(f);
    for (float x : amax_sweep()) {
      const double a = std::fabs(static_cast<double>(x));
      uint8_t want_ocp = fmt::kE8M0Nan, want_up = fmt::kE8M0Nan;
      if (std::isfinite(a)) {
        want_ocp = want_up = 0;
        if (a > 0.0) {
          want_ocp = fmt::encode_e8m0_exponent(clamp127(std::ilogb(a) - element_emax(f)));
          // te (Transformer Engine): v = fl(a * fl(1/fmax)); the double product of two 24-bit
          // significands is exact, the cast rounds it once as the float multiply does (subnormals too).
          const double rcp = static_cast<float>(1.0 / fmax);
          const double v = static_cast<float>(a * rcp);
          if (v > 0.0) {
            const int up = std::ilogb(v) + (v != std::ldexp(1.0, std::ilogb(v)) ? 1 : 0);  // ceil(log2 v)
            want_up = fmt::encode_e8m0_exponent(clamp127(up));
          }
        }
      }
      ASSERT_EQ(mx_scale_code(x, MxScaleRule::ocp, f), want_ocp) << "amax bits " << std::hex << fmt::float_bits(x);
      ASSERT_EQ(mx_scale_code(x, MxScaleRule::te, f), want_up) << "amax bits " << std::hex << fmt::float_bits(x);
    }
  }
}

// QuEST's exponent through floor_log2_at_least_m127 equals the clamped floor(log2) definition.
TEST(ScaleRules, QuestScaleExponentMatchesFloorLog2) {
  for (float x : amax_sweep()) {
    const float a = std::fabs(x);
    if (!std::isfinite(a) || a == 0.0f) continue;
    const int fl = std::ilogb(static_cast<double>(a));
    ASSERT_EQ(fmt::floor_log2(a), fl);
    ASSERT_EQ(fmt::floor_log2_at_least_m127(a), std::max(fl, -127)) << std::hex << fmt::float_bits(a);
    ASSERT_EQ(quest_scale_exponent(a), clamp127(fl)) << std::hex << fmt::float_bits(a);
  }
}

TEST(ScaleRules, Nvfp4) {
  // Transformer Engine's order of float operations (docs/recipes.md, nvfp4), checked against double
  // arithmetic rounded to float at each of TE's steps.
  EXPECT_EQ(nvfp4_global_encode_scale(2688.0f), 1.0f);
  EXPECT_EQ(nvfp4_global_decode_scale(2688.0f), 1.0f);
  EXPECT_EQ(nvfp4_global_encode_scale(0.0f), 1.0f);
  EXPECT_EQ(nvfp4_global_encode_scale(INFINITY), 1.0f);
  EXPECT_EQ(nvfp4_global_encode_scale(NAN), 1.0f);
  EXPECT_EQ(nvfp4_global_encode_scale(1e-40f), kFloatMax);  // 2688 / amax overflows: FLT_MAX
  std::mt19937_64 g(testdata::fresh_seed());
  std::uniform_real_distribution<float> frac(0.0f, 1.0f);
  int codes_differ_from_quotient = 0;
  for (int i = 0; i < 20000; ++i) {
    const float amax = std::exp2(std::uniform_real_distribution<float>(-60, 60)(g)) * (1.0f + frac(g));
    const float s_enc = nvfp4_global_encode_scale(amax);
    EXPECT_EQ(s_enc, static_cast<float>(2688.0 / static_cast<double>(amax)));
    const float s_dec = nvfp4_global_decode_scale(amax);
    EXPECT_EQ(s_dec, static_cast<float>(1.0 / static_cast<double>(s_enc)));
    const float amax_block = amax * frac(g);
    const uint8_t code = nvfp4_block_scale_code(amax_block, s_enc);
    const float mult = static_cast<float>(static_cast<double>(s_enc) * static_cast<double>(1.0f / 6.0f));
    EXPECT_EQ(code, fmt::encode_ue4m3(static_cast<float>(static_cast<double>(amax_block) * mult)));
    codes_differ_from_quotient += code != fmt::encode_ue4m3((amax_block / 6.0f) / (amax / 2688.0f));
    EXPECT_LE(fmt::decode_ue4m3(code), 448.0f);
    const float e = nvfp4_element_encode_scale(code, s_dec);
    const double want_e = 1.0 / static_cast<double>(static_cast<float>(static_cast<double>(fmt::decode_ue4m3(code)) * s_dec));
    EXPECT_EQ(e, code == 0 ? kFloatMax : static_cast<float>(want_e)) << amax << " " << amax_block;
  }
  // The old quotient form (amax_block / 6) / (amax / 2688) rounds differently now and then: the op
  // order matters, which is why it follows TE's.
  EXPECT_LT(codes_differ_from_quotient, 20000 / 10);
  EXPECT_EQ(nvfp4_block_scale_code(NAN, 1.0f), 0x7F);
  EXPECT_EQ(nvfp4_block_scale_code(INFINITY, 1.0f), 0x7E);      // satfinite: 448
  EXPECT_EQ(nvfp4_block_scale_code(2688.0f * 2.0f, 1.0f), 0x7E);  // above 448 saturates
  EXPECT_EQ(nvfp4_element_encode_scale(0, 1.0f), kFloatMax);      // zero block scale
}

TEST(Amax, PropagatesNanAndInfOrderIndependently) {
  float v[5] = {1.0f, -3.0f, 2.0f, 0.5f, -0.25f};
  EXPECT_EQ(amax_of(v, 5), 3.0f);
  v[2] = -INFINITY;
  EXPECT_EQ(amax_of(v, 5), INFINITY);
  for (int pos = 0; pos < 5; ++pos) {
    float w[5] = {1.0f, -INFINITY, 2.0f, 0.5f, -0.25f};
    w[pos] = -NAN;
    EXPECT_TRUE(std::isnan(amax_of(w, 5))) << pos;
    EXPECT_EQ(fmt::float_bits(amax_of(w, 5)), 0x7fc00000u);  // canonical
  }
}
