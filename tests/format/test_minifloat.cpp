// Exhaustive and property tests of the minifloat codecs against an independent brute-force
// definition: the nearest representable value, ties to the even code, saturation to max finite.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "nibble/format.hpp"
#include "test_seed.hpp"

using namespace nibble::fmt;

namespace {

struct Entry {
  uint8_t code;
  double value;
};

// Every finite non-negative value of the format with its code, found by decoding every byte.
std::vector<Entry> finite_magnitudes(const MiniFloat& f) {
  std::vector<Entry> out;
  const int width = f.exp_bits + f.man_bits;
  for (uint32_t c = 0; c < (1u << width); ++c) {
    float v = decode_minifloat(f, static_cast<uint8_t>(c));
    if (std::isfinite(v)) out.push_back({static_cast<uint8_t>(c), v});
  }
  return out;
}

// Brute force RNE-satfinite: nearest finite magnitude; on a tie the code with even last bit.
uint8_t brute_encode(const MiniFloat& f, const std::vector<Entry>& table, float x) {
  if (std::isnan(x)) return f.nan_rule == NanRule::canonical_nan ? f.nan_code : f.max_code;
  const bool neg = std::signbit(x);
  if (!f.has_sign && neg) return 0;
  const double a = std::fabs(static_cast<double>(x));
  uint8_t best = 0;
  double best_d = std::numeric_limits<double>::infinity();
  for (const auto& e : table) {
    const double d = std::fabs(e.value - a);
    if (d < best_d || (d == best_d && (e.code & 1) == 0)) {
      best = e.code;
      best_d = d;
    }
  }
  if (a > decode_minifloat(f, f.max_code)) best = f.max_code;
  return static_cast<uint8_t>(best | (neg ? f.sign_bit() : 0));
}

struct Named {
  const char* name;
  MiniFloat f;
};
const Named kFormats[] = {{"e4m3", kE4M3()}, {"e5m2", kE5M2()}, {"e2m1", kE2M1()}, {"ue4m3", kUE4M3()}};

}  // namespace

TEST(MiniFloat, DecodeEveryCodeRoundTrips) {
  for (const auto& [name, f] : kFormats) {
    const int width = f.exp_bits + f.man_bits + (f.has_sign ? 1 : 0);
    for (uint32_t c = 0; c < (1u << width); ++c) {
      const float v = decode_minifloat(f, static_cast<uint8_t>(c));
      if (std::isnan(v)) {
        EXPECT_EQ(f.nan_rule, NanRule::canonical_nan) << name << " code " << c;
        continue;
      }
      if (std::isinf(v)) {
        EXPECT_TRUE(f.has_inf) << name;
        continue;
      }
      // Negative zero encodes to negative zero's code; everything finite round-trips exactly.
      EXPECT_EQ(encode_minifloat(f, v, false, 0), c) << name << " value " << v;
    }
  }
}

