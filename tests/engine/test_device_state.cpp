// What the engine reads of the device's state around the timed work, on the host. The pre-allocation
// refusal: a row that cannot fit in the free memory is refused with its numbers, one that fits (to the byte)
// is not. The GPU clock sampler: with NVML and a GPU it takes samples; without them (the CI machine) it says
// why and records none; either way stop() may be called again and the thread is gone.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <thread>

#include "../../src/engine/clock_monitor.hpp"
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

TEST(ClockMonitor, SamplesOrSaysWhyNot) {
  ClockMonitor m(0, 10);
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  const bench::ClockRecord c = m.stop();
  ASSERT_FALSE(c.source.empty());
  if (c.available) {
    EXPECT_GE(c.samples, 2);
    EXPECT_GT(c.sm_clock_mhz_min, 0);
    EXPECT_LE(c.sm_clock_mhz_min, c.sm_clock_mhz_max);
    EXPECT_EQ(c.source, "NVML, every 10 ms");
    EXPECT_NE(m.driver_version().find('.'), std::string::npos) << m.driver_version();
  } else {
    EXPECT_EQ(c.samples, 0);
    EXPECT_EQ(m.driver_version(), "");
    EXPECT_NE(c.source.find("NVML"), std::string::npos) << c.source;
  }
  const bench::ClockRecord again = m.stop();  // idempotent: the same record, no more samples
  EXPECT_EQ(again.samples, c.samples);
  EXPECT_EQ(again.source, c.source);
}

}  // namespace
}  // namespace nibble::engine
