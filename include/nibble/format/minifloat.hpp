// Generic small floating-point formats (E4M3, E5M2, E2M1, UE4M3): encode from float32 with
// round-to-nearest-even or stochastic rounding, saturating to the largest finite value
// ("satfinite"), and exact decode. All arithmetic is on the float32 bit pattern, so results are
// exact and identical on host and device.
#pragma once
#include "nibble/format/host_device.hpp"

namespace nibble::fmt {

// What a format does with NaN input: keep a NaN code, or (no NaN in the format) saturate.
enum class NanRule : uint8_t { canonical_nan, saturate };

struct MiniFloat {
  int exp_bits;
  int man_bits;
  int bias;
  bool has_sign;
  bool has_inf;          // IEEE-like top exponent (E5M2)
  uint8_t max_code;      // largest finite magnitude code (sign bit excluded)
  uint8_t nan_code;      // magnitude code written for NaN when nan_rule is canonical_nan
  NanRule nan_rule;
  NIBBLE_HD constexpr int emin() const { return 1 - bias; }
  NIBBLE_HD constexpr uint8_t sign_bit() const {
    return has_sign ? static_cast<uint8_t>(1u << (exp_bits + man_bits)) : 0;
  }
};

// E4M3 "fn": no infinities, S.1111.111 is NaN, max 448.
NIBBLE_HD constexpr MiniFloat kE4M3() { return MiniFloat{4, 3, 7, true, false, 0x7E, 0x7F, NanRule::canonical_nan}; }
// E5M2: IEEE-like, 0x7C is inf, 0x7D..0x7F NaN, max 57344.
NIBBLE_HD constexpr MiniFloat kE5M2() { return MiniFloat{5, 2, 15, true, true, 0x7B, 0x7F, NanRule::canonical_nan}; }
// E2M1: values {0, .5, 1, 1.5, 2, 3, 4, 6}, no inf or NaN; NaN saturates (the block scale carries it).
NIBBLE_HD constexpr MiniFloat kE2M1() { return MiniFloat{2, 1, 1, true, false, 0x7, 0x7, NanRule::saturate}; }
// UE4M3: E4M3 without the sign bit (NVFP4 block scale); 0x7F is NaN.
NIBBLE_HD constexpr MiniFloat kUE4M3() { return MiniFloat{4, 3, 7, false, false, 0x7E, 0x7F, NanRule::canonical_nan}; }

// Core encoder. `random` supplies 32 uniform bits for stochastic rounding; `stochastic` selects it.
// Rounding up happens with probability (distance to the lower neighbour) / (gap), resolved to 2^-32.
NIBBLE_HD constexpr uint8_t encode_minifloat(const MiniFloat& f, float x, bool stochastic,
                                             uint32_t random) {
  const uint32_t b = float_bits(x);
  const uint8_t sign = (b >> 31) && f.has_sign ? f.sign_bit() : 0;
  const uint32_t a = b & 0x7fffffffu;
  if (a > 0x7f800000u) {  // NaN
    return f.nan_rule == NanRule::canonical_nan ? f.nan_code : static_cast<uint8_t>(f.max_code);
  }
  if (!f.has_sign && (b >> 31) && a != 0) return 0;  // unsigned format: negatives clamp to 0
  if (a == 0x7f800000u) return static_cast<uint8_t>(sign | f.max_code);  // satfinite: inf -> max
  const int fe = static_cast<int>(a >> 23);
  if (fe == 0) return sign;  // float32 subnormals are far below every format's smallest value
  const uint64_t sig = (a & 0x7fffffu) | 0x800000u;  // 24-bit significand
  const int te = fe - 127;
  const int emin = f.emin();
  const int shift = (23 - f.man_bits) + (te < emin ? emin - te : 0);
  if (shift > 56) return sign;  // below 2^-33 of the smallest step: rounds to zero either way
  const uint64_t q = sig >> shift;
  const uint64_t rem = sig & ((uint64_t{1} << shift) - 1);
  bool up;
  if (stochastic) {
    const uint64_t threshold = (rem << 32) >> shift;  // P(up) = rem / 2^shift
    up = static_cast<uint64_t>(random) < threshold;
  } else {
    const uint64_t half = uint64_t{1} << (shift - 1);
    up = rem > half || (rem == half && (q & 1));
  }
  const uint64_t steps = q + (up ? 1 : 0);
  // Codes are monotone in magnitude: exponent field above emin, then the steps in that binade.
  const uint64_t code = (static_cast<uint64_t>(te > emin ? te - emin : 0) << f.man_bits) + steps;
  return static_cast<uint8_t>(sign | (code > f.max_code ? f.max_code : code));
}

NIBBLE_HD constexpr float decode_minifloat(const MiniFloat& f, uint8_t code) {
  const int width = f.exp_bits + f.man_bits;
  const bool neg = f.has_sign && ((code >> width) & 1);
  const uint32_t mag = code & ((1u << width) - 1);
  const uint32_t exp_field = mag >> f.man_bits;
  const uint32_t man = mag & ((1u << f.man_bits) - 1);
  const uint32_t sbit = neg ? 0x80000000u : 0u;
  const uint32_t top = (1u << f.exp_bits) - 1;
  if (f.nan_rule == NanRule::canonical_nan) {
    if (f.has_inf && exp_field == top) return bits_float(sbit | (man ? 0x7fc00000u : 0x7f800000u));
    if (!f.has_inf && mag == ((1u << width) - 1)) return bits_float(sbit | 0x7fc00000u);
  }
  float v;
  if (exp_field == 0) {
    v = static_cast<float>(man) * pow2f(f.emin() - f.man_bits);  // exact: small integer times 2^k
  } else {
    const int e = static_cast<int>(exp_field) - f.bias;
    v = bits_float(static_cast<uint32_t>(e + 127) << 23 | man << (23 - f.man_bits));
  }
  return neg ? -v : v;
}

NIBBLE_HD constexpr float max_finite(const MiniFloat& f) { return decode_minifloat(f, f.max_code); }

// Named entry points: what kernels and the reference call.
NIBBLE_HD constexpr uint8_t encode_e4m3(float x) { return encode_minifloat(kE4M3(), x, false, 0); }
NIBBLE_HD constexpr uint8_t encode_e5m2(float x) { return encode_minifloat(kE5M2(), x, false, 0); }
NIBBLE_HD constexpr uint8_t encode_e2m1(float x) { return encode_minifloat(kE2M1(), x, false, 0); }
NIBBLE_HD constexpr uint8_t encode_ue4m3(float x) { return encode_minifloat(kUE4M3(), x, false, 0); }
NIBBLE_HD constexpr uint8_t encode_e4m3_sr(float x, uint32_t r) { return encode_minifloat(kE4M3(), x, true, r); }
NIBBLE_HD constexpr uint8_t encode_e5m2_sr(float x, uint32_t r) { return encode_minifloat(kE5M2(), x, true, r); }
NIBBLE_HD constexpr uint8_t encode_e2m1_sr(float x, uint32_t r) { return encode_minifloat(kE2M1(), x, true, r); }
NIBBLE_HD constexpr float decode_e4m3(uint8_t c) { return decode_minifloat(kE4M3(), c); }
NIBBLE_HD constexpr float decode_e5m2(uint8_t c) { return decode_minifloat(kE5M2(), c); }
NIBBLE_HD constexpr float decode_e2m1(uint8_t c) { return decode_minifloat(kE2M1(), c & 0xF); }
NIBBLE_HD constexpr float decode_ue4m3(uint8_t c) { return decode_minifloat(kUE4M3(), c); }

inline constexpr float kE4M3Max = 448.0f;
inline constexpr float kE5M2Max = 57344.0f;
inline constexpr float kE2M1Max = 6.0f;

static_assert(decode_minifloat(kE4M3(), 0x7E) == 448.0f, "E4M3 max must be 448");
static_assert(decode_minifloat(kE5M2(), 0x7B) == 57344.0f, "E5M2 max must be 57344");
static_assert(decode_minifloat(kE2M1(), 0x7) == 6.0f, "E2M1 max must be 6");
static_assert(decode_minifloat(kE4M3(), 0x01) == 0.001953125f, "E4M3 smallest subnormal is 2^-9");
static_assert(encode_minifloat(kE4M3(), 500.0f, false, 0) == 0x7E, "satfinite clamps to 448");
static_assert(encode_minifloat(kE2M1(), 2.5f, false, 0) == 0x4, "2.5 ties to even (2)");
static_assert(encode_minifloat(kE2M1(), 0.25f, false, 0) == 0x0, "0.25 ties to even (0)");
static_assert(encode_minifloat(kE2M1(), 5.0f, false, 0) == 0x6, "5 ties to even (4)");

}  // namespace nibble::fmt
