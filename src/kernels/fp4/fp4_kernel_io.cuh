// Device-side loads and stores shared by the FP4 kernels: 16-byte vector accesses of BF16/FP32
// inputs converted to float, packing of E2M1 codes (low nibble = even column) and trust-mask bits,
// and the host-side precondition checks of every FP4 launcher.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "common/launch_checks.hpp"
#include "nibble/kernels/check.hpp"
#include "nibble/kernels/quartet.hpp"
#include "nibble/format/bf16.hpp"

namespace nibble::cuda::fp4 {

// ---- device: loads -----------------------------------------------------------------------------
// Reads N consecutive elements starting at p (16-byte aligned) into v, as floats. All N/8 (BF16) or
// N/4 (FP32) vector loads are issued before any use, so they are in flight together.
template <int N>
__device__ __forceinline__ void load_bf16(const uint16_t* __restrict__ p, float* v) {
  static_assert(N % 8 == 0, "BF16 loads move 8 elements per 16 bytes");
  uint4 raw[N / 8];
#pragma unroll
  for (int i = 0; i < N / 8; ++i) raw[i] = __ldg(reinterpret_cast<const uint4*>(p) + i);
#pragma unroll
  for (int i = 0; i < N / 8; ++i) {
    const uint32_t w[4] = {raw[i].x, raw[i].y, raw[i].z, raw[i].w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      v[8 * i + 2 * j] = fmt::bits_float(w[j] << 16);
      v[8 * i + 2 * j + 1] = fmt::bits_float(w[j] & 0xffff0000u);
    }
  }
}
template <int N>
__device__ __forceinline__ void load_f32(const float* __restrict__ p, float* v) {
  static_assert(N % 4 == 0, "FP32 loads move 4 elements per 16 bytes");
  float4 raw[N / 4];
#pragma unroll
  for (int i = 0; i < N / 4; ++i) raw[i] = __ldg(reinterpret_cast<const float4*>(p) + i);
#pragma unroll
  for (int i = 0; i < N / 4; ++i) {
    v[4 * i] = raw[i].x;
    v[4 * i + 1] = raw[i].y;
    v[4 * i + 2] = raw[i].z;
    v[4 * i + 3] = raw[i].w;
  }
}
template <int N, class In>
__device__ __forceinline__ void load_dense(const In* __restrict__ p, float* v) {
  if constexpr (sizeof(In) == 2) {
    load_bf16<N>(p, v);
  } else {
    load_f32<N>(p, v);
  }
}

// The raw 16-byte words of N consecutive BF16/FP32 elements, so a kernel can issue the loads of
// its next group before it computes the current one (software pipelining) and convert later.
template <int N, class In>
struct RawGroup {
  static constexpr int kWords = N * static_cast<int>(sizeof(In)) / 16;
  uint4 w[kWords];
};
template <int N, class In>
__device__ __forceinline__ void fetch_raw(RawGroup<N, In>& g, const In* __restrict__ p) {
#pragma unroll
  for (int i = 0; i < RawGroup<N, In>::kWords; ++i) g.w[i] = __ldg(reinterpret_cast<const uint4*>(p) + i);
}
template <int N, class In>
__device__ __forceinline__ void unpack_raw(const RawGroup<N, In>& g, float* v) {
#pragma unroll
  for (int i = 0; i < RawGroup<N, In>::kWords; ++i) {
    const uint32_t w[4] = {g.w[i].x, g.w[i].y, g.w[i].z, g.w[i].w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if constexpr (sizeof(In) == 2) {
        v[8 * i + 2 * j] = fmt::bits_float(w[j] << 16);
        v[8 * i + 2 * j + 1] = fmt::bits_float(w[j] & 0xffff0000u);
      } else {
        v[4 * i + j] = fmt::bits_float(w[j]);
      }
    }
  }
}

// ---- device: stores ----------------------------------------------------------------------------
// 32 E2M1 codes (one per byte, low 4 bits used) -> 16 bytes, low nibble = even element.
__device__ __forceinline__ uint4 pack_e2m1x32(const uint8_t* c) {
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    uint32_t x = 0;
#pragma unroll
    for (int j = 0; j < 8; ++j) x |= static_cast<uint32_t>(c[8 * i + j] & 0xF) << (4 * j);
    w[i] = x;
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}
// 32 trust flags -> one little-endian word: bit i = element i (= bit i%8 of byte i/8).
__device__ __forceinline__ uint32_t pack_mask32(const bool* t) {
  uint32_t m = 0;
#pragma unroll
  for (int i = 0; i < 32; ++i) m |= (t[i] ? 1u : 0u) << i;
  return m;
}
// The E2M1 code of element j of a packed 16-byte group.
__device__ __forceinline__ uint8_t unpack_e2m1(const uint4& packed, int j) {
  const uint32_t w[4] = {packed.x, packed.y, packed.z, packed.w};
  return static_cast<uint8_t>((w[j / 8] >> (4 * (j % 8))) & 0xF);
}

// ---- host: preconditions -----------------------------------------------------------------------
using cuda::check_aligned;  // launch_checks.hpp, shared with the FP8 launchers
using cuda::check_multiple;
using cuda::check_not_null;
using cuda::check_shape;
// Kernels that read or write only the grid scale layout [rows, cols/32] reject tiled planes.
template <class Planes>
inline void check_grid_scales(const char* fn, const char* which, const Planes& p) {
  if (p.scale_layout != MxScaleLayout::grid) {
    throw std::invalid_argument(std::string(fn) + ": " + which + ".scale_layout is tiled128x4, but this kernel "
                                "handles grid scales [rows, cols/32] only; pass MxScaleLayout::grid planes (tiled "
                                "scales: quantize_mxfp4_rowcol with BF16 input and nearest rounding, "
                                "reencode_mxfp4_e4m3)");
  }
}
// An MXFP4 output plane pair that is asked for (codes set) needs its scales and 16-byte aligned codes;
// unless the caller writes tiled scales (kTiledOk), they must be grid scales.
template <bool kTiledOk = false>
inline void check_planes(const char* fn, const char* which, const Mxfp4Planes& p) {
  if (p.codes == nullptr) return;
  check_not_null(fn, (std::string(which) + ".scales").c_str(), p.scales);
  check_aligned(fn, (std::string(which) + ".codes").c_str(), p.codes);
  if constexpr (kTiledOk) {
    if (p.scale_layout == MxScaleLayout::tiled128x4) {
      check_aligned(fn, (std::string(which) + ".scales (tiled: 8-byte tile stores)").c_str(), p.scales, 8);
    }
  } else {
    check_grid_scales(fn, which, p);
  }
}
// A row + column quantizer's two output plane pairs: at least one asked for, each as check_planes.
template <bool kTiledOk = false>
inline void check_rowcol_planes(const char* fn, const Mxfp4Planes& rowwise, const Mxfp4Planes& colwise) {
  if (rowwise.codes == nullptr && colwise.codes == nullptr) {
    throw std::invalid_argument(std::string(fn) + ": neither rowwise.codes nor colwise.codes is set; ask for at "
                                "least one copy");
  }
  check_planes<kTiledOk>(fn, "rowwise", rowwise);
  check_planes<kTiledOk>(fn, "colwise", colwise);
}
inline void check_hadamard_size(const char* fn, int n, int max_size) {
  if (!quant::valid_hadamard_size(n) || n > max_size) {
    throw std::invalid_argument(std::string(fn) + ": hadamard_size " + std::to_string(n) +
                                " is not supported here; use 16, 32" + (max_size >= 64 ? ", 64 or 128" : "") +
                                (max_size < 64 ? " (the column-wise copy holds one 32-row group per thread)" : ""));
  }
}

// Grid size for `items` independent work items of `per_block` each (1-D, x dimension).
inline unsigned blocks_for(int64_t items, int per_block) {
  return static_cast<unsigned>((items + per_block - 1) / per_block);
}

}  // namespace nibble::cuda::fp4
