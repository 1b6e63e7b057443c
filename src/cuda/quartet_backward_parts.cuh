// Pieces shared by the Quartet backward quantizer's kernels (quartet_backward.cu and the 64x128
// tile of quartet_backward_tile64.cuh): the random signs as +-1 multipliers, the signed rotation,
// the store of one quantized 32-group, the E2M1 decode table and BF16/FP32 16-byte chunk unpacking.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "fp4_kernel_io.cuh"
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

// A 16-entry E2M1 decode table in shared memory: 16 words in 16 banks, so any lane pattern is
// conflict-free (equal addresses broadcast); one LDS instead of the generic bit decode.
__device__ __forceinline__ void init_e2m1_table(float* lut) {
  if (threadIdx.x < 16) lut[threadIdx.x] = fmt::decode_e2m1(static_cast<uint8_t>(threadIdx.x));
}

// Dequantizes one MXFP4 32-group (as quant::dequantize: decode_e2m1(code) * decode_e8m0(scale)),
// handing out float4s: put(j, value of elements j..j+3) for j = 0, 4, ..., 28.
template <class Put>
__device__ __forceinline__ void decode_mxfp4_group(const float* lut, const uint4& packed, uint32_t scale, Put&& put) {
  const float s = fmt::decode_e8m0(static_cast<uint8_t>(scale));
#pragma unroll
  for (int j = 0; j < 32; j += 4) {
    float d[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) d[k] = lut[fp4::unpack_e2m1(packed, j + k)] * s;
    put(j, make_float4(d[0], d[1], d[2], d[3]));
  }
}

// The 16 bytes of one vector load as floats: 8 BF16 (low half of each word = even element) or 4 FP32.
template <class In>
__device__ __forceinline__ void unpack_chunk(const uint4& raw, float* v) {
  const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if constexpr (sizeof(In) == 2) {
      v[2 * j] = fmt::bits_float(w[j] << 16);
      v[2 * j + 1] = fmt::bits_float(w[j] & 0xffff0000u);
    } else {
      v[j] = fmt::bits_float(w[j]);
    }
  }
}

}  // namespace nibble::cuda::bwd
