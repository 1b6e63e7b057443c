// GPU timing for `nibble bench`: CUDA events around each repetition, warm-up first, an optional L2
// flush between repetitions (outside the timed region), median and spread reported.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <string>

namespace nibble::engine {

struct TimingStats {
  double median_ms = 0, p10_ms = 0, p90_ms = 0, min_ms = 0, max_ms = 0;
  int runs = 0;
};

struct TimingOptions {
  int warmup = 3;
  // After the `warmup` runs, keep running the work until this much GPU time has passed (0: off), so
  // a row is timed at the clocks and power the GPU settles at under that work, whatever ran before it.
  double warmup_ms = 0;
  int iters = 20;
  bool flush_l2 = true;  // write a buffer twice the L2 size between repetitions
};

// `work(stream, rep)` enqueues one repetition; `rep` lets callers rotate operand sets.
TimingStats time_on_gpu(const std::function<void(cudaStream_t, int)>& work, const TimingOptions& opt,
                        cudaStream_t stream);

struct GpuInfo {
  std::string name;
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  size_t l2_bytes = 0;
  size_t total_memory = 0;
  int sm_clock_mhz = 0;      // current SM clock read after warm-up (NVML-free: cudaDeviceGetAttribute)
  int memory_clock_mhz = 0;
  int memory_bus_bits = 0;   // cudaDevAttrGlobalMemoryBusWidth
  int driver_version = 0;    // cudaDriverGetVersion
  int runtime_version = 0;   // cudaRuntimeGetVersion
  size_t cublaslt_version = 0;
};

// Returns false (and fills nothing) when no CUDA device is present.
bool query_gpu(GpuInfo& info);

// Keeps the SMs busy for about `ms` milliseconds so clocks reach their boost state before timing.
void warm_up_clocks(double ms, cudaStream_t stream);

// Device-to-device copy bandwidth in bytes/s, counting bytes read plus bytes written.
double measure_copy_bandwidth(size_t bytes, const TimingOptions& opt, cudaStream_t stream);

}  // namespace nibble::engine
