// NVFP4 group math of the CUDA quantizer (src/kernels/fp4/quantize_nvfp4.cu): the RHT-16 butterflies without
// their 1/4, group maxima, the per-copy scales and the UE4M3 decode-table entries, the block scale code
// and the E2M1 codes of one block, each bit-identical to the CPU reference (quant::nvfp4_block_scale_code,
// quant::nvfp4_encode_element), with the reference expressions out of line for rare groups.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "fp4/quartet_fused_group_math.cuh"
#include "nibble/kernels/e2m1_fast_math.hpp"
#include "nibble/kernels/fp8_hw_convert_math.hpp"
#include "nibble/quant/hadamard.hpp"
#include "nibble/quant/scale_rules.hpp"

namespace nibble::cuda::nvfp4 {

constexpr int kPartner = 4;  // lane ^ 4 holds the other half of a row-wise 16-group

// max |f v[j]| over N values as amax bits (quant::amax_combine_bits of abs_bits: NaN anywhere ->
// bits above inf's; max.NaN gives the canonical NaN, whose magnitude bits are above inf's too).
// f = the group's pending normalisation (1, or 1/4 after unnormalised butterflies): RN(f y) is
// monotone in |y|, so the max of the products is the product of the max, one multiply per group.
template <int N>
__device__ __forceinline__ float max_abs(const float* v) {
  float m = fabsf(v[0]);
#pragma unroll
  for (int j = 1; j < N; ++j) m = fp4::max_nan(m, fabsf(v[j]));
  return m;
}
template <int N>
__device__ __forceinline__ uint32_t amax_bits_of(const float* v, float f) {
  return quant::abs_bits(__fmul_rn(max_abs<N>(v), f));
}

// One butterfly stage of stride H over N values (a + b, a - b), indices compile-time.
template <int N, int H>
__device__ __forceinline__ void butterflies(float* v) {
#pragma unroll
  for (int i = 0; i < N; i += 2 * H) {
#pragma unroll
    for (int j = i; j < i + H; ++j) {
      const float a = v[j], b = v[j + H];
      v[j] = __fadd_rn(a, b);
      v[j + H] = __fsub_rn(a, b);
    }
  }
}

// quant::rotate_block_forward(v, {16, nvfp4_fixed}) WITHOUT its final multiply by 1/4: the signs
// (exact negations) and the butterflies of the reference, in its order. The callers fold the 1/4
// into what follows (kRhtNorm): the amax (max_abs above) and the division by the block scale, where
// RN(RN(y / 4) / d) == RN(y / (4 d)) whenever y / 4 is exact, and otherwise |y / 4| < 2^-126 and
// the code is 0 (or the sign-only -0) either way (d >= 2^-62 on that path).
constexpr float kRhtNorm = quant::hadamard_norm(16);  // 1/4, exact
static_assert(kRhtNorm == 0.25f, "RHT-16 normalisation is a power of two");
__device__ __forceinline__ void rotate16_first_stages(float* v) {  // signs, strides 1, 2, 4
#pragma unroll
  for (int j = 0; j < 16; ++j) v[j] = ((quant::kNvfp4RhtSignMask >> j) & 1u) ? -v[j] : v[j];
  butterflies<16, 1>(v);
  butterflies<16, 2>(v);
  butterflies<16, 4>(v);
}
__device__ __forceinline__ void rotate16_unnormalised(float* v) {
  rotate16_first_stages(v);
  butterflies<16, 8>(v);
}
// max |y_j| over the unnormalised rotation y of v, without the last stage's 16 outputs: for finite
// a, b, max(|RN(a + b)|, |RN(a - b)|) == RN(|a| + |b|) (RN is odd and monotone, and one of the two
// is |a| + |b| exactly before rounding), so the stride-8 stage and its maxima become 8 adds of
// magnitudes. An infinite result may hide the NaN of inf - inf in the real stage, so it redoes the
// stage; a NaN propagates either way. Clobbers v.
__device__ __forceinline__ float rotated_max_abs16(float* v) {
  rotate16_first_stages(v);
  float m = __fadd_rn(fabsf(v[0]), fabsf(v[8]));
#pragma unroll
  for (int j = 1; j < 8; ++j) m = fp4::max_nan(m, __fadd_rn(fabsf(v[j]), fabsf(v[j + 8])));
  if (fabsf(m) == INFINITY) {
    butterflies<16, 8>(v);
    m = max_abs<16>(v);
  }
  return m;
}
// The same on a row-wise group split over two lanes: this lane holds elements half*8 .. half*8+7.
// Butterflies of stride 1, 2, 4 stay in the lane; stride 8 pairs element j of both lanes (the low
// half keeps a + b, the high half a - b). Every lane of the warp must call it.
__device__ __forceinline__ void rotate16_split_unnormalised(float* v, int half) {
#pragma unroll
  for (int j = 0; j < 8; ++j) v[j] = ((quant::kNvfp4RhtSignMask >> (half * 8 + j)) & 1u) ? -v[j] : v[j];
  butterflies<8, 1>(v);
  butterflies<8, 2>(v);
  butterflies<8, 4>(v);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float o = __shfl_xor_sync(0xffffffffu, v[j], kPartner);
    v[j] = half == 0 ? __fadd_rn(v[j], o) : __fsub_rn(o, v[j]);
  }
}

