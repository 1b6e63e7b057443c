// Scale rules of every recipe (docs/spec.md §2), host + device. One expression order each; the CUDA kernels
// call these very functions, so GPU and CPU scales agree bit for bit.
//
// Special values (see docs/recipes.md):
//  - per-tensor fp8 and fp8-block: amax 0, inf or NaN -> encode scale 1 (the elements then encode
//    as the format does: NaN -> NaN code, inf -> satfinite max).
//  - MX (E8M0): amax NaN or inf -> scale code 0xFF (NaN: the whole block decodes to NaN);
//    amax 0 -> code 0 (2^-127) with zero element codes.
//  - nvfp4: tensor amax 0/inf/NaN -> global encode (and decode) scale 1; block amax NaN -> UE4M3 NaN
//    code with element codes 0; a zero block scale -> element encode scale FLT_MAX (TE's +-6 codes).
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

// MX block scale as an E8M0 code. amax NaN/inf -> 0xFF (the block decodes to NaN); amax 0 -> code 0.
//  ocp: k = floor(log2 amax) - emax_elem (E4M3: 8, E2M1: 2), clamped to [-127, 127]. On the bits of
//       |amax| the biased exponent field e gives code e - emax_elem, floored at 0 (zero and float
//       subnormals have e = 0; e <= 254, so the upper clamp never binds).
//  te:  Transformer Engine 2.x (transformer_engine/common/util/ptx*.cuh float_to_e8m0 applied to
//       amax * Quantized_Limits::max_norm_rcp): v = amax * fl(1/fmax), ONE float multiply rounded to
//       nearest; code = biased exponent field of v, plus 1 when v's fraction field is non-zero, except
//       that a subnormal v (field 0) rounds up only above 2^-127 (fraction > 0x400000). For every
//       normal v this equals ceil(log2(amax / fmax)) (fl(1/fmax) errs by < 0.5 ulp and the float
//       after fmax * 2^j is > 0.5 ulp above it, so v is a power of two exactly when amax / fmax is);
//       a subnormal v can round down onto 2^-127, where the block then saturates, as in TE. v never
//       reaches TE's satfinite case (v <= FLT_MAX / fmax). Deliberate difference: TE maps an inf
//       amax to 0xFE; nibble marks the block NaN, as for every recipe.
// Integer and float operations only, no loops: the kernels hand their bit-level amax straight in.
// tests/quant/test_scale_rules.cpp checks both rules against their definitions.
NIBBLE_HD constexpr uint8_t mx_scale_code_of_abs_bits(uint32_t a, MxScaleRule rule, ElementFormat f) {
  if (a >= 0x7f800000u) return fmt::kE8M0Nan;
  if (rule == MxScaleRule::te) {
    const float rcp = 1.0f / element_max(f);  // fl(1/448) for E4M3, as TE's max_norm_rcp
    const uint32_t v = fmt::float_bits(fmt::bits_float(a) * rcp);
    const uint32_t e = v >> 23, frac = v & 0x7fffffu;
    return static_cast<uint8_t>(e + ((e == 0 ? frac > 0x400000u : frac != 0) ? 1u : 0u));
  }
  const int code = static_cast<int>(a >> 23) - element_emax(f);
  return static_cast<uint8_t>(code < 0 ? 0 : code);
}
NIBBLE_HD constexpr uint8_t mx_scale_code(float amax, MxScaleRule rule, ElementFormat f) {
  return mx_scale_code_of_abs_bits(abs_bits(amax), rule, f);
}

// QuEST's power-of-two scale exponent k = floor(log2 t) for the clip threshold t > 0, clamped to
// E8M0's [-127, 127]; floor_log2_at_least_m127 gives the same clamped result as floor_log2
// (tests/quant/test_scale_rules.cpp). (The Quartet backward quantizer keeps floor_log2: with the
// branch-free form the compiler raises the row-wise kernel from 48 to 64 registers, 4 instead of
// 5 CTAs per SM, 3.5% slower on an H200.)
NIBBLE_HD constexpr int quest_scale_exponent(float t) { return clamp_exponent(fmt::floor_log2_at_least_m127(t)); }

