// Per-group FP4 math of the quantization kernels: the same expressions, in the same order, as the
// CPU reference (quant::quest_group, quant::quartet_backward_group, quant::quantize_mx_group), with
// two changes that alter no result but remove most of the per-element work:
//  1. E2M1 nearest-even encoding by ONE float add (encode_e2m1_fadd below) instead of the generic
//     bit-level fmt::encode_minifloat (~25 integer ops with 64-bit shifts per element). Identity
//     with fmt::encode_e2m1 is checked on all 2^32 float bit patterns (tests/cuda/
//     test_quartet_fused_e2m1.cu on the GPU; the same loop was run on the CPU when it was written).
//  2. Stochastic rounding computes each Philox block once for 4 consecutive elements: group index
//     bases are multiples of 32, so element first+i uses word (i & 3) of block (first + i) / 4,
//     exactly what fmt::random_bits(seed, stream, first + i) returns.
// Codes come out packed (16 bytes per group, low nibble = even element) and masks as one word, so
// nothing is kept in per-element byte arrays (those spilled to local memory in the SR kernels).
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "bf16x2_amax.cuh"
#include "nibble/format/e8m0.hpp"
#include "nibble/format/minifloat.hpp"
#include "nibble/format/philox.hpp"
#include "nibble/quant/element_codecs.hpp"

namespace nibble::cuda::fp4 {

// Magnitude code (0..7) of RNE_E2M1(c) for 0 <= c <= 6 (or any c < 7), c not NaN.
// Why it works: rounding to E2M1 is rounding to a step of 0.5 below 2, 1 in [2, 4), 2 in [4, 8).
// Adding M = 2^(22 + max(e, 0)) (e = floor(log2 c), 0 for subnormals and zero) makes the float
// adder round c to exactly that step (ulp(M) = 2^(e-1) clamped to 0.5), once, to nearest even, and
// the integer n = bits(c + M) - bits(M) is the rounded value in steps. code = n + 2 max(e, 0), and
// (bits(M) >> 22) = 2 max(e, 0) + 298. Rounding 1.75 up to 2 (or 3.5 to 4) stays correct because
// the step count just continues past the binade edge: n = 4 at step 0.5 is code 4 = 2.0.
NIBBLE_HD uint32_t e2m1_magnitude_fadd(float c) {
  const uint32_t e = fmt::float_bits(c) & 0x7f800000u;
  const uint32_t m = (e > 0x3f800000u ? e : 0x3f800000u) + (22u << 23);
  const uint32_t s = fmt::float_bits(c + fmt::bits_float(m));
  return s - m + (m >> 22) - 298u;
}

// == fmt::encode_e2m1(x) for every float x (NaN -> 0x7 without sign, +-inf -> +-6, satfinite).
NIBBLE_HD uint8_t encode_e2m1_fadd(float x) {
  const uint32_t b = fmt::float_bits(x);
  if ((b & 0x7fffffffu) > 0x7f800000u) return 0x7;
  const float a = fmt::bits_float(b & 0x7fffffffu);
  const float c = a < 6.0f ? a : 6.0f;
  return static_cast<uint8_t>(((b >> 28) & 0x8u) | e2m1_magnitude_fadd(c));
}

// == fmt::encode_e2m1_sr(x, r) for every float x and r, without the generic encoder's 64-bit
// significand arithmetic and without a branch on the value (the elements of a warp straddle 1.0, so
// the two-case form ran both cases). With b = bits(|x|), E = b >> 23 and sig = the 24-bit
// significand, y = sig * 2^(min(E, 127) - 117) = (sig << 10) >> (127 - min(E, 127)) (truncated) is
// |x| / step as a fixed-point number with 32 fraction bits, where step = 0.5 below 2 and
// 2^(E-127-1) above: the round-down code is its integer part plus 2 (E - 127) for E >= 127 (the
// binades [2, 4) and [4, 8) start at codes 4 and 6), and P(up) = its fraction / 2^32. Zeros and
// subnormals (E = 0) give y = 0. Codes saturate at 7 (satfinite; +-inf -> +-6); NaN -> 0x7
// without sign. Checked against fmt::encode_e2m1_sr on the CPU (tests/cuda/
// test_quartet_fused_forward.cu) and through the SR kernels' GPU tests.
NIBBLE_HD uint32_t encode_e2m1_sr_fast(float x, uint32_t r) {
  const uint32_t bx = fmt::float_bits(x);
  const uint32_t b = bx & 0x7fffffffu;
  const uint32_t e = b >> 23;
  const uint32_t sig = (b & 0x7fffffu) | 0x800000u;
  const uint32_t down = 127u - (e < 127u ? e : 127u);  // right shift: 0 from 1.0 up
  const uint64_t y = (static_cast<uint64_t>(sig) << 10) >> (down < 63u ? down : 63u);
  const uint32_t binade = e > 127u ? e - 127u : 0u;
  uint32_t code = static_cast<uint32_t>(y >> 32) + 2u * binade + (r < static_cast<uint32_t>(y) ? 1u : 0u);
  code = code < 7u ? code : 7u;
  return b > 0x7f800000u ? 0x7u : (((bx >> 28) & 0x8u) | code);
}

// max |x[i]| of 32 values with NaN propagation (max.NaN.f32 on |x|, one FMNMX per element instead
// of the abs-bits AND + integer max): NaN anywhere -> NaN, else inf anywhere -> inf, else the
// largest magnitude, so is_finite / == 0 / floor_log2 of the result agree with quant::amax_of.
__device__ __forceinline__ float max_nan_abs(float a, float b) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(fabsf(a)), "f"(fabsf(b)));
  return r;
}
__device__ __forceinline__ float max_nan(float a, float b) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
__device__ __forceinline__ float amax32(const float* x) {
  float m0 = max_nan_abs(x[0], x[1]), m1 = max_nan_abs(x[2], x[3]);
  float m2 = max_nan_abs(x[4], x[5]), m3 = max_nan_abs(x[6], x[7]);
#pragma unroll
  for (int i = 8; i < 32; i += 8) {
    m0 = max_nan(m0, max_nan_abs(x[i], x[i + 1]));
    m1 = max_nan(m1, max_nan_abs(x[i + 2], x[i + 3]));
    m2 = max_nan(m2, max_nan_abs(x[i + 4], x[i + 5]));
    m3 = max_nan(m3, max_nan_abs(x[i + 6], x[i + 7]));
  }
  return max_nan(max_nan(m0, m1), max_nan(m2, m3));
}

