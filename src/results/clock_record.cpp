// Summaries of the GPU clock samples a benchmark took (include/nibble/results/clock_record.hpp).
#include "nibble/results/clock_record.hpp"
#include "nibble/results/result.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace nibble::bench {

ClockRecord summarize_clock_samples(const std::vector<ClockSample>& samples, const std::string& source) {
  ClockRecord c;
  c.source = source;
  if (samples.empty()) return c;
  c.available = true;
  c.samples = static_cast<int>(samples.size());
  std::vector<double> mhz;
  mhz.reserve(samples.size());
  int power = 0, thermal = 0;
  for (const ClockSample& s : samples) {
    mhz.push_back(s.sm_clock_mhz);
    c.power_w_max = std::max(c.power_w_max, s.power_w);
    power += (s.reasons & clock_reason::kPower) != 0;
    thermal += (s.reasons & clock_reason::kThermal) != 0;
  }
  const auto [lo, hi] = std::minmax_element(mhz.begin(), mhz.end());
  c.sm_clock_mhz_min = *lo;
  c.sm_clock_mhz_max = *hi;
  const size_t n = mhz.size();
  c.sm_clock_mhz_median = median(mhz);
  c.power_capped_fraction = static_cast<double>(power) / static_cast<double>(n);
  c.thermal_fraction = static_cast<double>(thermal) / static_cast<double>(n);
  return c;
}

std::string clock_header(const ClockRecord& c) { return "GPU clocks during the run: " + clock_record_text(c); }

std::string clock_record_text(const ClockRecord& c) {
  if (!c.available) return "not recorded" + (c.source.empty() ? std::string() : ": " + c.source);
  std::string out = fmt::format("SM clock {:.0f}-{:.0f} MHz (median {:.0f}) over {} samples ({})", c.sm_clock_mhz_min,
                                c.sm_clock_mhz_max, c.sm_clock_mhz_median, c.samples, c.source);
  if (c.power_w_max > 0) out += fmt::format(", power up to {:.0f} W", c.power_w_max);
  out += fmt::format(", at the power cap in {:.0f}% of the samples", 100.0 * c.power_capped_fraction);
  if (c.thermal_fraction > 0) out += fmt::format(", thermally slowed in {:.0f}%", 100.0 * c.thermal_fraction);
  return out;
}

bool clocks_varied(const ClockRecord& c) {
  if (!c.available) return false;
  return c.power_capped_fraction >= 0.25 || c.thermal_fraction >= 0.25 || c.sm_clock_mhz_min < 0.9 * c.sm_clock_mhz_max;
}

}  // namespace nibble::bench
