// NVFP4 group math of the CUDA quantizer (src/kernels/fp4/quantize_nvfp4.cu): the RHT-16 butterflies and
// their BF16 output, group maxima, the per-copy scales, the per-code element encode scales, the block
// scale code and the E2M1 codes of one block, each bit-identical to the CPU reference
// (quant::nvfp4_rht_output, quant::nvfp4_block_scale_code, quant::nvfp4_encode_element).
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

// max |v[j]| over N values as amax bits (quant::amax_combine_bits of abs_bits: NaN anywhere ->
// bits above inf's; max.NaN gives the canonical NaN, whose magnitude bits are above inf's too).
template <int N>
__device__ __forceinline__ float max_abs(const float* v) {
  float m = fabsf(v[0]);
#pragma unroll
  for (int j = 1; j < N; ++j) m = fp4::max_nan(m, fabsf(v[j]));
  return m;
}
template <int N>
__device__ __forceinline__ uint32_t amax_bits_of(const float* v) {
  return quant::abs_bits(max_abs<N>(v));
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
// (exact negations) and the butterflies of the reference, in its order. rht_output then applies the
// reference's multiply by 1/4 and its rounding to BF16 (quant::nvfp4_rht_output). Both are monotone
// in |y| and odd, so the amax of a rotated group is rht_output of the unnormalised maximum: one
// multiply and one rounding per group (rotated_max_abs16).
constexpr float kRhtNorm = quant::hadamard_norm(16);  // 1/4, exact
static_assert(kRhtNorm == 0.25f, "RHT-16 normalisation is a power of two");
__device__ __forceinline__ float rht_output(float y) { return quant::nvfp4_rht_output(__fmul_rn(y, kRhtNorm)); }
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
// The rotated values (rht_output) of an unnormalised rotation, in place.
template <int N>
__device__ __forceinline__ void rht_outputs(float* v) {
#pragma unroll
  for (int j = 0; j < N; ++j) v[j] = rht_output(v[j]);
}

// Per-copy constants: the global encode scale S_enc, the decode scale S_dec = 1 / S_enc (the copy's
// tensor_scale) and the block scale multiplier S_enc * fl(1/6), from the copy's amax.
struct CopyScale {
  float enc = 1.0f, dec = 1.0f, mult = quant::nvfp4_block_scale_multiplier(1.0f);
};
__device__ __forceinline__ CopyScale copy_scale(const uint32_t* amax_bits) {
  CopyScale c;
  c.enc = quant::nvfp4_global_encode_scale(quant::amax_from_bits(*amax_bits));
  c.dec = quant::nvfp4_global_decode_scale_of(c.enc);
  c.mult = quant::nvfp4_block_scale_multiplier(c.enc);
  return c;
}
// Table entry of UE4M3 code `code`: the element encode scale of its blocks (the NaN code's entry is
// never used: encode_block writes zero codes for it).
__device__ __forceinline__ float encode_scale_entry(int code, const CopyScale& c) {
  return quant::nvfp4_element_encode_scale(static_cast<uint8_t>(code), c.dec);
}

// quant::nvfp4_block_scale_code(amax_from_bits(bits), S_enc): the product by the hardware E4M3
// converter, which equals fmt::encode_ue4m3 on every non-negative float (satfinite, NaN -> 0x7F by
// fp8x2_rn_hw's fix-up).
__device__ __forceinline__ uint8_t block_code(uint32_t bits, const CopyScale& c) {
  const float y = __fmul_rn(quant::amax_from_bits(bits), c.mult);
  return static_cast<uint8_t>(fp8x2_rn_hw<quant::ElementFormat::e4m3>(y, 0.0f) & 0xFFu);
}

// N codes (N = 8 or 16) of one block with code sc and element encode scale e, packed (low nibble =
// element 0) into N / 8 words: quant::nvfp4_encode_element(v[j], sc, S_dec, key, first + j) for each j
// (first % 4 == 0). w = fl(v e) is never NaN outside a NaN block (v finite or +-inf, 0 < e <= FLT_MAX);
// both fast encoders equal fmt's on every such float (e2m1_element_math.cuh).
template <int N, bool kSr>
__device__ __forceinline__ void encode_block(const float* v, uint8_t sc, float e, const fp4::SrDraw& draw,
                                             uint64_t first, uint32_t* out) {
#pragma unroll
  for (int j = 0; j < N / 8; ++j) out[j] = 0;
  if (sc == fmt::kUE4M3().nan_code) return;  // the scale carries the NaN
  if constexpr (kSr) {
    fp4::for_each_random_word<N>(draw, first, [&](int j, uint32_t bits) {
      const float w = __fmul_rn(v[j], e);
      out[j / 8] |= fp4::encode_e2m1_sr_fast(w, bits) << (4 * (j % 8));
    });
  } else {
    const fp4::E2m1Magic mg = fp4::e2m1_magic(0);
    uint32_t mb[N], sb[N];
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const float w = __fmul_rn(v[j], e);
      mb[j] = fp4::e2m1_magic_bits_sat(w, mg);
      sb[j] = fmt::float_bits(w);
    }
#pragma unroll
    for (int j = 0; j < N / 8; ++j) out[j] = fp4::pack8_codes_signs(mb + 8 * j, sb + 8 * j);
  }
}

}  // namespace nibble::cuda::nvfp4