// ---- E2M1 nearest-even by three adds against per-group magic constants (no per-element integer
// work beyond one 3-way min). For a group with scale 2^k, the code of w is RNE_E2M1(|w| / 2^k).
// With M0 = 2^(22+k) (ulp 2^(k-1)), M1 = 2M0 (ulp 2^k), M2 = 4M0 (ulp 2^(k+1)) and a = |w|:
//   fl(a + M0) = M0 + c05 * 2^(k-1), c05 = RNE(2a / 2^k)   (the step-0.5 code, right below 2)
//   fl(a + M1) = M1 + c1 * 2^k,       c1  = RNE(a / 2^k)    (step 1: codes c1 + 2 in [2, 4))
//   fl(a + M2) = M2 + c2 * 2^(k+1),   c2  = RNE(a / 2^(k+1)) (step 2: codes c2 + 4 in [4, 6])
// and the magnitude code is min(c05, c1 + 2, c2 + 4) for a / 2^k <= 6 (each branch over-counts
// outside its binade). Bringing the last two back to M0's binade (x * 0.5 + 2^k, x * 0.25 + 2^(k+1):
// exact) puts all three in one binade, where float order is integer order: min of the bit patterns
// = bits(M0) + code, and the low byte is the code (bits(M0) has a zero mantissa). Rounding happens
// once per add, to nearest even, exactly where RNE_E2M1(w * 2^-k) rounds, because scaling by 2^(k-1)
// is exact while everything stays normal: M0 >= 2^-105 for k >= -127; k <= kE2m1MagicMaxK keeps
// 4M0 finite (larger k takes the generic path). Checked against fmt::encode_e2m1 on the CPU
// (tests/cuda/test_quartet_fp4_magic.cu) and bit-exact through every kernel's GPU test.
inline constexpr int kE2m1MagicMaxK = 100;
struct E2m1Magic {
  float m0, m1, m2, h1, h2;
  float sat;  // 6 * 2^k: the largest magnitude the three adds encode (code 7)
};
NIBBLE_HD E2m1Magic e2m1_magic(int k) {
  return {fmt::pow2f(22 + k), fmt::pow2f(23 + k), fmt::pow2f(24 + k), fmt::pow2f(k), fmt::pow2f(k + 1),
          6.0f * fmt::pow2f(k)};
}
NIBBLE_HD uint32_t e2m1_magic_bits(float w, const E2m1Magic& m) {
  const float a = fabsf(w);
#ifdef __CUDA_ARCH__
  const uint32_t y0 = fmt::float_bits(__fadd_rn(a, m.m0));
  const uint32_t x1 = fmt::float_bits(__fmaf_rn(__fadd_rn(a, m.m1), 0.5f, m.h1));
  const uint32_t x2 = fmt::float_bits(__fmaf_rn(__fadd_rn(a, m.m2), 0.25f, m.h2));
  return __vimin3_u32(y0, x1, x2);
#else
  const uint32_t y0 = fmt::float_bits(a + m.m0);
  const uint32_t x1 = fmt::float_bits((a + m.m1) * 0.5f + m.h1);  // both steps exact, as the fma
  const uint32_t x2 = fmt::float_bits((a + m.m2) * 0.25f + m.h2);
  const uint32_t lo = y0 < x1 ? y0 : x1;
  return lo < x2 ? lo : x2;
#endif
}

