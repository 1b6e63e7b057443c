// E8M0: an 8-bit unsigned power-of-two exponent, bias 127 (OCP MX block scale). 0xFF is NaN.
#pragma once
#include "nibble/format/host_device.hpp"

namespace nibble::fmt {

inline constexpr uint8_t kE8M0Nan = 0xFF;

// Encode 2^e; exponents outside [-127, 127] clamp to the representable range.
NIBBLE_HD constexpr uint8_t encode_e8m0_exponent(int e) {
  return static_cast<uint8_t>((e < -127 ? -127 : (e > 127 ? 127 : e)) + 127);
}
NIBBLE_HD constexpr int e8m0_exponent(uint8_t code) { return static_cast<int>(code) - 127; }
NIBBLE_HD constexpr float decode_e8m0(uint8_t code) {
  if (code == kE8M0Nan) return bits_float(0x7fc00000u);
  if (code == 0) return bits_float(0x00400000u);  // 2^-127 is a float32 subnormal
  return bits_float(static_cast<uint32_t>(code) << 23);
}

static_assert(decode_e8m0(127) == 1.0f && decode_e8m0(128) == 2.0f, "E8M0 bias is 127");

}  // namespace nibble::fmt
