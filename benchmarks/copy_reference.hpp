// The device-to-device copy that both kernel benchmarks divide by (each kernel's ratio to a copy measured
// in the same run), timed with its destination at several placements inside one buffer; the fastest is
// the reference. Why: a 4096 x 16384 BF16 weight is exactly 2^27 bytes, and cudaMalloc can place the
// source and destination whole multiples of that apart, where the copy runs at 2.43-2.47 TB/s on an
// H100 against 2.78 TB/s for the same bytes placed otherwise: such a slow reference inflates every
// weight-row ratio by ~13%. The copy is the yardstick for what the
// memory can do, so it must not pay for an unlucky placement; every placement's median goes to the JSON.
#pragma once
#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "event_timing.hpp"
#include "nibble/kernels/check.hpp"

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
