#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "nibble/format.hpp"

using namespace nibble::fmt;

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
