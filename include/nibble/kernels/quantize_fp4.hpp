// MXFP4 quantization and exact decode kernels (sm_90). Layouts and conventions as in quartet.hpp:
// codes [rows, cols/2] with the low nibble holding the even column, E8M0 scales as the row-major
// block grid [rows, cols/32]; BF16 as raw bits. The per-element and per-group math is nibble::quant's,
// so results equal the CPU reference (quant::quantize_mx, quant::decode_to_bf16_unscaled) bit for bit.
// Preconditions throw std::invalid_argument before any launch; every call returns its kernel path.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "nibble/kernels/quartet.hpp"
#include "nibble/quant/element_codecs.hpp"
#include "nibble/quant/formats.hpp"

namespace nibble::cuda {

// MXFP4 (1x32 blocks along cols, E2M1 elements, E8M0 scales): rule ocp = 2^(floor(log2 amax) - 2),
// round_up = 2^ceil(log2(amax / 6)) (never clips). Stochastic rounding when sr.enabled (stream
// quant::kStreamMx, index = row * cols + col). cols % 32 == 0; any rows. out.mask is ignored.
// Equals quant::quantize_mx(x, rows, cols, e2m1, rule, sr).
const char* quantize_mxfp4(const void* x, Fp4DenseType type, int64_t rows, int64_t cols, quant::MxScaleRule rule,
                           const quant::SrKey& sr, Mxfp4Planes out, cudaStream_t stream);

// Both copies a training step needs from one read: `rowwise` = quantize_mxfp4(x) and `colwise` =
// quantize_mxfp4(x^T) (1x32 blocks along rows; index = col * rows + row for stochastic rounding),
// either may be empty (codes == nullptr), not both. cols % 32 == 0 and rows % 32 == 0. A 64x128
// shared-memory tile per CTA whose stores cover whole 32-byte sectors (fp4_rowcol_tile.cuh).
const char* quantize_mxfp4_rowcol(const void* x, Fp4DenseType type, int64_t rows, int64_t cols,
                                  quant::MxScaleRule rule, const quant::SrKey& sr, Mxfp4Planes rowwise,
                                  Mxfp4Planes colwise, cudaStream_t stream);

// Exact decode of an MXFP4 tensor to BF16: out = BF16(decode_e2m1(code) * 2^k) (exact: two
// significant bits; NaN scale -> NaN). Equals quant::decode_to_bf16_unscaled. cols % 32 == 0.
const char* decode_mxfp4_bf16(Mxfp4ConstPlanes q, int64_t rows, int64_t cols, uint16_t* out, cudaStream_t stream);

}  // namespace nibble::cuda
