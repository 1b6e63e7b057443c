// Fused Quartet quantizers that write what the Hopper FP8 GEMM consumes directly (docs/spec.md §3 and §4).
//
// quartet_forward_quantize_e4m3: ONE pass over X (or W) doing Hadamard + QuEST (or absmax) per 1x32
// group AND the exact E4M3 re-encoding with one FP32 power-of-two scale per row (cuBLASLt
// OUTER_VEC_32F), i.e. quartet_forward_quantize followed by reencode_mxfp4_e4m3(row) without the
// round trip of the MXFP4 planes through memory. One CTA per row: the row's groups stay in
// registers until the row's k_max (largest E8M0 exponent over blocks holding a non-zero code) is
// known; then code' = E4M3(e2m1 * 2^(k_j - k_max + 6)), row scale 2^(k_max - 6).
//
// Exactness: the row encoding is exact iff k_max - k_j <= 14 for every non-zero block. Rows that
// violate it are still written (as quant::reencode_mxfp4_as_e4m3 writes them: small blocks lose
// bits) and COUNTED in *violating_rows; a caller that reads a non-zero count must fall back to the
// 1x128 path: reencode_mxfp4_e4m3(the MXFP4 planes, group128) (so keep out.codes/out.scales when a
// fallback may be needed) or the exact BF16 emulation. Never flushed silently.
//
// Results equal quant::quantize_quartet_forward(x, rows, cols, h, rotate, kind) followed by
// quant::reencode_mxfp4_as_e4m3(q, ReencodeSet::row) bit for bit (codes, set_scales, violating_sets),
// and the MXFP4 planes equal quartet_forward_quantize's.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "nibble/kernels/quartet.hpp"

namespace nibble::cuda {

struct Fp8RowOperand {
  uint8_t* codes = nullptr;       // E4M3 [rows, cols] row-major (the FP8 GEMM's TN operand), 16-byte aligned
  float* row_scales = nullptr;    // [rows] FP32 decode scales 2^(k_max - 6), OUTER_VEC_32F layout
  int* violating_rows = nullptr;  // device counter: set to 0 by the call, +1 per row with spread > 14; may be null
};

// x: BF16 bits or FP32 [rows, cols]. options.hadamard_size 16 or 32 (or rotate = false);
// cols % 32 == 0 and cols <= 131072 (one CTA keeps a row's groups in registers).
// mxfp4: optional MXFP4 planes (codes/scales/mask each may be null; all null = E4M3 only).
// Asynchronous on `stream`; returns the kernel path.
const char* quartet_forward_quantize_e4m3(const void* x, Fp4DenseType type, int64_t rows, int64_t cols,
                                          const QuartetForwardOptions& options, Mxfp4Planes mxfp4,
                                          Fp8RowOperand fp8, cudaStream_t stream);

}  // namespace nibble::cuda
