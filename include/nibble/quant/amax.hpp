// amax with NaN propagation, as integer max over |x|'s bit pattern. For non-negative floats the bit
// pattern orders exactly like the value, and every NaN pattern (> 0x7f800000) is above +inf, so
// "max of (bits & 0x7fffffff)" propagates NaN and is order independent: a GPU reduction (or
// atomicMax on uint32) gives the same answer as this sequential loop. inf stays inf.
#pragma once
#include "nibble/format/host_device.hpp"

namespace nibble::quant {

NIBBLE_HD constexpr uint32_t abs_bits(float x) { return fmt::float_bits(x) & 0x7fffffffu; }

// Combine two partial amaxes kept as bits (any order, any tree).
NIBBLE_HD constexpr uint32_t amax_combine_bits(uint32_t a, uint32_t b) { return a > b ? a : b; }

// Bits -> float amax; every NaN payload becomes the canonical quiet NaN, so results compare equal.
NIBBLE_HD constexpr float amax_from_bits(uint32_t bits) {
  return fmt::bits_float(bits > 0x7f800000u ? 0x7fc00000u : bits);
}

// max |x[i]| over x[0], x[stride], ... (n elements). NaN anywhere -> NaN; else inf anywhere -> inf.
NIBBLE_HD constexpr float amax_strided(const float* x, int64_t n, int64_t stride) {
  uint32_t m = 0;
  for (int64_t i = 0; i < n; ++i) m = amax_combine_bits(m, abs_bits(x[i * stride]));
  return amax_from_bits(m);
}
NIBBLE_HD constexpr float amax_of(const float* x, int64_t n) { return amax_strided(x, n, 1); }

NIBBLE_HD constexpr bool is_finite(float x) { return abs_bits(x) < 0x7f800000u; }

}  // namespace nibble::quant
