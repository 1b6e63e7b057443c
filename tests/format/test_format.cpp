// The format layer. Exhaustive and property tests of its float codecs: minifloats against an independent
// brute-force definition (the nearest representable value, ties to the even code, saturation to max finite),
// E8M0 and BF16 on every code. Then the Philox generator that stochastic rounding draws from.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <set>
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

// The block-scale and wide formats: E8M0 (every byte), BF16 (every code, ties to even), and the
// exponent helpers they rest on.
TEST(E8M0, EveryByte) {
  for (int c = 0; c < 256; ++c) {
    const float v = decode_e8m0(static_cast<uint8_t>(c));
    if (c == 0xFF) {
      EXPECT_TRUE(std::isnan(v));
      continue;
    }
    EXPECT_EQ(v, std::ldexp(1.0f, c - 127)) << c;
    EXPECT_EQ(encode_e8m0_exponent(c - 127), c);
    EXPECT_EQ(e8m0_exponent(static_cast<uint8_t>(c)), c - 127);
  }
  EXPECT_EQ(encode_e8m0_exponent(-500), 0);
  EXPECT_EQ(encode_e8m0_exponent(500), 254);
}

TEST(BF16, RoundTripAndNearestEven) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float v = decode_bf16(static_cast<uint16_t>(h));
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(decode_bf16(encode_bf16(v))));
      continue;
    }
    EXPECT_EQ(encode_bf16(v), h);
  }
  EXPECT_EQ(encode_bf16(bits_float(0x3F808000u)), 0x3F80);  // tie to even (down)
  EXPECT_EQ(encode_bf16(bits_float(0x3F818000u)), 0x3F82);  // tie to even (up)
  EXPECT_EQ(encode_bf16(bits_float(0x3F808001u)), 0x3F81);
}

TEST(FloorLog2, MatchesLibm) {
  std::mt19937 rng = nibble::testing::fresh_engine<std::mt19937>();
  std::uniform_int_distribution<uint32_t> bits(1, 0x7f7fffffu);
  for (int i = 0; i < 100000; ++i) {
    const float x = bits_float(bits(rng));
    EXPECT_EQ(floor_log2(x), std::ilogb(x)) << x;
    EXPECT_EQ(floor_log2(-x), std::ilogb(x)) << x;
  }
  for (int e = -149; e <= 127; ++e) EXPECT_EQ(pow2f(e), std::ldexp(1.0f, e));
}

// Philox4x32-10, the counter-based generator behind stochastic rounding: known answers, and bits that
// depend on (seed, stream, index) only.
TEST(Philox, KnownAnswerFromRandom123) {
  // Known-answer vectors of Philox4x32-10 published with Random123 (kat_vectors).
  auto r = philox4x32_10(0, 0, 0, 0, 0, 0);
  EXPECT_EQ(r.v[0], 0x6627e8d5u);
  EXPECT_EQ(r.v[1], 0xe169c58du);
  EXPECT_EQ(r.v[2], 0xbc57ac4cu);
  EXPECT_EQ(r.v[3], 0x9b00dbd8u);
  r = philox4x32_10(0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu);
  EXPECT_EQ(r.v[0], 0x408f276du);
  EXPECT_EQ(r.v[1], 0x41c83b0eu);
  EXPECT_EQ(r.v[2], 0xa20bc7c6u);
  EXPECT_EQ(r.v[3], 0x6d5451fdu);
}

TEST(Philox, DependsOnlyOnSeedStreamIndex) {
  EXPECT_EQ(random_bits(42, 1, 123456789), random_bits(42, 1, 123456789));
  EXPECT_NE(random_bits(42, 1, 5), random_bits(43, 1, 5));
  EXPECT_NE(random_bits(42, 1, 5), random_bits(42, 2, 5));
  std::set<uint32_t> seen;
  double mean = 0;
  const int n = 1 << 16;
  for (int i = 0; i < n; ++i) {
    const uint32_t r = random_bits(7, 0, static_cast<uint64_t>(i));
    seen.insert(r);
    mean += r / 4294967296.0;
  }
  EXPECT_GT(seen.size(), static_cast<size_t>(n - 4));
  EXPECT_NEAR(mean / n, 0.5, 6 * std::sqrt(1.0 / 12 / n));
}
