// BF16 <-> float32. Encode rounds to nearest even; NaN stays a quiet NaN.
#pragma once
#include "nibble/format/host_device.hpp"

namespace nibble::fmt {

NIBBLE_HD constexpr uint16_t encode_bf16(float x) {
  const uint32_t b = float_bits(x);
  if (is_nan_bits(b)) return static_cast<uint16_t>((b >> 16) | 0x40);
  const uint32_t rounding = 0x7fffu + ((b >> 16) & 1u);
  return static_cast<uint16_t>((b + rounding) >> 16);
}
NIBBLE_HD constexpr float decode_bf16(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }
NIBBLE_HD constexpr float round_bf16(float x) { return decode_bf16(encode_bf16(x)); }

}  // namespace nibble::fmt
