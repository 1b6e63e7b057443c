// Host-side preconditions every kernel launcher checks before touching the device: a violated
// layout assumption becomes a std::invalid_argument that names the function, the argument and the
// fix, never a fault or a silent wrong answer.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

namespace nibble::cuda {

inline void check_shape(const char* fn, int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0) {
    throw std::invalid_argument(std::string(fn) + ": shape " + std::to_string(rows) + "x" + std::to_string(cols) +
                                " is empty; rows and cols must be positive");
  }
  if (rows > (int64_t{1} << 31) || cols > (int64_t{1} << 31)) {
    throw std::invalid_argument(std::string(fn) + ": shape " + std::to_string(rows) + "x" + std::to_string(cols) +
                                " exceeds 2^31 along one dimension; split the tensor");
  }
}

inline void check_multiple(const char* fn, const char* what, int64_t value, int64_t m, const char* why) {
  if (value % m != 0) {
    throw std::invalid_argument(std::string(fn) + ": " + what + " = " + std::to_string(value) +
                                " is not a multiple of " + std::to_string(m) + " (" + why +
                                "); pad the tensor to a multiple of " + std::to_string(m));
  }
}

inline void check_aligned(const char* fn, const char* what, const void* p, int64_t bytes = 16) {
  if (p != nullptr && reinterpret_cast<uintptr_t>(p) % bytes != 0) {
    throw std::invalid_argument(std::string(fn) + ": " + what + " is not " + std::to_string(bytes) +
                                "-byte aligned (the kernel uses " + std::to_string(bytes) +
                                "-byte vector accesses); pass a cudaMalloc'd pointer or an offset that is a multiple "
                                "of " + std::to_string(bytes) + " bytes");
  }
}

inline void check_not_null(const char* fn, const char* what, const void* p) {
  if (p == nullptr) throw std::invalid_argument(std::string(fn) + ": " + what + " is null; pass a device pointer");
}

}  // namespace nibble::cuda