// Multiplier applied to elements before encoding: 2^-k (exact). NaN scale code -> 0.
NIBBLE_HD constexpr float mx_encode_multiplier(uint8_t scale_code) {
  return scale_code == fmt::kE8M0Nan ? 0.0f : fmt::pow2f(127 - static_cast<int>(scale_code));
}

// nvfp4 (docs/recipes.md, nvfp4): Transformer Engine's NVFP4 scale arithmetic, in its order of float
// operations (TE 2.x, core_nvfp4.cuh and pytorch/custom_recipes/reference_nvfp4.py).
// Global encode scale S_enc = fl(448 * 6 / amax), at most FLT_MAX (a tiny amax); amax 0, or an
// amax so large (inf) that the quotient is 0, gives 1. A NaN amax also gives 1 (TE's kernels and
// reference disagree there: FLT_MAX or NaN); its NaN blocks carry the NaN through their scale code.
inline constexpr float kNvfp4GlobalScaleNumerator = fmt::kE4M3Max * fmt::kE2M1Max;  // 2688, exact
inline constexpr float kNvfp4RecipE2M1Max = 1.0f / fmt::kE2M1Max;                    // fl(1/6)
NIBBLE_HD constexpr float nvfp4_global_encode_scale(float amax) {
  if (amax != amax) return 1.0f;
  const float q = kNvfp4GlobalScaleNumerator / amax;
  const float s = q < kFloatMax ? q : kFloatMax;
  return (amax == 0.0f || s == 0.0f) ? 1.0f : s;
}
// Global decode scale S_dec = fl(1 / S_enc): the QuantizedTensor's tensor_scale (decoded value =
// (e2m1 * ue4m3) * S_dec) and the factor of the element encode scale below.
NIBBLE_HD constexpr float nvfp4_global_decode_scale_of(float global_encode_scale) { return 1.0f / global_encode_scale; }
NIBBLE_HD constexpr float nvfp4_global_decode_scale(float amax) {
  return nvfp4_global_decode_scale_of(nvfp4_global_encode_scale(amax));
}
// Block scale code = RN_UE4M3(fl(amax_block * fl(S_enc * fl(1/6)))), satfinite (above 448 -> 448,
// inf -> 448); a NaN amax -> UE4M3 NaN (0x7F). A product below 2^-10 gives code 0 (a zero scale).
NIBBLE_HD constexpr float nvfp4_block_scale_multiplier(float global_encode_scale) {
  return global_encode_scale * kNvfp4RecipE2M1Max;
}
NIBBLE_HD constexpr uint8_t nvfp4_block_scale_code_by_multiplier(float amax_block, float multiplier) {
  return fmt::encode_ue4m3(amax_block * multiplier);
}
NIBBLE_HD constexpr uint8_t nvfp4_block_scale_code(float amax_block, float global_encode_scale) {
  return nvfp4_block_scale_code_by_multiplier(amax_block, nvfp4_block_scale_multiplier(global_encode_scale));
}
// Element encode scale of a block = min(fl(1 / fl(fp32(ue4m3) * S_dec)), FLT_MAX): a zero block
// scale gives FLT_MAX, so a non-zero element of such a block saturates to +-6 (codes 0x7 / 0xF)
// exactly as TE writes them; both decode to 0. The NaN code has no encode scale (its codes are 0).
NIBBLE_HD constexpr float nvfp4_element_encode_scale(uint8_t block_code, float global_decode_scale) {
  const float e = 1.0f / (fmt::decode_ue4m3(block_code) * global_decode_scale);
  return e < kFloatMax ? e : kFloatMax;
}

}  // namespace nibble::quant
