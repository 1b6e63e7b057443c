// The engine's GPU clock sampler: with NVML and a GPU it takes samples; without them (the CI machine) it
// says why and records none. Either way stop() may be called again and the thread is gone.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "../../src/engine/clock_monitor.hpp"

namespace nibble::engine {
namespace {

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
