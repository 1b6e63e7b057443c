// Test helper shared by the MX kernel tests: grid E8M0 scales placed in cuBLASLt's 128x4 tiles.
#pragma once
#include <cstdint>
#include <vector>

#include "nibble/kernels/scale_layout.hpp"

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