// The same for any finite w, saturating: |w| / 2^k >= 6 gives code 7 (6.0), as fmt::encode_e2m1's
// satfinite does. One extra min per element; the MX quantizer needs it (the OCP scale lets the
// largest element of a group reach [6, 8) * 2^k), the Quartet quantizers do not.
NIBBLE_HD uint32_t e2m1_magic_bits_sat(float w, const E2m1Magic& m) {
  return e2m1_magic_bits(fminf(fabsf(w), m.sat), m);
}

// Packs 32 codes (low byte of mb[i]) with the sign of sb[i] (bit 31) into 16 bytes, low nibble =
// even element. Device: byte permutes (sign-replicating selectors) instead of per-element shifts.
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
  return r;
}
// 8 codes (low byte of m[i]) with the signs of s[i] (bit 31) -> one word, low nibble = element 0.
NIBBLE_HD uint32_t pack8_codes_signs(const uint32_t* m, const uint32_t* s) {
#ifdef __CUDA_ARCH__
  // Low bytes of 4 words -> one word; 0x..FB: bytes = sign of byte 3 of a / of b, replicated.
  const uint32_t even = prmt(prmt(m[0], m[2], 0x0040), prmt(m[4], m[6], 0x0040), 0x5410);
  const uint32_t odd = prmt(prmt(m[1], m[3], 0x0040), prmt(m[5], m[7], 0x0040), 0x5410);
  const uint32_t se = prmt(prmt(s[0], s[2], 0x00FB), prmt(s[4], s[6], 0x00FB), 0x5410);
  const uint32_t so = prmt(prmt(s[1], s[3], 0x00FB), prmt(s[5], s[7], 0x00FB), 0x5410);
  const uint32_t e = even | (se & 0x08080808u), o = odd | (so & 0x08080808u);
  return e | (o << 4);
#else
  uint32_t x = 0;
  for (int j = 0; j < 8; ++j) x |= ((m[j] & 0x7u) | ((s[j] >> 28) & 0x8u)) << (4 * j);
  return x;
#endif
}
NIBBLE_HD uint4 pack_codes_signs(const uint32_t* mb, const uint32_t* sb) {
  return make_uint4(pack8_codes_signs(mb, sb), pack8_codes_signs(mb + 8, sb + 8), pack8_codes_signs(mb + 16, sb + 16),
                    pack8_codes_signs(mb + 24, sb + 24));
}

