// Samples the GPU's SM clock, board power and clock event reasons while a benchmark runs, on a host
// thread, through NVML loaded at run time (dlopen of libnvidia-ml.so.1, which the NVIDIA driver
// installs): no build dependency, and a machine without the driver or without NVML simply records why
// there are no samples. The summary goes into the result (bench::ClockRecord).
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nibble/results/clock_record.hpp"

namespace nibble::engine {

class ClockMonitor {
 public:
  // Starts sampling the CUDA device `device` every `period_ms`; when NVML is missing or does not know
  // the device, no thread starts and stop() returns an unavailable record saying why.
  explicit ClockMonitor(int device, int period_ms = 50);
  ~ClockMonitor();
  ClockMonitor(const ClockMonitor&) = delete;
  ClockMonitor& operator=(const ClockMonitor&) = delete;

  // Stops sampling (idempotent) and summarizes the samples taken so far.
  bench::ClockRecord stop();
  // The NVIDIA driver's version as NVML reports it ("580.159.04"); "" without NVML.
  const std::string& driver_version() const { return driver_version_; }

 private:
  struct Nvml;
  std::unique_ptr<Nvml> nvml_;
  std::string why_not_;  // why there is no sampler ("" while one runs)
  std::string driver_version_;
  int period_ms_;
  std::atomic<bool> running_{false};
  std::thread thread_;
  std::mutex mutex_;
  std::vector<bench::ClockSample> samples_;
};

}  // namespace nibble::engine
