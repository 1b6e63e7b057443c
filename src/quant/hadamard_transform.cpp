// Row-wise block Hadamard rotations of whole tensors, and the Quartet backward epilogue.
#include <string>

#include "nibble/quant/hadamard.hpp"
#include "nibble/quant/quantizers.hpp"
#include "shape_checks.hpp"

namespace nibble::quant {

void hadamard_transform(float* x, int64_t rows, int64_t cols, const Rotation& rotation, bool inverse) {
  detail::require_input("hadamard_transform", x, rows, cols);
  detail::require_hadamard_size("hadamard_transform", rotation.size);
  detail::require_blocks("hadamard_transform", rows, cols, 1, rotation.size);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; c += rotation.size) {
      float* v = x + r * cols + c;
      if (inverse) rotate_block_inverse(v, rotation);
      else rotate_block_forward(v, rotation);
    }
  }
}

std::vector<float> quartet_dgrad_epilogue(const float* g, int64_t rows, int64_t cols,
                                          const std::vector<uint8_t>& mask, const Rotation& rotation) {
  detail::require_input("quartet_dgrad_epilogue", g, rows, cols);
  const size_t n = static_cast<size_t>(rows * cols);
  if (!mask.empty() && mask.size() != (n + 7) / 8) {
    throw std::invalid_argument("quartet_dgrad_epilogue: mask has " + std::to_string(mask.size()) +
                                " bytes; a " + std::to_string(rows) + "x" + std::to_string(cols) +
                                " gradient needs " + std::to_string((n + 7) / 8) + " (one bit per element)");
  }
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    const bool keep = mask.empty() || ((mask[i / 8] >> (i % 8)) & 1);
    out[i] = keep ? g[i] * kQuartetGemmRescale : 0.0f;
  }
  if (rotation.size != 0) hadamard_transform(out.data(), rows, cols, rotation, /*inverse=*/true);
  return out;
}

}  // namespace nibble::quant