// Per-copy constants: the global decode scale s, RN(1 / s) when the reciprocal scale quotient is
// exact for it (else 0), and the table of block decode scales d = decode_ue4m3(code) * s with
// RN(1 / d) (0 where d is outside div_rn_by_recip's range: the element falls back).
struct CopyScale {
  float s = 1.0f, rs = 0.0f;
  float f = 1.0f;  // the pending normalisation of the copy's values: kRhtNorm when rotated, else 1
};
__device__ __forceinline__ CopyScale copy_scale(const uint32_t* amax_bits, bool rht) {
  CopyScale c;
  c.s = quant::nvfp4_global_decode_scale(quant::amax_from_bits(*amax_bits));
  c.f = rht ? kRhtNorm : 1.0f;
  c.rs = (c.s >= kRecipDivMin && c.s <= kRecipDivMax) ? __frcp_rn(c.s) : 0.0f;
  return c;
}
// Entry: the divisor of the copy's (unnormalised) values, d / f (exact: f is 1 or 1/4), and its
// reciprocal when div_rn_by_recip is exact for it.
__device__ __forceinline__ float2 decode_entry(int code, const CopyScale& c) {
  const float d = (fmt::decode_ue4m3(static_cast<uint8_t>(code)) * c.s) / c.f;
  return make_float2(d, (d >= kRecipDivMin && d <= kRecipDivMax) ? __frcp_rn(d) : 0.0f);
}

// The reference expressions, out of line: the kernels call them only for rare groups, and inlining
// the generic encoders at each of a thread's 24 groups would multiply the code size.
__device__ __noinline__ uint8_t block_code_reference(float amax, float s) { return quant::nvfp4_block_scale_code(amax, s); }
struct Eight {
  float v[8];
};
__device__ __noinline__ uint32_t encode8_reference(Eight e, uint8_t sc, float s, quant::SrKey key, uint64_t first) {
  uint32_t w = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    w |= static_cast<uint32_t>(quant::nvfp4_encode_element(e.v[j], sc, s, key, first + static_cast<uint64_t>(j)) & 0xF) << (4 * j);
  }
  return w;
}

// quant::nvfp4_block_scale_code(amax_from_bits(bits), s).
__device__ __forceinline__ uint8_t block_code(uint32_t bits, const CopyScale& c) {
  const float amax = quant::amax_from_bits(bits);
  if (c.rs != 0.0f && amax >= kScaleQuotientAmaxMin && bits < 0x7f800000u) {
    const float y = nvfp4_scale_quotient_by_recip(amax, c.s, c.rs);
    if (y < kScaleQuotientMax) return static_cast<uint8_t>(fp8x2_rn_hw<quant::ElementFormat::e4m3>(y, 0.0f) & 0xFFu);
  }
  return block_code_reference(amax, c.s);
}

// N codes (N = 8 or 16) of one block with code sc, packed (low nibble = element 0) into N / 8 words:
// quant::nvfp4_encode_element(v[j], sc, s, key, first + j) for each j (first % 4 == 0).
template <int N, bool kSr>
__device__ __forceinline__ void encode_block(const float* v, uint8_t sc, float2 dr, const CopyScale& cs,
                                             const quant::SrKey& key, const fp4::SrDraw& draw, uint64_t first,
                                             uint32_t* out) {
  const float d = dr.x, r = dr.y;
  if (r != 0.0f) {
    // RN(v / d); |v / d| >= 8 (or a NaN from an overflowing v r) saturates to code 7 in both encoders.
    if constexpr (kSr) {
#pragma unroll
      for (int j = 0; j < N / 8; ++j) out[j] = 0;
      fp4::for_each_random_word<N>(draw, first, [&](int j, uint32_t bits) {
        const uint32_t m = fp4::encode_e2m1_sr_fast(fabsf(div_rn_by_recip(v[j], d, r)), bits);
        out[j / 8] |= (((fmt::float_bits(v[j]) >> 28) & 0x8u) | m) << (4 * (j % 8));
      });
    } else {
      const fp4::E2m1Magic mg = fp4::e2m1_magic(0);
      uint32_t mb[N], sb[N];
#pragma unroll
      for (int j = 0; j < N; ++j) {
        mb[j] = fp4::e2m1_magic_bits_sat(div_rn_by_recip(v[j], d, r), mg);  // fminf(NaN, 6) = 6
        sb[j] = fmt::float_bits(v[j]);
      }
#pragma unroll
      for (int j = 0; j < N / 8; ++j) out[j] = fp4::pack8_codes_signs(mb + 8 * j, sb + 8 * j);
    }
  } else {
    quant::SrKey k = key;
    if constexpr (!kSr) k.enabled = false;  // the nearest kernel carries no generator
#pragma unroll
    for (int h = 0; h < N / 8; ++h) {
      Eight e;
#pragma unroll
      for (int j = 0; j < 8; ++j) e.v[j] = __fmul_rn(v[8 * h + j], cs.f);  // the reference's values
      out[h] = encode8_reference(e, sc, cs.s, k, first + static_cast<uint64_t>(8 * h));
    }
  }
}

}  // namespace nibble::cuda::nvfp4
