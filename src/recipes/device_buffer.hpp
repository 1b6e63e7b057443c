// Owned device memory for the benchmark engine. Allocation failures become OutOfMemory with the
// size and what it was for, so a benchmark row can report it and the run can go on.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "nibble/kernels/check.hpp"

namespace nibble::recipes {

struct OutOfMemory : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(size_t bytes, const std::string& what) : bytes_(bytes) {
    if (bytes == 0) return;
    const cudaError_t e = cudaMalloc(&ptr_, bytes);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      throw OutOfMemory("out of GPU memory: " + what + " needs " + std::to_string(bytes >> 20) + " MiB, " +
                        std::to_string(free_b >> 20) + " MiB free of " + std::to_string(total_b >> 20) +
                        " MiB; try a smaller --mbs or --seq");
    }
    NIBBLE_CUDA_CHECK(e);
  }
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; o.bytes_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      if (ptr_) cudaFree(ptr_);
      ptr_ = o.ptr_;
      bytes_ = o.bytes_;
      o.ptr_ = nullptr;
      o.bytes_ = 0;
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  template <class T = void>
  T* as() const { return static_cast<T*>(ptr_); }
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Fills n BF16 values (raw bits) with normal samples of standard deviation `stddev` from a
// counter-based generator keyed by `seed`: random, non-zero data, reproducible per seed.
void fill_random_bf16(uint16_t* out, int64_t n, uint64_t seed, float stddev, cudaStream_t stream);

}  // namespace nibble::recipes
