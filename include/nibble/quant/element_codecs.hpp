// Per-element and per-group encoders of every recipe, host + device, on plain float arrays.
// Groups are contiguous (1 x n along the GEMM's inner dimension); codes come out one per byte
// (packing two E2M1 per byte is a layout step). Stochastic rounding: element i of a group uses
// fmt::random_bits(seed, stream, first_index + i), first_index = row * cols + col of x[0].
#pragma once
#include <cmath>

#include "nibble/format/bf16.hpp"
#include "nibble/format/philox.hpp"
#include "nibble/quant/scale_rules.hpp"

namespace nibble::quant {

// Plain stochastic-rounding key; `enabled == false` means round to nearest even.
struct SrKey {
  bool enabled = false;
  uint64_t seed = 0;
  uint32_t stream = 0;
};

NIBBLE_HD constexpr uint32_t sr_bits(const SrKey& key, uint64_t index) {
  return key.enabled ? fmt::random_bits(key.seed, key.stream, index) : 0u;
}

// Encode one (already scaled) value to an 8-bit-or-smaller element format (not bf16).
NIBBLE_HD constexpr uint8_t encode_element(ElementFormat f, float v, bool stochastic, uint32_t r) {
  const fmt::MiniFloat m = f == ElementFormat::e4m3 ? fmt::kE4M3()
                         : f == ElementFormat::e5m2 ? fmt::kE5M2()
                                                    : fmt::kE2M1();
  return fmt::encode_minifloat(m, v, stochastic, r);
}
NIBBLE_HD constexpr float decode_element(ElementFormat f, uint8_t code) {
  return f == ElementFormat::e4m3 ? fmt::decode_e4m3(code)
       : f == ElementFormat::e5m2 ? fmt::decode_e5m2(code)
       : f == ElementFormat::e2m1 ? fmt::decode_e2m1(code)
                                  : 0.0f;
}

// Per-tensor fp8 and fp8-block element: code = encode(x * s_enc).
NIBBLE_HD constexpr uint8_t encode_scaled(ElementFormat f, float x, float s_enc, const SrKey& key,
                                          uint64_t index) {
  return encode_element(f, x * s_enc, key.enabled, sr_bits(key, index));
}

// MX element: code = encode(x * 2^-k); NaN block scale -> code 0 (the scale carries the NaN).
NIBBLE_HD constexpr uint8_t mx_encode_element(ElementFormat f, float x, uint8_t scale_code,
                                              const SrKey& key, uint64_t index) {
  if (scale_code == fmt::kE8M0Nan) return 0;
  return encode_element(f, x * mx_encode_multiplier(scale_code), key.enabled, sr_bits(key, index));
}

// One MX group (1 x n): returns the E8M0 scale code, writes n element codes.
NIBBLE_HD constexpr uint8_t quantize_mx_group(const float* x, int n, ElementFormat f, MxScaleRule rule,
                                              const SrKey& key, uint64_t first_index, uint8_t* codes) {
  const uint8_t sc = mx_scale_code(amax_of(x, n), rule, f);
  for (int i = 0; i < n; ++i) codes[i] = mx_encode_element(f, x[i], sc, key, first_index + i);
  return sc;
}

// nvfp4 element: code = E2M1(fl(x * e)) with e = nvfp4_element_encode_scale(block_code, S_dec),
// nearest-even satfinite or stochastic (TE's x * block_scale_inverse, then the E2M1 convert). A NaN
// block scale gives code 0 (the scale carries the NaN).
NIBBLE_HD constexpr uint8_t nvfp4_encode_element_by_scale(float x, float element_encode_scale, const SrKey& key,
                                                          uint64_t index) {
  return encode_element(ElementFormat::e2m1, x * element_encode_scale, key.enabled, sr_bits(key, index));
}
NIBBLE_HD constexpr uint8_t nvfp4_encode_element(float x, uint8_t block_code, float global_decode_scale,
                                                 const SrKey& key, uint64_t index) {
  if (block_code == fmt::kUE4M3().nan_code) return 0;
  return nvfp4_encode_element_by_scale(x, nvfp4_element_encode_scale(block_code, global_decode_scale), key, index);
}

// QuEST (docs/spec.md §3) for one group of n (= 32) values:
//   mean = (sum in index order) / n; sigma = sqrtf((sum of (g - mean)^2 in index order) / n);
//   k = floor_log2(0.48707976f * sigma + 1e-8f) clamped to [-127, 127]; s = 2^k;
//   v = g * 2^-k (== g / s exactly); trusted = |v| < 6; code = RN_E2M1(clamp(v, -6, 6)).
// All zeros: sigma 0 -> k = floor_log2(1e-8) = -27, codes 0, all trusted. A group with NaN or inf
// (or whose sum of squares overflows) -> scale 0xFF, codes 0, nothing trusted.
inline constexpr float kQuestClipPerSigma = 0.48707976f;  // 2.92247856 / 6
inline constexpr float kQuestSigmaEpsilon = 1e-8f;

NIBBLE_HD uint8_t quest_group(const float* g, int n, uint8_t* codes, bool* trusted) {
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) sum += g[i];
  const float mean = sum / static_cast<float>(n);
  float ss = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float d = g[i] - mean;
    ss += d * d;
  }
  const float sigma = sqrtf(ss / static_cast<float>(n));
  if (!is_finite(sigma)) {
    for (int i = 0; i < n; ++i) { codes[i] = 0; trusted[i] = false; }
    return fmt::kE8M0Nan;
  }
  const float t = kQuestClipPerSigma * sigma + kQuestSigmaEpsilon;
  const int k = quest_scale_exponent(t);
  const float inv = fmt::pow2f(-k);
  for (int i = 0; i < n; ++i) {
    const float v = g[i] * inv;
    trusted[i] = abs_bits(v) < fmt::float_bits(fmt::kE2M1Max);
    const float c = v < -fmt::kE2M1Max ? -fmt::kE2M1Max : (v > fmt::kE2M1Max ? fmt::kE2M1Max : v);
    codes[i] = fmt::encode_e2m1(c);
  }
  return fmt::encode_e8m0_exponent(k);
}

