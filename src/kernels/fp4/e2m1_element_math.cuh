// Element-level FP4 math of the quantization kernels (shared by the group encoders of
// quartet_fused_group_math.cuh and the NVFP4 kernels): E2M1 codes by float adds instead of the generic
// bit-level fmt::encode_minifloat, each equal to the reference encoder on every input it takes:
//  - encode_e2m1_fadd: nearest-even by ONE float add (identity with fmt::encode_e2m1 checked on all 2^32
//    float bit patterns: tests/kernels/test_quartet_fused_forward.cu on the GPU, and once on the CPU);
//  - encode_e2m1_sr_fast: stochastic rounding without 64-bit significand arithmetic or a branch;
//  - the three adds against per-group magic constants (e2m1_magic_bits[_sat]) and the byte-permute packing;
//  - NaN-propagating maxima, and the Philox draws: one block per 4 consecutive elements
//    (for_each_random_word), exactly fmt::random_bits(seed, stream, first + i).
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

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
// a two-case form runs both cases). With b = bits(|x|), E = b >> 23 and sig = the 24-bit
// significand, y = sig * 2^(min(E, 127) - 117) = (sig << 10) >> (127 - min(E, 127)) (truncated) is
// |x| / step as a fixed-point number with 32 fraction bits, where step = 0.5 below 2 and
// 2^(E-127-1) above: the round-down code is its integer part plus 2 (E - 127) for E >= 127 (the
// binades [2, 4) and [4, 8) start at codes 4 and 6), and P(up) = its fraction / 2^32. Zeros and
// subnormals (E = 0) give y = 0. Codes saturate at 7 (satfinite; +-inf -> +-6); NaN -> 0x7
// without sign. Checked against fmt::encode_e2m1_sr on the CPU (tests/kernels/
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
// (tests/kernels/test_quartet_fused_forward.cu, E2m1MagicEncoder) and bit-exact through every kernel's GPU test.
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

}  // namespace nibble::cuda::fp4
