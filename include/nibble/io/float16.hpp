// IEEE binary16 (half) <-> float32. Decode is exact (every half is a float); encode rounds to
// nearest even, overflows to infinity as IEEE does, and keeps NaN a quiet NaN. The io layer needs
// half only to read and write F16 tensors, so it lives here rather than among the training formats.
#pragma once
#include "nibble/format/host_device.hpp"

namespace nibble::io {

NIBBLE_HD constexpr float decode_f16(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t man = h & 0x3FFu;
  if (exp == 0x1F) return fmt::bits_float(sign | 0x7F800000u | (man << 13));  // inf, NaN (payload kept)
  if (exp != 0) return fmt::bits_float(sign | ((exp + 112u) << 23) | (man << 13));
  if (man == 0) return fmt::bits_float(sign);
  // Subnormal half = man * 2^-24; normalise it into a float32 normal.
  int e = -14;
  while (!(man & 0x400u)) {
    man <<= 1;
    --e;
  }
  return fmt::bits_float(sign | (static_cast<uint32_t>(e + 127) << 23) | ((man & 0x3FFu) << 13));
}

NIBBLE_HD constexpr uint16_t encode_f16(float x) {
  const uint32_t b = fmt::float_bits(x);
  const uint16_t sign = static_cast<uint16_t>((b >> 16) & 0x8000u);
  const uint32_t a = b & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u | ((a >> 13) & 0x3FFu));
  if (a >= 0x47800000u) return static_cast<uint16_t>(sign | 0x7C00u);  // >= 65536 (or inf): inf
  const int fe = static_cast<int>(a >> 23);
  const uint32_t sig = (a & 0x7FFFFFu) | (fe ? 0x800000u : 0u);
  // Half keeps 11 significant bits at exponent >= -14 and a fixed 2^-24 step below.
  const int shift = fe >= 113 ? 13 : 13 + (113 - fe);
  if (shift > 31) return sign;
  const uint32_t q = sig >> shift;
  const uint32_t rem = sig & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  uint32_t r = q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
  // For normals, q carries the implicit bit; adding the biased exponent lets a mantissa carry
  // roll into the exponent (and 65504 + carry into inf) for free.
  if (fe >= 113) r = (static_cast<uint32_t>(fe - 112) << 10) + (r - 0x400u);
  return static_cast<uint16_t>(sign | r);
}

}  // namespace nibble::io
