// The GPU clock record of a measured run: its summary of the samples, its JSON (gpu_info.clocks_during_run)
// and the reader's errors.
#include "handmade_result.hpp"
#include "nibble/results/clock_record.hpp"
#include "test_seed.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace nibble::bench {
namespace {

using nlohmann::json;

std::vector<ClockSample> random_samples(std::mt19937_64& rng, size_t n) {
  // Reason words mix the bits a sampler sees: idle, power cap, power brake, thermal and hardware slowdowns.
  const uint64_t words[] = {0,
                            clock_reason::kGpuIdle,
                            clock_reason::kSwPowerCap,
                            clock_reason::kSwPowerCap | clock_reason::kGpuIdle,
                            clock_reason::kHwPowerBrakeSlowdown,
                            clock_reason::kSwThermalSlowdown,
                            clock_reason::kHwThermalSlowdown | clock_reason::kSwPowerCap,
                            clock_reason::kHwSlowdown};
  std::vector<ClockSample> s(n);
  for (auto& x : s) {
    x.sm_clock_mhz = std::uniform_int_distribution<int>(345, 1980)(rng);
    x.power_w = std::uniform_real_distribution<double>(60, 720)(rng);
    x.reasons = words[std::uniform_int_distribution<size_t>(0, std::size(words) - 1)(rng)];
  }
  return s;
}

TEST(ClockRecord, SummaryOfTheSamples) {
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  for (size_t n : {size_t{1}, size_t{2}, size_t{7}, size_t{1000}}) {
    const auto s = random_samples(rng, n);
    const ClockRecord c = summarize_clock_samples(s, "test sampler");
    ASSERT_TRUE(c.available);
    EXPECT_EQ(c.source, "test sampler");
    EXPECT_EQ(c.samples, static_cast<int>(n));
    std::vector<double> mhz;
    double power = 0;
    int capped = 0, hot = 0;
    for (const auto& x : s) {
      mhz.push_back(x.sm_clock_mhz);
      power = std::max(power, x.power_w);
      capped += (x.reasons & (0x4 | 0x80)) != 0;
      hot += (x.reasons & (0x8 | 0x20 | 0x40)) != 0;
    }
    std::sort(mhz.begin(), mhz.end());
    EXPECT_EQ(c.sm_clock_mhz_min, mhz.front());
    EXPECT_EQ(c.sm_clock_mhz_max, mhz.back());
    EXPECT_EQ(c.sm_clock_mhz_median, n % 2 ? mhz[n / 2] : (mhz[n / 2 - 1] + mhz[n / 2]) / 2);
    EXPECT_EQ(c.power_w_max, power);
    EXPECT_DOUBLE_EQ(c.power_capped_fraction, double(capped) / double(n));
    EXPECT_DOUBLE_EQ(c.thermal_fraction, double(hot) / double(n));
  }
  const ClockRecord none = summarize_clock_samples({}, "NVML not loaded");
  EXPECT_FALSE(none.available);
  EXPECT_EQ(clock_record_text(none), "not recorded: NVML not loaded");
  EXPECT_FALSE(clocks_varied(none));
}

TEST(ClockRecord, WhenTheClocksCountAsMoved) {
  std::vector<ClockSample> s(100, ClockSample{1980, 500, 0});
  EXPECT_FALSE(clocks_varied(summarize_clock_samples(s, "t")));
  for (int i = 0; i < 24; ++i) s[i].reasons = clock_reason::kSwPowerCap;
  EXPECT_FALSE(clocks_varied(summarize_clock_samples(s, "t")));  // 24% at the cap, clock steady
  s[24].reasons = clock_reason::kSwPowerCap;
  EXPECT_TRUE(clocks_varied(summarize_clock_samples(s, "t")));   // 25%
  for (auto& x : s) x.reasons = 0;
  s[50].sm_clock_mhz = 1781;  // 10.05% below the highest sample
  EXPECT_TRUE(clocks_varied(summarize_clock_samples(s, "t")));
  s[50].sm_clock_mhz = 1783;  // within 10%
  EXPECT_FALSE(clocks_varied(summarize_clock_samples(s, "t")));
}

TEST(ClockRecord, JsonRoundTripAndReaderErrors) {
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  BenchResult a = testing::handmade_result(rng);
  a.clocks = summarize_clock_samples(random_samples(rng, 321), "NVML, every 50 ms");
  const json j = to_json(a);
  const json& c = j["gpu_info"]["clocks_during_run"];
  for (const char* f : {"available", "source", "samples", "sm_clock_mhz_min", "sm_clock_mhz_median", "sm_clock_mhz_max",
                        "power_w_max", "power_capped_fraction", "thermal_fraction"})
    EXPECT_TRUE(c.contains(f)) << f;
  const BenchResult b = result_from_json(json::parse(j.dump()));
  EXPECT_TRUE(b.clocks.available);
  EXPECT_EQ(b.clocks.samples, 321);
  EXPECT_EQ(b.clocks.source, a.clocks.source);
  EXPECT_DOUBLE_EQ(b.clocks.sm_clock_mhz_median, a.clocks.sm_clock_mhz_median);
  EXPECT_DOUBLE_EQ(b.clocks.power_capped_fraction, a.clocks.power_capped_fraction);
  EXPECT_EQ(to_json(b).dump(), j.dump());

  // A measured result written before clocks were recorded says so; a prediction says nothing.
  json old = j;
  old["gpu_info"].erase("clocks_during_run");
  const BenchResult o = result_from_json(old);
  EXPECT_FALSE(o.clocks.available);
  EXPECT_NE(o.clocks.source.find("written before nibble recorded clocks"), std::string::npos) << o.clocks.source;
  old["predicted"] = true;
  EXPECT_EQ(result_from_json(old).clocks.source, "");

  const std::vector<std::pair<std::function<void(json&)>, std::string>> spoiled = {
      {[](json& x) { x["available"] = "yes"; }, "clocks_during_run.available"},
      {[](json& x) { x["power_capped_fraction"] = 1.5; }, "a fraction of samples must lie in [0, 1]"},
      {[](json& x) { x["sm_clock_mhz_min"] = 3000; }, "min <= median <= max"},
      {[](json& x) { x.erase("sm_clock_mhz_max"); }, "clocks_during_run.sm_clock_mhz_max"},
      {[](json& x) { x = "fast"; }, "clocks_during_run: expected an object"},
  };
  for (const auto& [spoil, needle] : spoiled) {
    json x = j;
    spoil(x["gpu_info"]["clocks_during_run"]);
    try {
      result_from_json(x);
      ADD_FAILURE() << "accepted a spoiled clocks_during_run; expected: " << needle;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace nibble::bench