// What the GPU's stochastic rounding draws from: quant::SrKey's stream and the Philox round keys of
// its seed, computed on the host where a kernel parameter (or a group policy in one) is built from the
// key, so every round's key is a constant-memory operand (fmt::PhiloxKeys). Converts implicitly from
// quant::SrKey; build it on the host, not per thread.
struct SrDraw {
  fmt::PhiloxKeys keys{};
  uint32_t stream = 0;
  SrDraw() = default;
  __host__ __device__ SrDraw(const quant::SrKey& k)  // NOLINT(google-explicit-constructor): launch arguments
      : keys(fmt::seed_round_keys(k.seed)), stream(k.stream) {}
};

// kWords (a multiple of 4) random words of elements first .. first+kWords-1 (first % 4 == 0), 4 per
// Philox block (fmt::random_bits's counter and key), calling f(i, r).
template <int kWords = 32, class F>
__device__ __forceinline__ void for_each_random_word(const SrDraw& draw, uint64_t first, F&& f) {
  static_assert(kWords % 4 == 0, "whole Philox blocks");
#pragma unroll
  for (int q = 0; q < kWords / 4; ++q) {
    const fmt::Philox4 r = fmt::random_block(draw.keys, draw.stream, (first >> 2) + static_cast<uint64_t>(q));
#pragma unroll
    for (int j = 0; j < 4; ++j) f(4 * q + j, r.v[j]);
  }
}

__device__ __forceinline__ void put_code(uint32_t (&w)[4], int i, uint32_t code) {
  w[i / 8] |= (code & 0xFu) << (4 * (i % 8));
}

// quant::quest_group on 32 values: returns the E8M0 scale, codes packed, trust mask bit i = element i.
__device__ __forceinline__ uint8_t quest_group_packed(const float* g, uint4& codes, uint32_t& mask) {
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < 32; ++i) sum += g[i];
  const float mean = sum / 32.0f;
  float ss = 0.0f;
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    const float d = g[i] - mean;
    ss += d * d;
  }
  const float sigma = sqrtf(ss / 32.0f);
  if (!quant::is_finite(sigma)) {
    codes = make_uint4(0, 0, 0, 0);
    mask = 0;
    return fmt::kE8M0Nan;
  }
  const float t = quant::kQuestClipPerSigma * sigma + quant::kQuestSigmaEpsilon;
  const int k = quant::quest_scale_exponent(t);
  if (k <= kE2m1MagicMaxK) {
    // v = g * 2^-k is exact scaling, so |v| < 6 <=> |g| < 6 * 2^k, and RNE_E2M1(clamp(v, -6, 6)) is
    // the magic code of g clamped to 6 * 2^k (sign kept: clamping preserves it).
    const E2m1Magic mg = e2m1_magic(k);
    const float lim = fmt::kE2M1Max * mg.h1;  // 6 * 2^k, exact
    uint32_t mb[32], sb[32];
    uint32_t m = 0;
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      const float a = fabsf(g[i]);
      m |= (a < lim ? 1u : 0u) << i;
      mb[i] = e2m1_magic_bits(fminf(a, lim), mg);
      sb[i] = fmt::float_bits(g[i]);
    }
    codes = pack_codes_signs(mb, sb);
    mask = m;
    return fmt::encode_e8m0_exponent(k);
  }
  const float inv = fmt::pow2f(-k);
  uint32_t w[4] = {0, 0, 0, 0};
  uint32_t m = 0;
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    // g finite (sigma is) and inv finite, so v is never NaN: the clamp + fadd encoder is exact here.
    const float v = g[i] * inv;
    const float a = fabsf(v);
    m |= (a < fmt::kE2M1Max ? 1u : 0u) << i;
    const uint32_t code = ((fmt::float_bits(v) >> 28) & 0x8u) | e2m1_magnitude_fadd(fminf(a, fmt::kE2M1Max));
    put_code(w, i, code);
  }
  codes = make_uint4(w[0], w[1], w[2], w[3]);
  mask = m;
  return fmt::encode_e8m0_exponent(k);
}

