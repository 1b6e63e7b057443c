// Scale rules of every recipe (SPEC 2), host + device. One expression order each; the CUDA kernels
// call these very functions, so GPU and CPU scales agree bit for bit.
//
// Special values (see docs/recipes.md):
//  - per-tensor fp8 and fp8-block: amax 0, inf or NaN -> encode scale 1 (the elements then encode
//    as the format does: NaN -> NaN code, inf -> satfinite max).
//  - MX (E8M0): amax NaN or inf -> scale code 0xFF (NaN: the whole block decodes to NaN);
//    amax 0 -> code 0 (2^-127) with zero element codes.
//  - nvfp4: tensor amax 0/inf/NaN -> global decode scale 1; block amax NaN -> UE4M3 NaN code.
#pragma once
#include "nibble/format/e8m0.hpp"
#include "nibble/format/minifloat.hpp"
#include "nibble/quant/amax.hpp"
#include "nibble/quant/formats.hpp"

namespace nibble::quant {

inline constexpr float kFloatMax = 3.40282347e38f;

NIBBLE_HD constexpr float element_max(ElementFormat f) {
  return f == ElementFormat::e4m3 ? fmt::kE4M3Max
       : f == ElementFormat::e5m2 ? fmt::kE5M2Max
       : f == ElementFormat::e2m1 ? fmt::kE2M1Max
                                  : kFloatMax;
}
// Exponent of the largest power of two an element format holds (OCP MX emax_elem).
NIBBLE_HD constexpr int element_emax(ElementFormat f) {
  return f == ElementFormat::e4m3 ? 8 : f == ElementFormat::e5m2 ? 15 : f == ElementFormat::e2m1 ? 2 : 127;
}

NIBBLE_HD constexpr int clamp_exponent(int k) { return k < -127 ? -127 : (k > 127 ? 127 : k); }

// Per-tensor fp8 (current and delayed scaling): s_enc = fmax_eff / amax with
// fmax_eff = fmax * 2^-margin (exact: margin is an integer). amax 0/inf/NaN -> 1; an amax so small
// that the quotient overflows gives FLT_MAX. Decode scale = 1.0f / s_enc (one float division).
NIBBLE_HD constexpr float per_tensor_encode_scale(float fmax, float amax, int margin = 0) {
  if (!(amax > 0.0f) || !is_finite(amax)) return 1.0f;
  const float s = (fmax * fmt::pow2f(-margin)) / amax;
  return is_finite(s) ? s : kFloatMax;
}
NIBBLE_HD constexpr float per_tensor_decode_scale(float s_enc) { return 1.0f / s_enc; }

// fp8-block: s_enc = 2^k with k = floor(log2(fmax / amax)), computed exactly: the float quotient can
// only round UP onto a power of two, which the check amax * 2^k > fmax catches. k in [-127, 127];
// amax 0/inf/NaN -> k = 0. The stored FP32 decode scale is 2^-k (exact).
NIBBLE_HD constexpr int fp8_block_scale_exponent(float amax, float fmax = fmt::kE4M3Max) {
  if (!(amax > 0.0f) || !is_finite(amax)) return 0;
  const float q = fmax / amax;
  if (!is_finite(q)) return 127;
  int k = fmt::floor_log2(q);
  if (k >= -149 && k <= 127 && amax * fmt::pow2f(k) > fmax) --k;
  return clamp_exponent(k);
}

// MX block scale as an E8M0 code.
//  ocp:      k = floor(log2 amax) - emax_elem   (E4M3: 8, E2M1: 2)
//  round_up: k = ceil(log2(amax / fmax)), the smallest k with amax <= fmax * 2^k, i.e.
//            floor(log2 amax) - floor(log2 fmax) + (significand(amax) > significand(fmax)); never clips.
// k is clamped to [-127, 127]; amax NaN/inf -> 0xFF; amax 0 -> code 0.
// Computed in closed form, without floor_log2's subnormal loop or a branch on the data: every format
// has emax >= 2 and floor(log2 fmax) >= 2, so an amax whose exponent field is 0 (zero, subnormals)
// gets k <= -127 - 2 + 1, i.e. code 0 under either rule, whatever its significand; for all others the
// significand is the raw fraction field. tests/quant/test_scale_rules.cpp checks this against the
// definitions above (every BF16 amax, every float exponent with the fractions around fmax's, random
// floats, both rules, every element format).
// On the bits of |amax| (abs_bits(amax)): the biased exponent field e gives floor_log2_at_least_m127
// = e - 127 for every finite amax, so the code k + 127 is e - emax_elem (ocp) or
// e - floor(log2 fmax) + above (round_up), floored at 0; e <= 254 and the subtrahend is >= 1 (E2M1
// round-up with `above`: 2 - 1), so the code stays <= 253 and the upper clamp (127) never binds.
// Integer operations only: the kernels hand their bit-level amax straight in.
NIBBLE_HD constexpr uint8_t mx_scale_code_of_abs_bits(uint32_t a, MxScaleRule rule, ElementFormat f) {
  if (a >= 0x7f800000u) return fmt::kE8M0Nan;
  const uint32_t fmax_bits = fmt::float_bits(element_max(f));
  const int sub = rule == MxScaleRule::round_up
                      ? fmt::floor_log2(element_max(f)) - ((a & 0x7fffffu) > (fmax_bits & 0x7fffffu) ? 1 : 0)
                      : element_emax(f);
  const int code = static_cast<int>(a >> 23) - sub;
  return static_cast<uint8_t>(code < 0 ? 0 : code);
}
NIBBLE_HD constexpr uint8_t mx_scale_code(float amax, MxScaleRule rule, ElementFormat f) {
  return mx_scale_code_of_abs_bits(abs_bits(amax), rule, f);
}

// QuEST's power-of-two scale exponent k = floor(log2 t) for the clip threshold t > 0, clamped to
// E8M0's [-127, 127]; floor_log2_at_least_m127 gives the same clamped result as floor_log2
// (tests/quant/test_scale_rules.cpp). (The Quartet backward quantizer keeps floor_log2: its
// branch-free form let the compiler raise the row-wise kernel from 48 to 64 registers, 4 instead of
// 5 CTAs per SM, 3.5% slower on the H200: docs/perf/2026-12-04-h200-session18.md, run 1.)
NIBBLE_HD constexpr int quest_scale_exponent(float t) { return clamp_exponent(fmt::floor_log2_at_least_m127(t)); }

// Multiplier applied to elements before encoding: 2^-k (exact). NaN scale code -> 0.
NIBBLE_HD constexpr float mx_encode_multiplier(uint8_t scale_code) {
  return scale_code == fmt::kE8M0Nan ? 0.0f : fmt::pow2f(127 - static_cast<int>(scale_code));
}

// nvfp4 global decode scale s = amax / (6 * 448) (one float division). amax 0/inf/NaN, or a
// quotient that underflows to 0 -> 1.
NIBBLE_HD constexpr float nvfp4_global_decode_scale(float amax) {
  if (!(amax > 0.0f) || !is_finite(amax)) return 1.0f;
  const float s = amax / (fmt::kE2M1Max * fmt::kE4M3Max);
  return s > 0.0f ? s : 1.0f;
}
// nvfp4 block scale code = RN_UE4M3((amax_block / 6) / s), satfinite; NaN amax -> UE4M3 NaN (0x7F).
NIBBLE_HD constexpr uint8_t nvfp4_block_scale_code(float amax_block, float global_decode_scale) {
  return fmt::encode_ue4m3((amax_block / fmt::kE2M1Max) / global_decode_scale);
}

}  // namespace nibble::quant
