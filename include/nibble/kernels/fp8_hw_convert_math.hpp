// Hardware FP8 conversion (sm_89+: cvt.rn.satfinite.{e4m3,e5m2}x2.f32) made bit-identical to
// nibble::fmt's software encoders, for the nearest-even path of the FP8 kernels.
//
// Why: the software encoder (fmt::encode_minifloat) costs ~30 integer instructions per element;
// at HBM speed a cast+transpose writes two codes per element and would be compute-bound. The
// hardware converter does two elements per instruction. Both implement IEEE round-to-nearest-even
// with saturation to the largest finite value (inf -> +-max included); the one difference is NaN,
// where fmt writes the canonical positive code 0x7F and the hardware keeps the sign, so NaN is
// fixed up here. tests/kernels/test_quantize_fp8_hw_convert.cu compares the two on all 2^32 floats.
// Stochastic rounding has no sm_90 instruction and always uses the shared software encoder.
#pragma once
#include <cstdint>

#include "nibble/format/minifloat.hpp"
#include "nibble/quant/element_codecs.hpp"

namespace nibble::cuda {

#if defined(__CUDACC__)
// Two codes packed little-endian: lo in bits 0..7, hi in bits 8..15.
template <quant::ElementFormat F>
__device__ __forceinline__ uint32_t fp8x2_rn_hw(float lo, float hi) {
  static_assert(F == quant::ElementFormat::e4m3 || F == quant::ElementFormat::e5m2, "FP8 formats only");
  uint16_t d;
  // PTX: the first source lands in the upper byte.
  if constexpr (F == quant::ElementFormat::e4m3) {
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(d) : "f"(hi), "f"(lo));
  } else {
    asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(d) : "f"(hi), "f"(lo));
  }
  uint32_t r = d;
  constexpr uint32_t kNan = F == quant::ElementFormat::e4m3 ? fmt::kE4M3().nan_code : fmt::kE5M2().nan_code;
  if (lo != lo) r = (r & 0xff00u) | kNan;
  if (hi != hi) r = (r & 0x00ffu) | (kNan << 8);
  return r;
}

// code[i] = quant::encode_scaled(F, x[i], s, sr, index0 + i) for 16 consecutive elements, packed
// into 16 bytes (code 0 in the lowest byte). Nearest-even uses the hardware converter.
template <quant::ElementFormat F, bool kStochastic>
__device__ __forceinline__ uint4 encode16_scaled(const float (&x)[16], float s, const quant::SrKey& sr,
                                                 uint64_t index0) {
  uint32_t w[4];
  if constexpr (kStochastic) {
    // index0 % 4 == 0 (the callers' 16-element runs start at multiples of 16), so the 4 elements of word
    // i share Philox block index0 / 4 + i: one block per 4 codes, as fmt::random_bits draws them.
    const fmt::PhiloxKeys keys = fmt::seed_round_keys(sr.seed);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const fmt::Philox4 r = fmt::random_block(keys, sr.stream, (index0 >> 2) + static_cast<uint64_t>(i));
      w[i] = 0;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        w[i] |= static_cast<uint32_t>(quant::encode_element(F, x[4 * i + j] * s, sr.enabled, r.v[j])) << (8 * j);
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      w[i] = fp8x2_rn_hw<F>(x[4 * i] * s, x[4 * i + 1] * s) |
             fp8x2_rn_hw<F>(x[4 * i + 2] * s, x[4 * i + 3] * s) << 16;
    }
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// MX elements: quant::mx_encode_element for 16 consecutive elements of one block with scale code sc.
template <quant::ElementFormat F, bool kStochastic>
__device__ __forceinline__ uint4 encode16_mx(const float (&x)[16], uint8_t sc, const quant::SrKey& sr,
                                             uint64_t index0) {
  if (sc == fmt::kE8M0Nan) return make_uint4(0, 0, 0, 0);  // the scale carries the NaN
  return encode16_scaled<F, kStochastic>(x, quant::mx_encode_multiplier(sc), sr, index0);
}
#endif

}  // namespace nibble::cuda
