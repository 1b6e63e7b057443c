#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "nibble/format.hpp"
#include "test_seed.hpp"

using namespace nibble::fmt;

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
