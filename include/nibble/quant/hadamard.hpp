// Block-wise normalised Walsh-Hadamard rotations (sizes 16, 32, 64, 128), host + device.
//
// Exact expression order (the CUDA kernels call these functions):
//   forward  x -> (x * s) H:  v[j] *= sign(j); butterflies with stride 1, 2, 4, ... (a+b, a-b);
//                              then v[j] *= 1/sqrt(N) as ONE float constant;
//   inverse  y -> y H * s:    the same butterflies and constant, then v[j] *= sign(j).
// H (scaled) is symmetric and orthonormal, so the inverse of (x * s) H is (y H) * s.
// Signs: none (all +1); seeded: sign(j) = (random_bits(seed, kSignStream, j) & 1) ? -1 : +1, one
// vector of length N shared by every block and by both operands of a GEMM; nvfp4_fixed: the fixed
// 16-point vector kNvfp4RhtSignMask (bit j set -> -1) of nvfp4's random Hadamard transform, which
// is Transformer Engine's wgrad sign vector [1,1,1,-1,1,-1,-1,-1,-1,-1,-1,1,-1,1,-1,-1] (TE 2.x,
// get_wgrad_sign_vector; TE's own bitmask of it, get_sign_from_vector, is the same 0xD7E8).
// nvfp4 then rounds the rotated values to BF16 before quantizing them (nvfp4_rht_output), as TE's
// BF16 RHT output does.
#pragma once
#include "nibble/format/bf16.hpp"
#include "nibble/format/philox.hpp"
#include "nibble/quant/formats.hpp"

namespace nibble::quant {

enum class SignKind : uint8_t { none, seeded, nvfp4_fixed };

// What rotation a tensor went through along its columns; size 0 = none.
struct Rotation {
  int size = 0;
  SignKind signs = SignKind::none;
  uint64_t seed = 0;
};

// nvfp4's fixed 16-point sign vector, bit j set -> sign -1 (10 of 16 negative).
inline constexpr uint16_t kNvfp4RhtSignMask = 0xD7E8u;

NIBBLE_HD constexpr bool valid_hadamard_size(int n) { return n == 16 || n == 32 || n == 64 || n == 128; }

// 1/sqrt(N) rounded to float once (16 and 64 are exact powers of two).
NIBBLE_HD constexpr float hadamard_norm(int n) {
  return n == 16 ? 0.25f : n == 32 ? 0.17677669529663688f : n == 64 ? 0.125f : 0.088388347648318440f;
}

NIBBLE_HD constexpr float rotation_sign(const Rotation& r, int j) {
  if (r.signs == SignKind::seeded) return (fmt::random_bits(r.seed, kSignStream, static_cast<uint64_t>(j)) & 1u) ? -1.0f : 1.0f;
  if (r.signs == SignKind::nvfp4_fixed) return ((kNvfp4RhtSignMask >> (j & 15)) & 1u) ? -1.0f : 1.0f;
  return 1.0f;
}

// In-place normalised Walsh-Hadamard transform of v[0..n), n a power of two.
NIBBLE_HD constexpr void fwht_normalized(float* v, int n) {
  for (int h = 1; h < n; h *= 2) {
    for (int i = 0; i < n; i += 2 * h) {
      for (int j = i; j < i + h; ++j) {
        const float a = v[j], b = v[j + h];
        v[j] = a + b;
        v[j + h] = a - b;
      }
    }
  }
  const float c = hadamard_norm(n);
  for (int j = 0; j < n; ++j) v[j] *= c;
}

// nvfp4's rotated value: the forward rotation's FP32 result rounded to BF16 (nearest even), TE's
// RHT output precision. Where the FP32 butterflies are exact (16 BF16 inputs whose exponents span
// at most 12 binades) this is the correctly rounded BF16 of the exact rotation, as TE's
// FP32-accumulating BF16 GEMM gives.
NIBBLE_HD constexpr float nvfp4_rht_output(float rotated) { return fmt::round_bf16(rotated); }

// One block of r.size values: forward (x * s) H.
NIBBLE_HD constexpr void rotate_block_forward(float* v, const Rotation& r) {
  if (r.signs != SignKind::none) {
    for (int j = 0; j < r.size; ++j) v[j] *= rotation_sign(r, j);
  }
  fwht_normalized(v, r.size);
}
// One block: inverse y H * s.
NIBBLE_HD constexpr void rotate_block_inverse(float* v, const Rotation& r) {
  fwht_normalized(v, r.size);
  if (r.signs != SignKind::none) {
    for (int j = 0; j < r.size; ++j) v[j] *= rotation_sign(r, j);
  }
}

}  // namespace nibble::quant
