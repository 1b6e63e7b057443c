// How both kernel benchmarks time a call, and the copy they divide by (at the end): CUDA events
// around each call, median and p10/p90 over the calls, after 3 warm-up calls.
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
#include <array>
#include <cstddef>
#include <cstdint>
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

// The device-to-device copy that both kernel benchmarks divide by (each kernel's ratio to a copy measured
// in the same run), timed with its destination at several placements inside one buffer; the fastest is
// the reference. Why: a 4096 x 16384 BF16 weight is exactly 2^27 bytes, and cudaMalloc can place the
// source and destination whole multiples of that apart, where the copy runs at 2.43-2.47 TB/s on an
// H100 against 2.78 TB/s for the same bytes placed otherwise: such a slow reference inflates every
// weight-row ratio by ~13%. The copy is the yardstick for what the
// memory can do, so it must not pay for an unlucky placement; every placement's median goes to the JSON.
namespace nibble::kernel_bench {

// Destination offsets in bytes (multiples of 4 KiB, not of any large power of two but the first).
inline constexpr std::array<size_t, 3> kCopyShifts = {0, (size_t{1} << 20) + 4096, (size_t{3} << 24) + 12288};
// What the destination buffer needs beyond the copied bytes.
inline constexpr size_t kCopySlack = (size_t{3} << 24) + 12288;

struct CopyReference {
  Stats best;                        // the fastest placement's timing
  std::vector<double> placement_ms;  // each placement's median, in kCopyShifts order
};

// Times the copy of src[i % sources] (bytes each) at call i, `calls` calls per placement, as time_calls does
// the kernels; dst holds bytes + kCopySlack bytes.
inline CopyReference time_copy_reference(int calls, Timing mode, void* dst, const void* const* src, int sources,
                                         size_t bytes) {
  CopyReference ref;
  for (size_t k = 0; k < kCopyShifts.size(); ++k) {
    uint8_t* d = static_cast<uint8_t*>(dst) + kCopyShifts[k];
    const Stats st = time_calls([&](int i) {
      NIBBLE_CUDA_CHECK(cudaMemcpyAsync(d, src[i % sources], bytes, cudaMemcpyDeviceToDevice));
    }, calls, mode);
    ref.placement_ms.push_back(st.median_ms);
    if (k == 0 || st.median_ms < ref.best.median_ms) ref.best = st;
  }
  return ref;
}

}  // namespace nibble::kernel_bench
