// Shared by the FP8-family kernel tests: device buffers, BF16 test tensors with a spread of
// magnitudes and planted edge cases, poisoned outputs, and first-mismatch reporting.
#pragma once
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "nibble/kernels/check.hpp"
#include "nibble/format.hpp"
#include "test_seed.hpp"

namespace nibble::testing {

template <typename T>
struct DeviceBuffer {
  T* ptr = nullptr;
  size_t n = 0;
  explicit DeviceBuffer(size_t count) : n(count) { NIBBLE_CUDA_CHECK(cudaMalloc(&ptr, count * sizeof(T) + 16)); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(ptr); }
  void upload(const std::vector<T>& h) { NIBBLE_CUDA_CHECK(cudaMemcpy(ptr, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice)); }
  std::vector<T> download() const {
    std::vector<T> h(n);
    NIBBLE_CUDA_CHECK(cudaDeviceSynchronize());
    NIBBLE_CUDA_CHECK(cudaMemcpy(h.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
  void poison(uint8_t byte) { NIBBLE_CUDA_CHECK(cudaMemset(ptr, byte, n * sizeof(T))); }
};

// Two poison patterns: an element the kernel forgot is caught unless its expected value equals
// both patterns, which no code or float does.
inline constexpr uint8_t kPoisons[2] = {0xA5, 0x5A};

// BF16 normals whose magnitude varies per 32-element run (2^-20 .. 2^12), so blocks get very
// different scales; then planted edge cases: an all-zero 128-row-block stretch, NaN, +-inf, BF16
// subnormals, E4M3 rounding ties (1.0625 = halfway between 1 and 1.125), E4M3 max and just above.
// `edges` = false leaves a clean tensor (for per-tensor scales that a NaN would reset to 1).
inline std::vector<uint16_t> make_bf16_tensor(std::mt19937_64& rng, int64_t rows, int64_t cols, bool edges) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-20, 12);
  std::vector<uint16_t> x(static_cast<size_t>(rows * cols));
  float mag = 1.0f;
  for (size_t i = 0; i < x.size(); ++i) {
    if (i % 32 == 0) mag = std::ldexp(1.0f, expo(rng));
    uint16_t b = fmt::encode_bf16(normal(rng) * mag);
    if (b == 0 || b == 0x8000) b = 0x3f80;  // never zeros as data (zeros are planted on purpose)
    x[i] = b;
  }
  if (!edges) return x;
  // All-zero 1x128 run on row 1 (also a zero 32-block for MX) and a zero column stretch.
  for (int64_t c = 0; c < std::min<int64_t>(cols, 128); ++c) x[static_cast<size_t>(1 * cols + c)] = 0;
  for (int64_t r = 0; r < std::min<int64_t>(rows, 32); ++r) x[static_cast<size_t>(r * cols + cols - 1)] = 0x8000;
  // All-subnormal 1x128 run on row 2 and 32-row stretch of column 0 (MX: a block whose amax is a
  // subnormal gets scale code 0, i.e. its elements are multiplied by 2^127 before encoding).
  std::uniform_int_distribution<int> subnormal(1, 0x7f);
  auto tiny = [&] { return static_cast<uint16_t>(subnormal(rng) | (rng() & 1 ? 0x8000 : 0)); };
  if (rows > 2) {
    for (int64_t c = 0; c < std::min<int64_t>(cols, 128); ++c) x[static_cast<size_t>(2 * cols + c)] = tiny();
  }
  for (int64_t r = 32; r < std::min<int64_t>(rows, 64); ++r) x[static_cast<size_t>(r * cols)] = tiny();
  std::uniform_int_distribution<int64_t> pick(0, rows * cols - 1);
  const uint16_t planted[] = {0x7fc0, 0xffc0, 0x7f80, 0xff80, 0x0001, 0x8003, 0x007f, 0x3f88 /*1.0625*/,
                              0xbf88, 0x3f90 /*1.125*/, 0x43e0 /*448*/, 0x43f0 /*480*/, 0x4400 /*512*/};
  for (int rep = 0; rep < 4; ++rep) {
    for (uint16_t p : planted) x[static_cast<size_t>(pick(rng))] = p;
  }
  return x;
}

inline float bf16f(uint16_t b) { return fmt::decode_bf16(b); }

// Compares got with expected; on mismatch prints the first one (index, input, got, expected) and
// the count. `input_of(i)` describes the input behind output element i.
template <typename T, typename InputOf>
::testing::AssertionResult same_bits(const char* what, const std::vector<T>& got, const std::vector<T>& want,
                                     InputOf input_of) {
  if (got.size() < want.size()) return ::testing::AssertionFailure() << what << ": output too small";
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
      if (bad++ == 0) first = i;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  auto show = [](T v) {
    if constexpr (std::is_same_v<T, float>) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%a (0x%08x)", v, fmt::float_bits(v));
      return std::string(buf);
    } else {
      char buf[32];
      std::snprintf(buf, sizeof buf, "0x%0*x", static_cast<int>(2 * sizeof(T)), static_cast<unsigned>(v));
      return std::string(buf);
    }
  };
  return ::testing::AssertionFailure() << what << ": " << bad << " of " << want.size() << " differ; first at index "
                                       << first << " (input " << input_of(first) << "): got " << show(got[first])
                                       << ", expected " << show(want[first]);
}

inline std::string describe_bf16(uint16_t b) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a bf16 0x%04x", static_cast<double>(bf16f(b)), b);
  return buf;
}

}  // namespace nibble::testing
