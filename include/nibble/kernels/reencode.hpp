// Exact MXFP4 -> E4M3 re-encoding on the GPU (docs/spec.md §4): the operand transform that lets Hopper's FP8
// tensor cores run an MXFP4 GEMM exactly. For each set (a whole row along K, or a 1x128 group) with
// block exponents k_j and k_max = the largest k_j over blocks holding a non-zero code:
//   code' = E4M3(decode_e2m1(code) * 2^(k_j - k_max + 6)),   one FP32 set scale 2^(k_max - 6).
// Exact iff k_max - k_j <= 14 for every block with a non-zero code. Violating sets are still encoded
// (as the CPU reference does: their small blocks lose bits) and COUNTED; the caller picks the
// coarsest granularity with zero violations (choose_reencode_granularity), never flushes silently.
// Same conventions as quant::reencode_mxfp4_as_e4m3, which every result equals bit for bit:
// blocks with a NaN scale (0xFF) become E4M3 NaN (0x7F) and are not violations; a set without any
// non-zero code uses k_max = 0 (scale 2^-6).
//
// Layouts: input as Mxfp4ConstPlanes (codes [rows, cols/2], low nibble = even column; E8M0 scales
// [rows, cols/32]); output E4M3 codes row-major [rows, cols] (the FP8 GEMM's TN operand) and FP32
// decode scales straight in the cuBLASLt layout of the chosen granularity:
//   row      -> ScaleMode::outer_vec: scales[row]                                  (rows floats)
//   group128 -> ScaleMode::vec128:    scales[scale_layout::vec128_index(rows, row, k)]
//               (vec128_count(rows, cols) floats; the padding rows are not written).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "nibble/kernels/quartet.hpp"
#include "nibble/kernels/scale_layout.hpp"
#include "nibble/format/minifloat.hpp"

namespace nibble::cuda {

enum class ReencodeGranularity : uint8_t { row, group128 };

// Device-side counters of violating sets. A call first sets both to -1 ("not counted"), then to 0
// for what it counts, then adds 1 per violating set. Copy the struct back to choose a granularity.
struct ReencodeViolations {
  int row_sets = -1;       // rows in which some non-zero block has k_max - k_j > 14
  int group128_sets = -1;  // 1x128 groups with the same defect (counted whenever cols % 128 == 0)
};

// Re-encodes `in` at granularity g. The row pass also counts 1x128 violations (when cols % 128 ==
// 0), so a caller that finds row_sets > 0 knows at once whether the group128 pass will be exact.
// cols % 32 == 0 (row) or % 128 == 0 (group128); codes and e4m3_out 16-byte aligned.
// `violations` may be null (nothing counted). Asynchronous; returns the kernel path.
const char* reencode_mxfp4_e4m3(Mxfp4ConstPlanes in, int64_t rows, int64_t cols, ReencodeGranularity g,
                                uint8_t* e4m3_out, float* scales_out, ReencodeViolations* violations,
                                cudaStream_t stream);

// Counts only (reads codes and scales, 0.53 B per element, writes nothing else): row_sets always,
// group128_sets when cols % 128 == 0. For callers that must choose before allocating.
const char* count_reencode_violations_mxfp4(Mxfp4ConstPlanes in, int64_t rows, int64_t cols,
                                            ReencodeViolations* violations, cudaStream_t stream);

// The coarsest exact granularity given host copies of the counters: row when row_sets == 0, else
// group128 when group128_sets == 0, else std::runtime_error ("not exactly representable: spread >
// 14 inside a 1x128 group ..."; the caller falls back to the exact BF16 emulation).
ReencodeGranularity choose_reencode_granularity(const ReencodeViolations& counts);

// The cuBLASLt scale mode and the number of FP32 scales (padding included) of a granularity.
constexpr ScaleMode reencode_scale_mode(ReencodeGranularity g) {
  return g == ReencodeGranularity::row ? ScaleMode::outer_vec : ScaleMode::vec128;
}
constexpr int64_t reencode_scale_count(ReencodeGranularity g, int64_t rows, int64_t cols) {
  return scale_layout::scale_count(reencode_scale_mode(g), rows, cols);
}

// E4M3 codes of the 8 E2M1 magnitudes (code & 7) times 2^shift, as 8 bytes (byte m = magnitude m;
// low word = m 0..3), for shift in [-8, 6] where every product is exact (2^-9 .. 384). Closed form
// of fmt::encode_e4m3 on exact values: E2M1 m >= 2 is 2^((m>>1)-1) * (1 + (m&1)/2), m = 1 is 2^-1;
// normal E4M3 when the exponent e >= -6, else the subnormal step count (8 + mantissa) >> (-6 - e).
// The kernels look codes up with one byte permute per 4 elements; static_asserts in
// src/kernels/fp4/reencode_mxfp4_e4m3.cu check every entry against quant::reencode_e2m1_as_e4m3.
NIBBLE_HD constexpr uint64_t e2m1_to_e4m3_magnitudes(int shift) {
  uint64_t table = 0;
  for (int m = 1; m < 8; ++m) {
    const int e = (m == 1 ? -1 : (m >> 1) - 1) + shift;
    const uint32_t mant = m >= 2 ? static_cast<uint32_t>(m & 1) << 2 : 0u;
    const uint32_t code = e >= -6 ? (static_cast<uint32_t>(e + 7) << 3) | mant : (8u | mant) >> (-6 - e);
    table |= static_cast<uint64_t>(code) << (8 * m);
  }
  return table;
}
inline constexpr int kReencodeFastShiftMin = -8;
inline constexpr int kReencodeFastShiftMax = 6;

}  // namespace nibble::cuda
