// A fast float -> E2M1 encoder (round to nearest even, satfinite), bit-identical to fmt::encode_e2m1
// on all 2^32 float bit patterns (tests/kernels/test_e2m1_fast_math.cu checks every one on the GPU).
//
// Why: fmt::encode_minifloat is generic (any format, stochastic rounding) and costs ~25 integer ops
// with 64-bit shifts per element; the FP4 quantizers are memory-bound only if the per-element work
// stays small. Hopper has no hardware converter: cvt.rn.satfinite.e2m1x2.f32 exists from sm_100a
// on (ptxas rejects it for sm_90a; cuda_fp4.hpp falls back to software below sm_100 as well).
//
// How: E2M1 holds the magnitudes {0, 0.5, 1, 1.5, 2, 3, 4, 6}, so nearest-even rounding is fixed
// thresholds on |x|; at the midpoints 0.25, 1.25, 2.5, 5 the even neighbour is the lower code (0, 2,
// 4, 6: "> t"), at 0.75, 1.75, 3.5 it is the upper one (2, 4, 6: ">= t"). Comparing the IEEE bit
// pattern of |x| as an unsigned integer orders like the value (inf above every finite, NaN above
// inf), so the code is a sum of seven integer compares. Special values as fmt::encode_e2m1: NaN ->
// 0x7 without sign (E2M1 has no NaN; the block scale carries it), +-inf -> +-6, float subnormals and
// +-0 -> +-0.
#pragma once
#include <cmath>
#include <cstdint>

#include "nibble/format/host_device.hpp"

namespace nibble::cuda {

NIBBLE_HD constexpr uint8_t encode_e2m1_fast(float x) {
  const uint32_t b = fmt::float_bits(x);
  const uint32_t a = b & 0x7fffffffu;
  if (a > 0x7f800000u) return 0x7;
  const uint32_t code = static_cast<uint32_t>(a > 0x3E800000u)      // 0.25 -> 0.5
                        + static_cast<uint32_t>(a >= 0x3F400000u)   // 0.75 -> 1
                        + static_cast<uint32_t>(a > 0x3FA00000u)    // 1.25 -> 1.5
                        + static_cast<uint32_t>(a >= 0x3FE00000u)   // 1.75 -> 2
                        + static_cast<uint32_t>(a > 0x40200000u)    // 2.5  -> 3
                        + static_cast<uint32_t>(a >= 0x40600000u)   // 3.5  -> 4
                        + static_cast<uint32_t>(a > 0x40A00000u);   // 5    -> 6
  return static_cast<uint8_t>(((b >> 28) & 0x8u) | code);
}

// Two codes packed as one byte, low nibble = the first (even-column) element, as the MXFP4 / NVFP4
// code planes store them.
NIBBLE_HD constexpr uint8_t encode_e2m1x2_fast(float even, float odd) {
  return static_cast<uint8_t>(encode_e2m1_fast(even) | (encode_e2m1_fast(odd) << 4));
}

static_assert(encode_e2m1_fast(0.25f) == 0x0 && encode_e2m1_fast(0.75f) == 0x2 && encode_e2m1_fast(1.25f) == 0x2 &&
                  encode_e2m1_fast(1.75f) == 0x4 && encode_e2m1_fast(2.5f) == 0x4 && encode_e2m1_fast(3.5f) == 0x6 &&
                  encode_e2m1_fast(5.0f) == 0x6 && encode_e2m1_fast(-5.0001f) == 0xF && encode_e2m1_fast(-0.0f) == 0x8,
              "E2M1 midpoints round to the even neighbour, sign in bit 3");

}  // namespace nibble::cuda