// Quartet backward quantizer for one group (after the random-sign Hadamard):
//   k = floor_log2(amax) - 2 from the UNSCALED amax (clamped to >= -127); code = E2M1((0.75f * x) * 2^-k)
// nearest or stochastic. |0.75 x / 2^k| < 0.75 * 8 = 6, so nothing saturates. Decoded values are
// 3/4 of the input: the GEMM output is multiplied by 16/9. amax 0 -> code 0 and zero codes;
// NaN/inf -> 0xFF and zero codes.
inline constexpr float kQuartetBackwardPrescale = 0.75f;
inline constexpr float kQuartetGemmRescale = 16.0f / 9.0f;

NIBBLE_HD constexpr uint8_t quartet_backward_group(const float* x, int n, const SrKey& key,
                                                   uint64_t first_index, uint8_t* codes) {
  const float amax = amax_of(x, n);
  if (!is_finite(amax) || amax == 0.0f) {
    for (int i = 0; i < n; ++i) codes[i] = 0;
    return amax == 0.0f ? 0 : fmt::kE8M0Nan;
  }
  const int k = clamp_exponent(fmt::floor_log2(amax) - 2);
  const float inv = fmt::pow2f(-k);
  for (int i = 0; i < n; ++i) {
    const float v = (kQuartetBackwardPrescale * x[i]) * inv;
    codes[i] = encode_element(ElementFormat::e2m1, v, key.enabled, sr_bits(key, first_index + i));
  }
  return fmt::encode_e8m0_exponent(k);
}

// Quartet forward "absmax" ablation, as upstream (Quartet's Triton quantizer with quest=False,
// QuTLASS fusedQuantizeMx method="abs_max"): scale 2^(floor(log2 amax) - 2) / 0.75, never clips, no
// trust mask. Stored exactly like the backward quantizer: codes = E2M1((0.75f * x) * 2^-k), the E8M0
// of 2^k, the tensor's prescale 0.75 (GEMM outputs times 16/9); every element trusted.
NIBBLE_HD constexpr uint8_t absmax_forward_group(const float* g, int n, uint8_t* codes, bool* trusted) {
  for (int i = 0; i < n; ++i) trusted[i] = true;
  return quartet_backward_group(g, n, SrKey{}, 0, codes);
}

// Exact MXFP4 -> E4M3 re-encoding of one element (docs/spec.md §4): E4M3(decode_e2m1(c) * 2^(k_j - k_max + 6)).
// Exact iff k_max - k_j <= 14 (or the code is zero).
NIBBLE_HD constexpr uint8_t reencode_e2m1_as_e4m3(uint8_t e2m1_code, int k_block, int k_max) {
  const int shift = k_block - k_max + 6;
  // A zero code stays a signed zero whatever the shift (2^shift may not even be a float).
  if (shift < -149 || (e2m1_code & 0x7) == 0) return static_cast<uint8_t>((e2m1_code & 0x8) ? 0x80 : 0x00);
  return fmt::encode_e4m3(fmt::decode_e2m1(e2m1_code) * fmt::pow2f(shift));
}
inline constexpr int kReencodeMaxSpread = 14;

}  // namespace nibble::quant
