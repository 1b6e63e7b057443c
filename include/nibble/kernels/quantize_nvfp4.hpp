// NVFP4 quantization and exact decode kernels (sm_90), docs/spec.md §2: E2M1 elements in 1x16 blocks (X, dY)
// or 16x16 blocks (W), UE4M3 block scales, one FP32 global decode scale S_dec = 1 / fl(6 * 448 / amax)
// per copy (Transformer Engine's NVFP4 recipe); the fixed-sign 16-point random Hadamard transform (RHT,
// output rounded to BF16) on the wgrad operands; stochastic rounding on gradients. The element and
// scale math is nibble::quant's (nvfp4_global_encode_scale, nvfp4_block_scale_code,
// nvfp4_encode_element, rotate_block_forward, nvfp4_rht_output), so every copy equals
// quant::quantize_nvfp4 of x (row-wise) or of x^T (column-wise) bit for bit.
//
// Layouts (as quant::QuantizedTensor): codes [rows, cols/2], two E2M1 per byte, LOW nibble = even
// column; UE4M3 scales as the row-major block grid [rows/block_rows, cols/16]. A column-wise copy is
// the quantization of x^T [cols, rows], laid out like a row-wise copy of it. Inputs are row-major
// BF16 (raw bits) or FP32, 16-byte aligned.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "nibble/kernels/quartet.hpp"
#include "nibble/quant/element_codecs.hpp"
#include <optional>

#include "nibble/quant/formats.hpp"

namespace nibble::cuda {

// One NVFP4 copy on the device. global_scale: ONE float, the copy's FP32 global decode scale
// (quant::QuantizedTensor::tensor_scale); it also serves as the amax scratch of the two-pass launch.
struct Nvfp4Planes {
  uint8_t* codes = nullptr;      // [rows, cols/2] of the copy
  uint8_t* scales = nullptr;     // UE4M3 [rows/block_rows, cols/16] of the copy
  float* global_scale = nullptr; // 1 float
};
struct Nvfp4ConstPlanes {
  const uint8_t* codes = nullptr;
  const uint8_t* scales = nullptr;
};

struct Nvfp4Options {
  int64_t block_rows = 1;     // 1 (activations, gradients: 1x16) or 16 (weights: 16x16)
  quant::SrKey rounding;      // enabled = stochastic (dY; stream quant::kStreamNvfp4), index = row * cols + col
                              // of the copy being written (as the reference on x^T for the column-wise copy)
  std::optional<uint64_t> colwise_seed;  // the column-wise copy's seed when it differs from rounding.seed (the
                                         // reference rounds dY and dY^T with their own seeds): both in one launch
  bool rowwise_rht = false;   // RHT on the row-wise copy (fprop / dgrad operands: off)
  bool colwise_rht = true;    // RHT on the column-wise copy (the wgrad operands X^T, dY^T: on)
};

// Quantizes x [rows, cols] into a row-wise copy and/or a column-wise copy (planes with codes ==
// nullptr are skipped; at least one is required), from one read per pass: pass 1 finds each copy's
// global amax (after its rotation), pass 2 encodes both. Each copy has its own global scale (the
// rotated and unrotated tensors have different amaxes). Preconditions (std::invalid_argument before
// any launch): cols % 16 == 0; rows % 16 == 0 when block_rows == 16 or a column-wise copy is wanted.
const char* quantize_nvfp4(const void* x, Fp4DenseType type, int64_t rows, int64_t cols, const Nvfp4Options& options,
                           Nvfp4Planes rowwise, Nvfp4Planes colwise, cudaStream_t stream);

// Exact decode for the BF16-emulated NVFP4 GEMM: out = BF16(decode_e2m1(code) * decode_ue4m3(scale)),
// WITHOUT the global scale (the GEMM multiplies its output by s_a * s_b). Exact: E2M1 has 2
// significant bits and UE4M3 4, so the product has at most 6 (BF16 holds 8) and lies in
// [2^-10, 2688], inside BF16's normal range. Including the FP32 global scale would not be exact (it
// has 24 significant bits), which is why the emulation keeps it outside. A NaN block scale (0x7F)
// decodes the block as the canonical quiet NaN 0x7FC0. Equals quant::decode_to_bf16_unscaled.
// cols % 16 == 0, rows % block_rows == 0; codes and out 16-byte aligned.
const char* decode_nvfp4_bf16(Nvfp4ConstPlanes q, int64_t rows, int64_t cols, int64_t block_rows, uint16_t* out,
                              cudaStream_t stream);

}  // namespace nibble::cuda
