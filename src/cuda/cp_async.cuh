// cp.async (sm_80+): 16-byte copies from global to shared memory that do not pass through registers,
// so a CTA whose tile is in flight holds no data registers. Used by the tiles' cp.async variants
// (fp8_tile::load_tile_async, rowcol::Bf16TileLoader::fetch_async). Private to src/cuda.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "nibble/cuda/check.hpp"

namespace nibble::cuda::async_copy {

// Copies 16 bytes from gmem to smem (both 16-byte aligned), cached in L2 only (.cg). With
// valid == false nothing is read and the 16 bytes are zero-filled (source size 0).
__device__ __forceinline__ void copy16(void* smem, const void* gmem, bool valid = true) {
  const auto dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(valid ? 16 : 0)
               : "memory");
}

// Closes this thread's copies issued so far into one group.
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// Waits until all of this thread's copies have landed (other threads' copies need a __syncthreads
// after every thread waited).
__device__ __forceinline__ void wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// Host: asks for the SM configuration with the most shared memory for kKernel (once per process), so
// that the CTAs a cp.async variant's launch bounds plan for (up to 6 x 33 KB) fit on an SM.
template <auto kKernel>
void prefer_max_shared() {
  static const bool done = [] {
    NIBBLE_CUDA_CHECK(cudaFuncSetAttribute(kKernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                           static_cast<int>(cudaSharedmemCarveoutMaxShared)));
    return true;
  }();
  (void)done;
}

}  // namespace nibble::cuda::async_copy
