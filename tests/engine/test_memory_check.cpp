// The engine's pre-allocation refusal: a row that cannot fit is refused with its numbers, one that
// fits (to the byte) is not.
#include <gtest/gtest.h>

#include <random>

#include "../../src/engine/memory_check.hpp"
#include "test_seed.hpp"

namespace nibble::engine {
namespace {

TEST(MemoryCheck, FitsToTheByteIsNotRefused) {
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  for (int i = 0; i < 1000; ++i) {
    const size_t free_b = rng() % (size_t{1} << 40);
    EXPECT_EQ(memory_refusal("X", static_cast<int64_t>(free_b), free_b, free_b * 2), "");
    EXPECT_NE(memory_refusal("X", static_cast<int64_t>(free_b) + 1, free_b, free_b * 2), "");
  }
}

TEST(MemoryCheck, MessageNamesWhatTheNumbersAndTheFix) {
  const std::string m = memory_refusal("fprop operands of qkv under quartet", int64_t{300} << 30,
                                       size_t{100} << 30, size_t{140} << 30);
  EXPECT_NE(m.find("fprop operands of qkv under quartet"), std::string::npos) << m;
  EXPECT_NE(m.find("307200 MiB"), std::string::npos) << m;
  EXPECT_NE(m.find("102400 MiB free of 143360 MiB"), std::string::npos) << m;
  EXPECT_NE(m.find("--mbs"), std::string::npos) << m;
  EXPECT_NE(m.find("refused before allocating"), std::string::npos) << m;
}

TEST(MemoryCheck, NothingNeededIsNeverRefused) {
  EXPECT_EQ(memory_refusal("X", 0, 0, 0), "");
  EXPECT_EQ(memory_refusal("X", -5, 0, 0), "");
}

}  // namespace
}  // namespace nibble::engine
