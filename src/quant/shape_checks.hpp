// Input checks shared by the reference quantizers; messages name the field and the fix.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

namespace nibble::quant::detail {

inline void require_input(const char* who, const float* x, int64_t rows, int64_t cols) {
  if (x == nullptr) {
    throw std::invalid_argument(std::string(who) + ": no input data; pass a tensor with at least one element");
  }
  if (rows <= 0 || cols <= 0) {
    throw std::invalid_argument(std::string(who) + ": rows (" + std::to_string(rows) + ") and cols (" +
                                std::to_string(cols) + ") must both be positive");
  }
}

// Blocks of block_rows x block_cols must tile rows x cols exactly.
inline void require_blocks(const char* who, int64_t rows, int64_t cols, int64_t block_rows, int64_t block_cols) {
  if (cols % block_cols != 0) {
    throw std::invalid_argument(std::string(who) + ": cols " + std::to_string(cols) +
                                " is not divisible by the block width " + std::to_string(block_cols) +
                                " (blocks run along cols, the GEMM's inner dimension); pad cols to a multiple of " +
                                std::to_string(block_cols) + " or pick a per-tensor recipe");
  }
  if (rows % block_rows != 0) {
    throw std::invalid_argument(std::string(who) + ": rows " + std::to_string(rows) +
                                " is not divisible by the block height " + std::to_string(block_rows) +
                                "; pad rows to a multiple of " + std::to_string(block_rows) +
                                " or pick a per-tensor recipe");
  }
}

inline void require_hadamard_size(const char* who, int size) {
  if (!(size == 16 || size == 32 || size == 64 || size == 128)) {
    throw std::invalid_argument(std::string(who) + ": hadamard size " + std::to_string(size) +
                                " is not supported; use 16, 32, 64 or 128");
  }
}

}  // namespace nibble::quant::detail
