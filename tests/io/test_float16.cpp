// Half <-> float: exhaustive decode against the compiler's _Float16, encode against it on every
// half, every midpoint between neighbours (the ties) and many random floats.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>

#include "nibble/io/float16.hpp"

using nibble::io::decode_f16;
using nibble::io::encode_f16;

namespace {
float reference_decode(uint16_t h) { return static_cast<float>(std::bit_cast<_Float16>(h)); }
uint16_t reference_encode(float x) { return std::bit_cast<uint16_t>(static_cast<_Float16>(x)); }
}  // namespace

TEST(Float16, DecodeEveryCode) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float got = decode_f16(static_cast<uint16_t>(h));
    const float want = reference_decode(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << h;
      continue;
    }
    EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want)) << h;
  }
}

TEST(Float16, EncodeRoundTripsEveryCode) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float v = decode_f16(static_cast<uint16_t>(h));
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(decode_f16(encode_f16(v)))) << h;
      continue;
    }
    EXPECT_EQ(encode_f16(v), h) << h;
  }
}

TEST(Float16, EncodeTiesAndNeighbours) {
  // Midpoints between consecutive positive halves (exact in float) round to even; one float ulp
  // either side rounds to the nearer neighbour.
  for (uint32_t h = 0; h < 0x7BFF; ++h) {
    const float lo = decode_f16(static_cast<uint16_t>(h));
    const float hi = decode_f16(static_cast<uint16_t>(h + 1));
    const float mid = lo + (hi - lo) / 2;
    for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)}) {
      EXPECT_EQ(encode_f16(x), reference_encode(x)) << h << " " << x;
      EXPECT_EQ(encode_f16(-x), reference_encode(-x)) << h << " " << x;
    }
  }
  EXPECT_EQ(encode_f16(65504.0f), 0x7BFF);
  EXPECT_EQ(encode_f16(65519.99f), 0x7BFF);
  EXPECT_EQ(encode_f16(65520.0f), 0x7C00);  // ties to even past the max: IEEE overflows to inf
  EXPECT_EQ(encode_f16(INFINITY), 0x7C00);
  EXPECT_EQ(encode_f16(-INFINITY), 0xFC00);
}

TEST(Float16, EncodeRandomFloats) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 2'000'000; ++i) {
    const float x = std::bit_cast<float>(bits(rng));
    if (std::isnan(x)) continue;
    ASSERT_EQ(encode_f16(x), reference_encode(x)) << x;
  }
}
