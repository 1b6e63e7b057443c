// Pieces of the Quartet backward quantizer's kernels (quartet_backward.cu): the random signs as +-1
// multipliers, the signed rotation, the store of one quantized 32-group, and the group policy that
// runs them inside the shared 64x128 row + column tile (fp4_rowcol_tile.cuh).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "fp4/fp4_kernel_io.cuh"
#include "fp4/fp4_rowcol_tile.cuh"
#include "fp4/quartet_fused_group_math.cuh"
#include "nibble/kernels/quartet.hpp"
#include "nibble/format/e8m0.hpp"
#include "nibble/format/minifloat.hpp"
#include "nibble/quant/hadamard.hpp"

namespace nibble::cuda::bwd {

// The random signs as +-1.0f multipliers, passed by value: the kernel parameter lives in the
// constant bank, so each sign is an FMUL with a constant operand (no per-element bit tests).
// Multiplying by -1 is exact negation (NaN aside: a NaN block becomes a NaN-scale block either way).
struct SignBits {
  float m[128];
};

inline SignBits host_sign_bits(const QuartetBackwardOptions& o) {
  SignBits s;
  for (float& m : s.m) m = 1.0f;
  if (!o.rotate) return s;
  const quant::Rotation rot{o.hadamard_size, quant::SignKind::seeded, o.sign_seed};
  for (int j = 0; j < o.hadamard_size; ++j) s.m[j] = quant::rotation_sign(rot, j);
  return s;
}

// One butterfly stage of span H over a rotation block of R values (quant::fwht_normalized's order).
template <int H, int R>
__device__ __forceinline__ void butterfly_stage(float* x) {
  if constexpr (H < R) {
#pragma unroll
    for (int i = 0; i < R; i += 2 * H) {
#pragma unroll
      for (int j = i; j < i + H; ++j) {
        const float a = x[j], y = x[j + H];
        x[j] = a + y;
        x[j + H] = a - y;
      }
    }
    butterfly_stage<2 * H, R>(x);
  }
}

// (x * s) H for each rotation block of R values in v[0..N); R = 0: no rotation. The sign multiply
// is folded into the first butterfly stage: with a' = a * s_j (exact), a' + b * s_{j+1} is one FMA
// of the exact product (round(a' + b s) = round(a' + round(b s)) since b s is exact), and a' - b s
// the FMA of -b; the remaining stages and the 1/sqrt(R) scaling are quant::fwht_normalized's.
template <int R, int N>
__device__ __forceinline__ void rotate_signed(float* v, const SignBits& s) {
  if constexpr (R > 0) {
    constexpr float c = quant::hadamard_norm(R);
#pragma unroll
    for (int b = 0; b < N / R; ++b) {
      float* x = v + b * R;
#pragma unroll
      for (int j = 0; j < R; j += 2) {
        const float a = x[j] * s.m[j];
        const float y = x[j + 1];
        x[j] = __fmaf_rn(y, s.m[j + 1], a);
        x[j + 1] = __fmaf_rn(-y, s.m[j + 1], a);
      }
      butterfly_stage<2, R>(x);
#pragma unroll
      for (int j = 0; j < R; ++j) x[j] *= c;
    }
  }
}

// Quantizes 32 values (already rotated) of output element index `index0` (a multiple of 32) and
// writes the packed codes and the scale of group index0 / 32. kSr is a template parameter so the
// nearest-even kernels carry no generator code and no registers for it.
template <bool kSr>
__device__ __forceinline__ void quantize_store_group(const float* v, const fp4::SrDraw& key, uint64_t index0,
                                                     uint8_t* __restrict__ codes, uint8_t* __restrict__ scales) {
  uint4 packed;
  const uint8_t s = fp4::backward_group_packed<kSr>(v, key, index0, packed);
  reinterpret_cast<uint4*>(codes)[index0 / 32] = packed;
  scales[index0 / 32] = s;
}

// The Quartet backward rule as a rowcol::kernel group policy: (x * s) H per rotation block of R
// (R <= 32, so a 32-group holds whole blocks), then the 3/4-prescaled absmax MXFP4 quantizer.
template <int R, bool kSr>
struct QuartetGroups {
  static constexpr bool kStochastic = kSr;
  static constexpr int kNearestCtas = 5;  // rowcol::launch: 2.0-2.4% faster than 4 on the H200
  static_assert(kNearestCtas == 4 || kNearestCtas == 5, "rowcol::launch instantiates 4 and 5 CTAs per SM");
  SignBits signs;
  fp4::SrDraw key;
  __device__ __forceinline__ void apply(float* v, uint64_t index0, uint8_t* __restrict__ codes,
                                        uint8_t* __restrict__ scales) const {
    rotate_signed<R, 32>(v, signs);
    quantize_store_group<kSr>(v, key, index0, codes, scales);
  }
};

}  // namespace nibble::cuda::bwd
