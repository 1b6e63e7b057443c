// Half <-> float: exhaustive decode against an independent reference, encode against it on every
// half, every midpoint between neighbours (the ties) and many random floats. The reference is plain
// IEEE arithmetic in double (the compiler's _Float16 is checked against it where the compiler has
// one: GCC does, clang 14 on x86-64 does not, and the sanitizer build uses clang 14).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>

#include "nibble/io/tensor.hpp"
#include "test_seed.hpp"

using nibble::io::decode_f16;
using nibble::io::encode_f16;

namespace {
// sign, 5 exponent bits (bias 15), 10 mantissa bits; exponent 0 subnormal, 31 inf/NaN.
float reference_decode(uint16_t h) {
  const int e = (h >> 10) & 31, m = h & 1023;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 31) return m ? NAN : static_cast<float>(sign * INFINITY);
  return static_cast<float>(sign * (e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25)));
}
// Round to nearest, ties to even, in units of the half's quantum at |x| (exact in double, since the
// quantum is a power of two); at or past 65520 (the midpoint to the next power of two) IEEE overflows to inf.
uint16_t reference_encode(float x) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(x));
  if (a >= 65520.0) return sign | 0x7C00;
  const int e = a < std::ldexp(1.0, -14) ? -14 : std::ilogb(a);
  const double r = std::nearbyint(a / std::ldexp(1.0, e - 10));  // default mode: to nearest even
  const double v = r * std::ldexp(1.0, e - 10);
  if (v < std::ldexp(1.0, -14)) return sign | static_cast<uint16_t>(r);  // subnormal (r = 1024: min normal)
  const int ev = std::ilogb(v);
  return sign | static_cast<uint16_t>(((ev + 15) << 10) | static_cast<int>(std::ldexp(v, 10 - ev) - 1024));
}
}  // namespace

#ifdef __FLT16_MAX__
TEST(Float16, ReferenceAgreesWithTheCompilersFloat16) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float want = static_cast<float>(std::bit_cast<_Float16>(static_cast<uint16_t>(h)));
    const float got = reference_decode(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << h;
    } else {
      EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want)) << h;
    }
  }
  std::mt19937 rng = nibble::testing::fresh_engine<std::mt19937>();
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 1'000'000; ++i) {
    const float x = std::bit_cast<float>(bits(rng));
    if (std::isnan(x)) continue;
    ASSERT_EQ(reference_encode(x), std::bit_cast<uint16_t>(static_cast<_Float16>(x))) << x;
  }
}
#endif

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
  std::mt19937 rng = nibble::testing::fresh_engine<std::mt19937>();
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 2'000'000; ++i) {
    const float x = std::bit_cast<float>(bits(rng));
    if (std::isnan(x)) continue;
    ASSERT_EQ(encode_f16(x), reference_encode(x)) << x;
  }
}
