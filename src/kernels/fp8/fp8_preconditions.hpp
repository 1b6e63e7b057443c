// The FP8-family launchers' own host-side check (the generic ones, shape, multiples, alignment and
// null pointers, are launch_checks.hpp's, which this includes).
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

#include "common/launch_checks.hpp"
#include "nibble/kernels/quantize_fp8.hpp"
#include "nibble/quant/formats.hpp"

namespace nibble::cuda::fp8_check {

inline void fp8_format(const char* fn, quant::ElementFormat f) {
  if (f != quant::ElementFormat::e4m3 && f != quant::ElementFormat::e5m2) {
    throw std::invalid_argument(std::string(fn) + ": format must be e4m3 or e5m2 (hybrid recipes: e4m3 for X and W, "
                                "e5m2 for dY)");
  }
}

// The BF16 input and FP8 outputs of the 128x128-tile kernels (cast + transpose, 1x128 / 128x128
// blocks): 16-byte row-wise loads and stores and 16-byte column-wise stores.
inline void tile_io(const char* fn, const uint16_t* x, int64_t rows, int64_t cols, const Fp8Copies& out) {
  check_shape(fn, rows, cols);
  check_not_null(fn, "x", x);
  check_multiple(fn, "cols", cols, 16, "16-byte row-wise loads and stores");
  check_multiple(fn, "rows", rows, 16, "16-byte column-wise stores");
  check_aligned(fn, "x", x);
  check_aligned(fn, "out.rowwise", out.rowwise);
  check_aligned(fn, "out.colwise", out.colwise);
}

}  // namespace nibble::cuda::fp8_check
