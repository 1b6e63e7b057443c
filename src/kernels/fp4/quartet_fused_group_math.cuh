// Per-group FP4 math of the quantization kernels: the same expressions, in the same order, as the
// CPU reference (quant::quest_group, quant::quartet_backward_group, quant::quantize_mx_group), on the
// element encoders of e2m1_element_math.cuh, which alter no result but remove most of the per-element
// work (one float add per nearest-even code instead of ~25 integer ops with 64-bit shifts; one Philox
// block per 4 consecutive elements on the stochastic paths: group index bases are multiples of 32).
// Codes come out packed (16 bytes per group, low nibble = even element) and masks as one word, so
// nothing is kept in per-element byte arrays (those spilled to local memory in the SR kernels).
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "common/bf16x2_amax.cuh"
#include "fp4/e2m1_element_math.cuh"
#include "nibble/format/e8m0.hpp"
#include "nibble/format/minifloat.hpp"
#include "nibble/format/philox.hpp"
#include "nibble/quant/element_codecs.hpp"

namespace nibble::cuda::fp4 {

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
// BF16 x, every k in range, the BF16 operations modelled as IEEE round-to-nearest-even: tests/kernels/
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
  const uint8_t sc = quant::mx_scale_code_of_abs_bits(bf16x2::both_amax_bits(m), rule, quant::ElementFormat::e2m1);
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

// quant::absmax_forward_group on 32 values: the backward quantizer's nearest rounding (3/4 prescale,
// never clips) with every element trusted.
__device__ __forceinline__ uint8_t absmax_forward_group_packed(const float* g, uint4& codes, uint32_t& mask) {
  mask = 0xffffffffu;
  return backward_group_packed<false>(g, SrDraw{}, 0, codes);  // nearest: the key is unused
}

}  // namespace nibble::cuda::fp4