TEST(MiniFloat, KnownValues) {
  EXPECT_EQ(decode_e4m3(0x7E), 448.0f);
  EXPECT_TRUE(std::isnan(decode_e4m3(0x7F)));
  EXPECT_TRUE(std::isnan(decode_e4m3(0xFF)));
  EXPECT_EQ(decode_e4m3(0x08), 0.015625f);  // smallest normal 2^-6
  EXPECT_EQ(decode_e5m2(0x7B), 57344.0f);
  EXPECT_TRUE(std::isinf(decode_e5m2(0x7C)));
  EXPECT_EQ(decode_e5m2(0x01), std::ldexp(1.0f, -16));
  const float e2m1[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (int c = 0; c < 8; ++c) {
    EXPECT_EQ(decode_e2m1(static_cast<uint8_t>(c)), e2m1[c]);
    EXPECT_EQ(decode_e2m1(static_cast<uint8_t>(c | 8)), -e2m1[c]);
  }
}

TEST(MiniFloat, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(encode_e4m3(inf), 0x7E);
  EXPECT_EQ(encode_e4m3(-inf), 0xFE);
  EXPECT_EQ(encode_e5m2(inf), 0x7B);  // satfinite: inf saturates
  EXPECT_EQ(encode_e4m3(nan), 0x7F);
  EXPECT_EQ(encode_e5m2(nan), 0x7F);
  EXPECT_EQ(encode_e2m1(nan), 0x7);  // no NaN in E2M1: the block scale carries NaN
  EXPECT_EQ(encode_e4m3(-0.0f), 0x80);
  EXPECT_EQ(encode_e4m3(std::numeric_limits<float>::denorm_min()), 0x00);
  EXPECT_EQ(encode_ue4m3(-3.0f), 0x00);
}

TEST(MiniFloat, EncodeMatchesBruteForceOnTiesBoundariesAndRandom) {
  std::mt19937 rng = nibble::testing::fresh_engine<std::mt19937>();
  for (const auto& [name, f] : kFormats) {
    const auto table = finite_magnitudes(f);
    std::vector<float> probes;
    // Every representable value, every midpoint (a tie), and the floats just either side of both.
    for (size_t i = 0; i < table.size(); ++i) {
      const float v = static_cast<float>(table[i].value);
      probes.push_back(v);
      if (i + 1 < table.size()) probes.push_back(static_cast<float>((table[i].value + table[i + 1].value) / 2));
    }
    const float maxv = static_cast<float>(table.back().value);
    probes.push_back(maxv * 1.0625f);
    probes.push_back(maxv * 1.5f);
    probes.push_back(maxv * 4.0f);
    probes.push_back(1e30f);
    const size_t n = probes.size();
    for (size_t i = 0; i < n; ++i) {
      probes.push_back(std::nextafter(probes[i], 0.0f));
      probes.push_back(std::nextafter(probes[i], 1e38f));
    }
    // Random floats over the format's whole range and far below it (log-uniform magnitudes).
    std::uniform_real_distribution<float> expo(-40.0f, std::log2(maxv) + 2.0f);
    for (int i = 0; i < 200000; ++i) probes.push_back(std::exp2(expo(rng)));
    for (float p : probes) {
      for (float x : {p, -p}) {
        ASSERT_EQ(encode_minifloat(f, x, false, 0), brute_encode(f, table, x)) << name << " x=" << x;
      }
    }
  }
}

TEST(MiniFloat, StochasticRoundingPicksANeighbourAndIsUnbiased) {
  std::mt19937 rng = nibble::testing::fresh_engine<std::mt19937>();
  for (const auto& [name, f] : kFormats) {
    const auto table = finite_magnitudes(f);
    std::uniform_int_distribution<size_t> pick(1, table.size() - 2);
    for (int trial = 0; trial < 40; ++trial) {
      const size_t i = pick(rng);
      const double lo = table[i].value, hi = table[i + 1].value;
      const double frac = std::uniform_real_distribution<double>(0.05, 0.95)(rng);
      const float x = static_cast<float>(lo + frac * (hi - lo));
      const double exact_frac = (static_cast<double>(x) - lo) / (hi - lo);
      const int n = 20000;
      int ups = 0;
      for (int k = 0; k < n; ++k) {
        const uint8_t c = encode_minifloat(f, x, true, static_cast<uint32_t>(rng()));
        ASSERT_TRUE(c == table[i].code || c == table[i + 1].code) << name << " x=" << x;
        ups += c == table[i + 1].code;
      }
      // Binomial: 6 standard deviations.
      const double sd = std::sqrt(n * exact_frac * (1 - exact_frac));
      EXPECT_NEAR(ups, n * exact_frac, 6 * sd + 1) << name << " x=" << x;
    }
  }
}

TEST(MiniFloat, StochasticRoundingNeverMovesRepresentableValues) {
  for (const auto& [name, f] : kFormats) {
    for (const auto& e : finite_magnitudes(f)) {
      for (uint32_t r : {0u, 1u, 0x80000000u, 0xFFFFFFFFu}) {
        EXPECT_EQ(encode_minifloat(f, static_cast<float>(e.value), true, r), e.code) << name;
      }
    }
  }
}