// quant::absmax_forward_group (the OCP MXFP4 rule with QuEST's trust mask) on 32 values.
__device__ __forceinline__ uint8_t absmax_forward_group_packed(const float* g, uint4& codes, uint32_t& mask) {
  const uint8_t sc = quant::mx_scale_code(quant::amax_of(g, 32), quant::MxScaleRule::ocp, quant::ElementFormat::e2m1);
  const float inv = quant::mx_encode_multiplier(sc);
  uint32_t w[4] = {0, 0, 0, 0};
  uint32_t m = 0;
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    const float v = g[i] * inv;
    m |= (sc != fmt::kE8M0Nan && quant::abs_bits(v) < fmt::float_bits(fmt::kE2M1Max) ? 1u : 0u) << i;
    put_code(w, i, sc == fmt::kE8M0Nan ? 0u : encode_e2m1_fadd(v));
  }
  codes = make_uint4(w[0], w[1], w[2], w[3]);
  mask = m;
  return sc;
}

// quant::quantize_mx_group(x, 32, e2m1, rule, key, first, ...) with packed codes; first % 4 == 0.
template <bool kStochastic>
__device__ __forceinline__ uint8_t mx_group_packed(const float* x, quant::MxScaleRule rule, const SrDraw& key,
                                                   uint64_t first, uint4& codes) {
  const uint8_t sc = quant::mx_scale_code(amax32(x), rule, quant::ElementFormat::e2m1);
  uint32_t w[4] = {0, 0, 0, 0};
  if (sc != fmt::kE8M0Nan) {  // a NaN scale carries the block: codes 0 (quant::mx_encode_element)
    if constexpr (!kStochastic) {
      const int k = static_cast<int>(sc) - 127;
      if (k <= kE2m1MagicMaxK) {
        // RNE_E2M1(x * 2^-k) by three adds (x * 2^-k is exact, or underflows far below E2M1's
        // smallest step: code 0 either way), saturating as encode_e2m1 does.
        const E2m1Magic mg = e2m1_magic(k);
        uint32_t mb[32], sb[32];
#pragma unroll
        for (int i = 0; i < 32; ++i) {
          mb[i] = e2m1_magic_bits_sat(x[i], mg);
          sb[i] = fmt::float_bits(x[i]);
        }
        codes = pack_codes_signs(mb, sb);
        return sc;
      }
    }
    const float inv = quant::mx_encode_multiplier(sc);
    if constexpr (kStochastic) {
      for_each_random_word(key, first, [&](int i, uint32_t r) { put_code(w, i, encode_e2m1_sr_fast(x[i] * inv, r)); });
    } else {
#pragma unroll
      for (int i = 0; i < 32; ++i) put_code(w, i, encode_e2m1_fadd(x[i] * inv));
    }
  }
  codes = make_uint4(w[0], w[1], w[2], w[3]);
  return sc;
}

// ---- the three adds on BF16 pairs: MXFP4 of BF16 input, nearest ----------------------------------
// For BF16 input, the MX element rule (RNE_E2M1(x 2^-k), saturating) runs the three-add encoder above
// in bfloat16x2 arithmetic: two elements per instruction, and no BF16 -> FP32 unpacking. BF16 has an
// 8-bit significand, so the constants are M0 = 2^(6+k) (ulp 2^(k-1)), M1 = 2^(7+k) and M2 = 2^(8+k),
// and fl(a + M1) * 0.5 + 2^k, fl(a + M2) * 0.25 + 2^(k+1) (one fma.rn.bf16x2 each) are exactly
// M0 + (c1 + 2) 2^(k-1), M0 + (c2 + 4) 2^(k-1), whose significands 128 + n (n <= 12) fit: the
// unsigned 16-bit min of the three is (M0's exponent field << 7) + code. Valid for kBf16MagicMinK <=
// k <= kE2m1MagicMaxK, where every constant is a normal BF16 and a subnormal |x| (< 2^-126 <=
// 2^(k-6)) has code 0 whether or not the hardware flushes it. Checked exhaustively on the CPU (every
// BF16 x, every k in range, the BF16 operations modelled as IEEE round-to-nearest-even: tests/cuda/
// test_quartet_fused_forward.cu) and bit-exact through the MXFP4 kernel tests on the GPU.
inline constexpr int kBf16MagicMinK = -120;
struct Bf16Magic {
  uint32_t m0, m1, m2, h1, h2;  // BF16 pairs (both halfwords equal): 2^(6+k), 2^(7+k), 2^(8+k), 2^k, 2^(k+1)
  uint32_t sat;                 // 6 * 2^k = 1.5 * 2^(k+2)
};
NIBBLE_HD constexpr uint32_t bf16x2_pow2(int e) {
  const uint32_t h = static_cast<uint32_t>(e + 127) << 7;
  return h | (h << 16);
}
NIBBLE_HD constexpr Bf16Magic bf16_magic(int k) {
  return {bf16x2_pow2(6 + k), bf16x2_pow2(7 + k), bf16x2_pow2(8 + k),
          bf16x2_pow2(k),     bf16x2_pow2(k + 1), bf16x2_pow2(k + 2) | 0x00400040u};
}
inline constexpr uint32_t kBf16x2Half = 0x3f003f00u, kBf16x2Quarter = 0x3e803e80u;

