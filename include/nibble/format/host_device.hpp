// Host/device qualifiers and bit casts shared by every scalar codec.
// The CPU reference and the CUDA kernels include the same headers, so "GPU equals CPU bit for bit"
// holds by construction: there is exactly one definition of each format and rounding rule.
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define NIBBLE_HD __host__ __device__ __forceinline__
#else
#define NIBBLE_HD inline
#endif

namespace nibble::fmt {

NIBBLE_HD constexpr uint32_t float_bits(float x) { return __builtin_bit_cast(uint32_t, x); }
NIBBLE_HD constexpr float bits_float(uint32_t b) { return __builtin_bit_cast(float, b); }

// 2^e as a float for e in [-149, 127], built from bits (exact, constexpr, no libm).
NIBBLE_HD constexpr float pow2f(int e) {
  if (e >= -126) return bits_float(static_cast<uint32_t>(e + 127) << 23);
  return bits_float(1u << (e + 149));  // float subnormal
}

// floor(log2(|x|)) for finite non-zero x, exact (reads the exponent field; handles subnormals).
NIBBLE_HD constexpr int floor_log2(float x) {
  uint32_t a = float_bits(x) & 0x7fffffffu;
  int e = static_cast<int>(a >> 23);
  if (e != 0) return e - 127;
  int msb = 31;  // a != 0 for non-zero subnormals; a loop keeps this constexpr on host and device
  while (!(a >> msb)) --msb;
  return msb - 149;
}

// max(floor_log2(|x|), -127) for non-zero x without floor_log2's subnormal loop: the biased exponent
// field minus 127. Zero and subnormals (field 0) all have floor_log2 <= -127; inf and NaN give 128.
// Every scale rule clamps its exponent at -127 (E8M0's range), so it may use this in place of
// floor_log2 whenever the clamp follows (tests/quant/test_scale_rules.cpp checks each such use).
NIBBLE_HD constexpr int floor_log2_at_least_m127(float x) {
  return static_cast<int>((float_bits(x) >> 23) & 0xffu) - 127;
}

NIBBLE_HD constexpr bool is_nan_bits(uint32_t b) { return (b & 0x7fffffffu) > 0x7f800000u; }
NIBBLE_HD constexpr bool is_inf_bits(uint32_t b) { return (b & 0x7fffffffu) == 0x7f800000u; }

}  // namespace nibble::fmt
