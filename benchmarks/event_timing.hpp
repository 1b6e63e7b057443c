// How both kernel benchmarks time a call (and the copy they divide by): CUDA events around each call,
// median and p10/p90 over the calls, after 3 warm-up calls.
//  - synced (the default): the host waits for each call before it enqueues the next, so a call's time
//    also holds the host's launch latency wherever the GPU finishes an operation before the next one
//    arrives;
//  - queued (--timing queued): the calls are enqueued back to back with their events and the host waits once
//    at the end, so each call's time is what it takes on the GPU with its work already queued, as in a
//    training step, where the host runs ahead of the GPU.
// Either way the events bracket exactly one call, so a call's own gaps between its kernels count. On an
// H100 queued timing takes 1.1-4.9 us off every call, the copy's included: ratios to the copy move by
// -1% to +6%.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <vector>

#include "nibble/kernels/check.hpp"

namespace nibble::kernel_bench {

enum class Timing { queued, synced };

inline const char* timing_name(Timing t) { return t == Timing::queued ? "queued" : "synced"; }

// Parses a --timing value; false for anything else.
inline bool parse_timing(const char* s, Timing& t) {
  if (std::strcmp(s, "queued") == 0) t = Timing::queued;
  else if (std::strcmp(s, "synced") == 0) t = Timing::synced;
  else return false;
  return true;
}

struct Stats {
  double median_ms, p10_ms, p90_ms;
};

// Times work(i) for i = 0 .. calls - 1 (after work(0..2) as warm-up); work gets the call index so that callers
// rotate their inputs over buffers that together exceed the L2, and no call reads what the previous one cached.
inline Stats time_calls(const std::function<void(int)>& work, int calls, Timing mode) {
  for (int i = 0; i < 3; ++i) work(i);
  NIBBLE_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<cudaEvent_t> ev(2 * static_cast<size_t>(calls));
  for (cudaEvent_t& e : ev) NIBBLE_CUDA_CHECK(cudaEventCreate(&e));
  for (int i = 0; i < calls; ++i) {
    NIBBLE_CUDA_CHECK(cudaEventRecord(ev[2 * i]));
    work(i);
    NIBBLE_CUDA_CHECK(cudaEventRecord(ev[2 * i + 1]));
    if (mode == Timing::synced) NIBBLE_CUDA_CHECK(cudaEventSynchronize(ev[2 * i + 1]));
  }
  NIBBLE_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<double> ms;
  for (int i = 0; i < calls; ++i) {
    float t = 0;
    NIBBLE_CUDA_CHECK(cudaEventElapsedTime(&t, ev[2 * i], ev[2 * i + 1]));
    ms.push_back(t);
  }
  for (cudaEvent_t e : ev) NIBBLE_CUDA_CHECK(cudaEventDestroy(e));
  std::sort(ms.begin(), ms.end());
  auto q = [&](double p) { return ms[static_cast<size_t>(p * (ms.size() - 1) + 0.5)]; };
  return {q(0.5), q(0.1), q(0.9)};
}

}  // namespace nibble::kernel_bench
