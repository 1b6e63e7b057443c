// Pieces of the Quartet backward quantizer's kernels (quartet_backward.cu): the random signs as +-1
// multipliers, the signed rotation, the store of one quantized 32-group, and the group policy that
// runs them inside the shared 64x128 row + column tile (fp4_rowcol_tile.cuh).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "fp4_kernel_io.cuh"
#include "fp4_rowcol_tile.cuh"
#include "quartet_fused_group_math.cuh"
#include "nibble/cuda/quartet.hpp"
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

// (x * s) H for each rotation block of R values in v[0..N); R = 0: no rotation.
template <int R, int N>
__device__ __forceinline__ void rotate_signed(float* v, const SignBits& s) {
  if constexpr (R > 0) {
#pragma unroll
    for (int b = 0; b < N / R; ++b) {
#pragma unroll
      for (int j = 0; j < R; ++j) v[b * R + j] *= s.m[j];
      quant::fwht_normalized(v + b * R, R);
    }
  }
}

// Quantizes 32 values (already rotated) of output element index `index0` (a multiple of 32) and
// writes the packed codes and the scale of group index0 / 32. kSr is a template parameter so the
// nearest-even kernels carry no generator code and no registers for it.
template <bool kSr>
__device__ __forceinline__ void quantize_store_group(const float* v, const quant::SrKey& key, int64_t index0,
                                                     uint8_t* __restrict__ codes, uint8_t* __restrict__ scales) {
  uint4 packed;
  const uint8_t s = fp4::backward_group_packed<kSr>(v, key, static_cast<uint64_t>(index0), packed);
  reinterpret_cast<uint4*>(codes)[index0 / 32] = packed;
  scales[index0 / 32] = s;
}

// The Quartet backward rule as a rowcol::kernel group policy: (x * s) H per rotation block of R
// (R <= 32, so a 32-group holds whole blocks), then the 3/4-prescaled absmax MXFP4 quantizer.
template <int R, bool kSr>
struct QuartetGroups {
  SignBits signs;
  quant::SrKey key;
  __device__ __forceinline__ void apply(float* v, int64_t index0, uint8_t* __restrict__ codes,
                                        uint8_t* __restrict__ scales) const {
    rotate_signed<R, 32>(v, signs);
    quantize_store_group<kSr>(v, key, index0, codes, scales);
  }
};

}  // namespace nibble::cuda::bwd