__device__ __forceinline__ uint32_t bf16x2_min(uint32_t a, uint32_t b) {
  uint32_t r;
  asm("min.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
__device__ __forceinline__ uint32_t bf16x2_add(uint32_t a, uint32_t b) {
  uint32_t r;
  asm("add.rn.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
__device__ __forceinline__ uint32_t bf16x2_fma(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t r;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
  return r;
}
// Magnitude codes of the two BF16 magnitudes in a (sign bits clear): per halfword (exponent << 7) + code.
__device__ __forceinline__ uint32_t e2m1_magic_bf16x2(uint32_t a, const Bf16Magic& m) {
  a = bf16x2_min(a, m.sat);
  const uint32_t y0 = bf16x2_add(a, m.m0);
  const uint32_t x1 = bf16x2_fma(bf16x2_add(a, m.m1), kBf16x2Half, m.h1);
  const uint32_t x2 = bf16x2_fma(bf16x2_add(a, m.m2), kBf16x2Quarter, m.h2);
  return __vimin3_u16x2(y0, x1, x2);
}
// 8 codes: magnitudes in the low 3 bits of each halfword of m[0..3] (low halfword = even element; bit
// 7 may hold an exponent bit), signs from bits 15 and 31 of the BF16 pairs s[0..3] -> one word, low
// nibble = element 0. prmt selector 0xFDB9 replicates the sign bits of bytes 1, 3, 5, 7.
__device__ __forceinline__ uint32_t pack8_bf16_codes_signs(const uint32_t* m, const uint32_t* s) {
  const uint32_t lo = __byte_perm(m[0], m[1], 0x6420) | (prmt(s[0], s[1], 0xFDB9) & 0x08080808u);  // elements 0..3
  const uint32_t hi = __byte_perm(m[2], m[3], 0x6420) | (prmt(s[2], s[3], 0xFDB9) & 0x08080808u);  // elements 4..7
  const uint32_t even = __byte_perm(lo, hi, 0x6420), odd = __byte_perm(lo, hi, 0x7531);
  return (even & 0x0F0F0F0Fu) | ((odd & 0x0F0F0F0Fu) << 4);
}

// The BF16-pair MX encoder on 16 BF16 pairs w (low halfword = even element) whose packed halfword
// magnitude max is m (bf16x2::abs_max2 over w). The rare fallback unpacks the pairs again.
__device__ __forceinline__ uint8_t mx_group_from_bf16_pairs(const uint32_t* w, uint32_t m, quant::MxScaleRule rule,
                                                            uint4& codes) {
  const uint8_t sc = quant::mx_scale_code(quant::amax_from_bits(bf16x2::both_amax_bits(m)), rule,
                                          quant::ElementFormat::e2m1);
  const int k = static_cast<int>(sc) - 127;
  if (sc == fmt::kE8M0Nan || k < kBf16MagicMinK || k > kE2m1MagicMaxK) {  // NaN block, or k out of range: rare
    float y[32];
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      y[2 * i] = fmt::bits_float(w[i] << 16);
      y[2 * i + 1] = fmt::bits_float(w[i] & 0xffff0000u);
    }
    return mx_group_packed<false>(y, rule, SrDraw{}, 0, codes);
  }
  const Bf16Magic mg = bf16_magic(k);
  uint32_t out[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    uint32_t c[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) c[i] = e2m1_magic_bf16x2(w[4 * j + i] & 0x7fff7fffu, mg);
    out[j] = pack8_bf16_codes_signs(c, w + 4 * j);
  }
  codes = make_uint4(out[0], out[1], out[2], out[3]);
  return sc;
}

// mx_group_packed<false> for 32 values that are BF16 (the kernels' BF16 input, unpacked to float):
// the floats are dead once packed into pairs.
__device__ __forceinline__ uint8_t mx_group_packed_bf16(const float* x, quant::MxScaleRule rule, uint4& codes) {
  uint32_t w[16];
  uint32_t m = 0;
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    w[i] = __byte_perm(fmt::float_bits(x[2 * i]), fmt::float_bits(x[2 * i + 1]), 0x7632);
    m = bf16x2::abs_max2(m, w[i]);
  }
  return mx_group_from_bf16_pairs(w, m, rule, codes);
}

// The same on 16 BF16 pairs as they sit in memory (the BF16 tile of fp4_rowcol_tile.cuh).
__device__ __forceinline__ uint8_t mx_group_packed_bf16_pairs(const uint32_t* w, quant::MxScaleRule rule, uint4& codes) {
  uint32_t m = 0;
#pragma unroll
  for (int i = 0; i < 16; ++i) m = bf16x2::abs_max2(m, w[i]);
  return mx_group_from_bf16_pairs(w, m, rule, codes);
}

// The MX group encoder of a kernel: the BF16-pair one for BF16 input with nearest rounding, else
// mx_group_packed.
template <bool kStochastic, bool kBf16>
__device__ __forceinline__ uint8_t mx_group_encode(const float* x, quant::MxScaleRule rule, const SrDraw& key,
                                                   uint64_t first, uint4& codes) {
  if constexpr (!kStochastic && kBf16) {
    return mx_group_packed_bf16(x, rule, codes);
  } else {
    return mx_group_packed<kStochastic>(x, rule, key, first, codes);
  }
}

// quant::quartet_backward_group(x, 32, key, first, ...) with packed codes; first % 4 == 0.
template <bool kStochastic>
__device__ __forceinline__ uint8_t backward_group_packed(const float* x, const SrDraw& key, uint64_t first,
                                                         uint4& codes) {
  const float amax = amax32(x);
  if (!quant::is_finite(amax) || amax == 0.0f) {
    codes = make_uint4(0, 0, 0, 0);
    return amax == 0.0f ? 0 : fmt::kE8M0Nan;
  }
  const int k = quant::clamp_exponent(fmt::floor_log2(amax) - 2);
  if constexpr (!kStochastic) {
    if (k <= kE2m1MagicMaxK) {
      // v = (0.75 x) * 2^-k is exact scaling of w = 0.75 x, so RNE_E2M1(v) = magic code of w.
      const E2m1Magic mg = e2m1_magic(k);
      uint32_t mb[32], sb[32];
#pragma unroll
      for (int i = 0; i < 32; ++i) {
        const float w = quant::kQuartetBackwardPrescale * x[i];
        mb[i] = e2m1_magic_bits(w, mg);
        sb[i] = fmt::float_bits(w);
      }
      codes = pack_codes_signs(mb, sb);
      return fmt::encode_e8m0_exponent(k);
    }
  }
  const float inv = fmt::pow2f(-k);
  uint32_t w[4] = {0, 0, 0, 0};
  if constexpr (kStochastic) {
    for_each_random_word(key, first, [&](int i, uint32_t r) {
      put_code(w, i, encode_e2m1_sr_fast((quant::kQuartetBackwardPrescale * x[i]) * inv, r));
    });
  } else {
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      // |v| < 0.75 * 2^(floor_log2(amax) + 1 - k) <= 6 (and < 3 when k is clamped at -127), never
      // NaN: the magnitude encoder needs no clamp (it is exact for every c < 7).
      const float v = (quant::kQuartetBackwardPrescale * x[i]) * inv;
      put_code(w, i, ((fmt::float_bits(v) >> 28) & 0x8u) | e2m1_magnitude_fadd(fabsf(v)));
    }
  }
  codes = make_uint4(w[0], w[1], w[2], w[3]);
  return fmt::encode_e8m0_exponent(k);
}

}  // namespace nibble::cuda::fp4
