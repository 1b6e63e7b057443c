// Exact emulation helpers for Hopper (docs/spec.md §4), and the reference GEMM they are checked against.
//
// MXFP4 -> E4M3 re-encoding: for each set (a whole row along K, or a 1 x 128 group) with block
// exponents k_j and k_max = the largest k_j over blocks holding a non-zero code,
//   code' = E4M3(decode_e2m1(code) * 2^(k_j - k_max + 6)),  one FP32 set scale 2^(k_max - 6).
// Exact iff k_max - k_j <= 14 for every block with a non-zero code. Violating sets are still
// encoded (their small blocks lose bits) and COUNTED, never flushed silently: the caller picks the
// coarsest granularity with zero violations. Blocks with a NaN scale encode as E4M3 NaN (0x7F) and
// are not violations (NaN stays NaN); a set with no non-zero code uses k_max = 0.
#pragma once
#include <cstdint>
#include <vector>

#include "nibble/quant/quantizers.hpp"

namespace nibble::quant {

enum class ReencodeSet : uint8_t { row, group_1x128 };

struct E4M3Reencoding {
  int64_t rows = 0;
  int64_t cols = 0;
  ReencodeSet set = ReencodeSet::row;
  std::vector<uint8_t> codes;       // E4M3, row-major rows x cols
  std::vector<float> set_scales;    // decode scales 2^(k_max - 6): [rows] or [rows][cols / 128]
  int64_t sets = 0;
  int64_t violating_sets = 0;       // sets where some non-zero block has k_max - k_j > 14
  bool exact() const { return violating_sets == 0; }
  float value_at(int64_t r, int64_t c) const;  // decode_e4m3(code) * set scale
};

// q must be MXFP4 (E2M1 codes, E8M0 1 x 32 scales); group_1x128 needs cols % 128 == 0.
E4M3Reencoding reencode_mxfp4_as_e4m3(const QuantizedTensor& q, ReencodeSet set);
// Violating-set count only (no codes written).
int64_t count_reencode_violations(const QuantizedTensor& q, ReencodeSet set);

// Decode to BF16 for the exact BF16 emulation of mxfp8 / nvfp4 GEMMs: bf16 = decode(code) *
// block_scale, WITHOUT tensor_scale (nvfp4's FP32 global scale is not a power of two; the GEMM
// applies tensor_scale_a * tensor_scale_b to its output). Throws std::runtime_error if any value is
// not exactly representable in BF16 (never happens for mxfp8, mxfp4, nvfp4, fp8 per-tensor codes).
std::vector<uint16_t> decode_to_bf16_unscaled(const QuantizedTensor& q);

}  // namespace nibble::quant

// The ground truth for every GEMM path: C[M, N] = (sum_k A[m, k] * B[n, k]) * tensor_scale_a * tensor_scale_b,
// A, B = decode(code) * block_scale (exact in float), and the sum over the DEQUANTIZED
// values (quantized domain: rotations and prescales are not undone), products and sums in double.
// A is [M, K] and B is [N, K], both contiguous along K ("TN"). Throws std::invalid_argument when the
// K dimensions differ.
namespace nibble::quant {

std::vector<double> reference_gemm_f64(const QuantizedTensor& a, const QuantizedTensor& b);
std::vector<float> reference_gemm(const QuantizedTensor& a, const QuantizedTensor& b);

}  // namespace nibble::quant
