// Shared by the gpu-labelled tests: skip (and say why) only when the machine has no CUDA device, fail
// when CUDA is broken (gpu_skip.hpp has the rules); a device buffer poisoned on allocation; grid scales
// placed in cuBLASLt's tiled layout.
#pragma once
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "gpu_skip.hpp"
#include "nibble/kernels/check.hpp"
#include "nibble/kernels/scale_layout.hpp"

namespace nibble::testing {

static_assert(kCudaSuccess == cudaSuccess && kCudaErrorNoDevice == cudaErrorNoDevice &&
                  kCudaErrorInsufficientDriver == cudaErrorInsufficientDriver,
              "gpu_skip.hpp's error codes must be the CUDA runtime's");

// Whether the NVIDIA driver library is installed (the runtime answers cudaErrorInsufficientDriver both
// without one and with one too old).
inline bool cuda_driver_library_present() {
  void* h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (h != nullptr) dlclose(h);
  return h != nullptr;
}

// Asked once per process; NIBBLE_TEST_CUDA_ERROR / NIBBLE_TEST_CUDA_DRIVER may replace the answer.
inline const GpuCheck& cuda_gpu_check() {
  static const GpuCheck check = [] {
    DeviceCountAnswer a;
    const cudaError_t err = cudaGetDeviceCount(&a.count);
    a.error = static_cast<int>(err);
    a.error_name = cudaGetErrorName(err);
    a.driver_library_present = cuda_driver_library_present();
    return judge_device_count(with_injection(a));
  }();
  return check;
}

}  // namespace nibble::testing

// Use at the top of every GPU test body.
#define NIBBLE_REQUIRE_GPU() NIBBLE_REQUIRE_GPU_CHECK(::nibble::testing::cuda_gpu_check())

// A device buffer for the FP4 kernel tests: poisoned with 0xA5 bytes on allocation (16 spare bytes
// past the end as well), so an element a kernel should have written but did not shows as a mismatch.
namespace nibble::test {

template <class T>
struct DeviceBuffer {
  T* p = nullptr;
  size_t n = 0;
  explicit DeviceBuffer(size_t count) : n(count) {
    NIBBLE_CUDA_CHECK(cudaMalloc(&p, count * sizeof(T) + 16));
    NIBBLE_CUDA_CHECK(cudaMemset(p, 0xA5, count * sizeof(T) + 16));  // poison: unwritten bytes show
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(p); }
  void upload(const std::vector<T>& h) {
    NIBBLE_CUDA_CHECK(cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    NIBBLE_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<T> h(n);
    NIBBLE_CUDA_CHECK(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
};

}  // namespace nibble::test

// For the MX kernel tests: grid E8M0 scales placed in cuBLASLt's 128x4 tiles.
namespace nibble::testing {

// Grid scales [n_rows, k / 32] in the tiled layout (scale_layout::tiled_index); padding bytes are `fill`
// (0: what the quantizers write; a poison value: an input whose padding must not be read).
inline std::vector<uint8_t> tiled_from_grid(const std::vector<uint8_t>& grid, int64_t n_rows, int64_t k,
                                            uint8_t fill = 0) {
  namespace sl = cuda::scale_layout;
  std::vector<uint8_t> t(static_cast<size_t>(sl::tiled_count(n_rows, k, 32)), fill);
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t b = 0; b < k / 32; ++b)
      t[static_cast<size_t>(sl::tiled_index(k, 32, r, 32 * b))] = grid[static_cast<size_t>(r * (k / 32) + b)];
  return t;
}

}  // namespace nibble::testing
