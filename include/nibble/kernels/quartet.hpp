// Quartet kernels (docs/spec.md §3, sm_90): the forward quantizer (Hadamard-32 fused with QuEST), the backward
// quantizer (random-sign Hadamard + 3/4-prescaled absmax, nearest or stochastic) and the post-GEMM
// epilogue (x 16/9, forward trust mask, inverse Hadamard).
//
// Conventions (shared with quantize_fp4.hpp):
//  - Inputs are row-major [rows, cols] device tensors, BF16 as raw bits (uint16_t) or FP32, 16-byte
//    aligned. Groups (32) and rotation blocks run along cols.
//  - MXFP4 outputs (Mxfp4Planes): codes [rows, cols/2], two E2M1 per byte, LOW nibble = even column;
//    E8M0 scales as the row-major block grid [rows, cols/32]; optional trust mask bit-packed as in
//    quant::QuantizedTensor (bit i%8 of byte i/8, i = row * cols + col; 1 = trusted).
//  - A column-wise copy is the quantization of the transposed tensor [cols, rows] (groups along rows),
//    laid out exactly like a row-wise copy of that tensor.
//  - The per-element and per-group math is nibble::quant's (hadamard.hpp, element_codecs.hpp), the
//    functions the CPU reference calls: GPU results equal quant::quantize_quartet_* bit for bit.
//  - Preconditions are checked on the host and throw std::invalid_argument naming the argument and
//    the fix. Every call is asynchronous on `stream` and returns the name of the kernel path it ran.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "nibble/kernels/scale_layout.hpp"
#include "nibble/quant/element_codecs.hpp"
#include "nibble/quant/formats.hpp"
#include "nibble/quant/hadamard.hpp"

namespace nibble::cuda {

// One MXFP4 operand on the device. mask may be null (no mask wanted / none produced).
struct Mxfp4Planes {
  uint8_t* codes = nullptr;   // [rows, cols/2]
  uint8_t* scales = nullptr;  // E8M0 [rows, cols/32] (grid), or 128x4 tiles (tiled_count(rows, cols, 32) bytes)
  uint8_t* mask = nullptr;    // [rows * cols / 8] bits
  // Only quantize_mxfp4_rowcol (BF16 input, nearest rounding) writes tiled scales and only the re-encoding
  // reads them; every other kernel rejects them before launch.
  MxScaleLayout scale_layout = MxScaleLayout::grid;
};
struct Mxfp4ConstPlanes {
  const uint8_t* codes = nullptr;
  const uint8_t* scales = nullptr;
  const uint8_t* mask = nullptr;
  MxScaleLayout scale_layout = MxScaleLayout::grid;
};

// Element type of a dense input or output.
enum class Fp4DenseType : uint8_t { bf16, fp32 };

struct QuartetForwardOptions {
  int hadamard_size = 32;  // 16, 32, 64 or 128 (no signs: the same fixed matrix on X and W)
  bool rotate = true;
  quant::ForwardQuantizer quantizer = quant::ForwardQuantizer::quest;
};

// Forward quantizer for X [T, I] or W [O, I]: rotate each block along cols, QuEST (or absmax) per
// 1x32 group, codes + scales + trust mask in one pass. out.mask may be null. cols % max(32,
// hadamard_size) == 0; rows any positive value. Equals quant::quantize_quartet_forward.
const char* quartet_forward_quantize(const void* x, Fp4DenseType type, int64_t rows, int64_t cols,
                                     const QuartetForwardOptions& options, Mxfp4Planes out,
                                     cudaStream_t stream);

struct QuartetBackwardOptions {
  uint64_t sign_seed = 0;   // fresh per layer per step: Rotation{size, seeded, sign_seed}
  int hadamard_size = 32;   // 16/32/64/128 row-wise; 16/32 for column-wise copies
  bool rotate = true;
  quant::SrKey rounding;    // enabled = stochastic (stream: quant::kStreamQuartetBackward)
};

// Backward quantizer for a dense tensor x [rows, cols] (dY [T, O], or any other operand):
//  rowwise: x quantized along cols (dgrad operand dY, inner dim out_features);
//  colwise: x^T [cols, rows] quantized along rows (wgrad operand dY^T, inner dim tokens).
// Either may be null (planes with codes == nullptr); both from ONE read of x. Stochastic rounding
// index = row * cols + col of the copy being written. The colwise copy needs rows % 32 == 0 and
// hadamard_size <= 32; cols % max(32, hadamard_size) == 0. Masks are not produced (mask ignored).
// Each copy equals quant::quantize_quartet_backward of x (resp. x^T).
const char* quartet_backward_quantize(const void* x, Fp4DenseType type, int64_t rows, int64_t cols,
                                      const QuartetBackwardOptions& options, Mxfp4Planes rowwise,
                                      Mxfp4Planes colwise, cudaStream_t stream);

// Backward quantizer reading a forward MXFP4 operand (Xq [T, I] or Wq [O, I], rotated domain)
// instead of a dense tensor: the column-wise copy of its dequantized values (decode(code) * 2^k, as
// quant::dequantize), i.e. Xq^T for wgrad or Wq^T for dgrad. 0.53 bytes read per element.
// rows % 32 == 0, cols % 32 == 0, hadamard_size <= 32. Equals
// quant::quantize_quartet_backward(transpose(quant::dequantize(q))).
const char* quartet_backward_quantize_mxfp4_transposed(Mxfp4ConstPlanes q, int64_t rows, int64_t cols,
                                                       const QuartetBackwardOptions& options,
                                                       Mxfp4Planes colwise, cudaStream_t stream);

struct QuartetEpilogueOptions {
  float scale = quant::kQuartetGemmRescale;  // 16/9; 1 when the GEMM folded it into alpha
  int hadamard_size = 32;                   // the FORWARD rotation being undone
  bool rotate = true;
};

// Epilogue of dgrad (G [T, I] with Mx) and wgrad (G [O, I] with Mw):
//   out = inverse_rotation((G * scale) masked by the forward trust mask) along rows.
// g: FP32 or BF16 [rows, cols]; out: FP32 or BF16 [rows, cols]; mask as Mxfp4Planes::mask (required).
// cols % hadamard_size == 0 (and % 32). With scale = 16/9 this equals quant::quartet_dgrad_epilogue.
const char* quartet_epilogue(const void* g, Fp4DenseType g_type, int64_t rows, int64_t cols,
                             const uint8_t* mask, const QuartetEpilogueOptions& options, void* out,
                             Fp4DenseType out_type, cudaStream_t stream);

}  // namespace nibble::cuda
