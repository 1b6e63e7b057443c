// A device buffer for the FP4 kernel tests: poisoned with 0xA5 bytes on allocation (16 spare bytes
// past the end as well), so an element a kernel should have written but did not shows as a mismatch.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "nibble/kernels/check.hpp"

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
