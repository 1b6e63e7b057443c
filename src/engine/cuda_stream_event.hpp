// Owned CUDA streams and events for the benchmark engine: released on every path out of a sweep,
// including a row's exception, so that a failed row leaks nothing into the next one.
#pragma once
#include <cuda_runtime.h>

#include <utility>

#include "nibble/kernels/check.hpp"

namespace nibble::engine {

// A non-blocking stream (it does not synchronise with the legacy default stream).
class Stream {
 public:
  Stream() { NIBBLE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~Stream() {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  Stream(Stream&& o) noexcept : stream_(std::exchange(o.stream_, nullptr)) {}
  Stream& operator=(Stream&&) = delete;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// A timing event (cudaEventCreate's default flags).
class Event {
 public:
  Event() { NIBBLE_CUDA_CHECK(cudaEventCreate(&event_)); }
  ~Event() {
    if (event_ != nullptr) cudaEventDestroy(event_);
  }
  Event(Event&& o) noexcept : event_(std::exchange(o.event_, nullptr)) {}
  Event& operator=(Event&&) = delete;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace nibble::engine
