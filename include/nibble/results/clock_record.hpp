// What the GPU's clocks did while a benchmark ran: samples of the SM clock, the board power and the
// clock event ("throttle") reasons, taken by the engine's clock monitor (NVML, src/engine/clock_monitor)
// every few tens of milliseconds, and their summary as stored in a result (JSON
// gpu_info.clocks_during_run). Why it matters: on our H100 and H200 the GPU sat at its power cap for
// 98% of a `nibble bench` run with the SM clock moving between ~1000 and 1980 MHz, so the same GEMM
// timed in two rows of one run differed by up to 15-30% (docs/timing-noise.md). A result that says
// so lets its reader weigh small differences between recipes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace nibble::bench {

// Clock event reason bits, as NVML reports them (nvmlClocksEventReason* / nvmlClocksThrottleReason*
// in the NVML API reference).
namespace clock_reason {
inline constexpr uint64_t kGpuIdle = 0x1;
inline constexpr uint64_t kSwPowerCap = 0x4;
inline constexpr uint64_t kHwSlowdown = 0x8;
inline constexpr uint64_t kSwThermalSlowdown = 0x20;
inline constexpr uint64_t kHwThermalSlowdown = 0x40;
inline constexpr uint64_t kHwPowerBrakeSlowdown = 0x80;
inline constexpr uint64_t kPower = kSwPowerCap | kHwPowerBrakeSlowdown;
inline constexpr uint64_t kThermal = kSwThermalSlowdown | kHwThermalSlowdown | kHwSlowdown;
}  // namespace clock_reason

struct ClockSample {
  double sm_clock_mhz = 0;
  double power_w = 0;    // board power draw; 0 when the GPU does not report it
  uint64_t reasons = 0;  // clock_reason bits active at the sample
};

struct ClockRecord {
  bool available = false;  // false: no samples (no NVML, a predicted result, an older file)
  std::string source;      // how the samples were taken, or why there are none
  int samples = 0;
  double sm_clock_mhz_min = 0, sm_clock_mhz_median = 0, sm_clock_mhz_max = 0;
  double power_w_max = 0;
  double power_capped_fraction = 0;  // samples with a power reason (software power cap, power brake)
  double thermal_fraction = 0;       // samples with a thermal or hardware slowdown reason
};

// The summary of a run's samples. No samples: available = false, source = `source` (the reason).
ClockRecord summarize_clock_samples(const std::vector<ClockSample>& samples, const std::string& source);

// One sentence for a report header: "SM clock 1125-1980 MHz (median 1485) over 1361 samples (...), power up to
// 713 W, at the power cap in 98% of the samples", or "not recorded: <source>".
std::string clock_record_text(const ClockRecord& c);
// The header line's sentence, "GPU clocks during the run: " + clock_record_text(c) (no newline): the
// terminal, HTML and compare renderers all print it.
std::string clock_header(const ClockRecord& c);

// True when the clocks moved enough to matter for comparing rows: the GPU sat at a power or thermal limit
// in at least a quarter of the samples, or the SM clock's lowest sample was more than 10% below its highest.
bool clocks_varied(const ClockRecord& c);

}  // namespace nibble::bench
