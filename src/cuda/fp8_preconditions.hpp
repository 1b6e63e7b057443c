// Host-side checks every FP8-family launcher runs before touching the device: a violated layout
// assumption becomes a std::invalid_argument that names the argument and the fix, never a fault.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

#include "nibble/quant/formats.hpp"

namespace nibble::cuda::fp8_check {

inline void positive_shape(const char* fn, int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0) {
    throw std::invalid_argument(std::string(fn) + ": shape " + std::to_string(rows) + "x" + std::to_string(cols) +
                                " is empty; rows and cols must be positive");
  }
  if (rows > (int64_t{1} << 31) || cols > (int64_t{1} << 31)) {
    throw std::invalid_argument(std::string(fn) + ": shape " + std::to_string(rows) + "x" + std::to_string(cols) +
                                " exceeds 2^31 along one dimension; split the tensor");
  }
}

inline void multiple_of(const char* fn, const char* what, int64_t value, int64_t m, const char* why) {
  if (value % m != 0) {
    throw std::invalid_argument(std::string(fn) + ": " + what + " = " + std::to_string(value) +
                                " is not a multiple of " + std::to_string(m) + " (" + why +
                                "); pad the tensor to a multiple of " + std::to_string(m));
  }
}

inline void aligned16(const char* fn, const char* what, const void* p) {
  if (p != nullptr && reinterpret_cast<uintptr_t>(p) % 16 != 0) {
    throw std::invalid_argument(std::string(fn) + ": " + what +
                                " is not 16-byte aligned (the kernel uses 16-byte vector accesses); "
                                "pass a cudaMalloc'd pointer or an offset that is a multiple of 16 bytes");
  }
}

inline void not_null(const char* fn, const char* what, const void* p) {
  if (p == nullptr) throw std::invalid_argument(std::string(fn) + ": " + what + " is null; pass a device pointer");
}

inline void fp8_format(const char* fn, quant::ElementFormat f) {
  if (f != quant::ElementFormat::e4m3 && f != quant::ElementFormat::e5m2) {
    throw std::invalid_argument(std::string(fn) + ": format must be e4m3 or e5m2 (hybrid recipes: e4m3 for X and W, "
                                "e5m2 for dY)");
  }
}

}  // namespace nibble::cuda::fp8_check
