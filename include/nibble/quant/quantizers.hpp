// The named CPU reference quantizers behind `quantize`. x is row-major rows x cols; blocks run
// along cols. Shapes a quantizer's blocks do not divide throw std::invalid_argument.
#pragma once
#include <cstdint>
#include <vector>

#include "nibble/quant/element_codecs.hpp"
#include "nibble/quant/quantized_tensor.hpp"

namespace nibble::quant {

QuantizedTensor quantize_bf16(const float* x, int64_t rows, int64_t cols);

// Per-tensor fp8 with a given encode scale (current: per_tensor_encode_scale(fmax, amax)).
QuantizedTensor quantize_fp8_per_tensor(const float* x, int64_t rows, int64_t cols, ElementFormat f,
                                        float encode_scale, const SrKey& key = {});
// Current scaling: one amax pass, then the cast.
QuantizedTensor quantize_fp8_current(const float* x, int64_t rows, int64_t cols, ElementFormat f,
                                     int margin = 0, const SrKey& key = {});

// fp8-block, E4M3, power-of-two FP32 decode scales.
QuantizedTensor quantize_fp8_block_1x128(const float* x, int64_t rows, int64_t cols);
QuantizedTensor quantize_fp8_block_128x128(const float* x, int64_t rows, int64_t cols);

// MX: 1 x 32 blocks, E8M0 scales; f = e4m3 (mxfp8) or e2m1 (mxfp4).
QuantizedTensor quantize_mx(const float* x, int64_t rows, int64_t cols, ElementFormat f,
                            MxScaleRule rule = MxScaleRule::ocp, const SrKey& key = {});

// nvfp4: block_rows x 16 blocks (1 for x/dy, 16 for w), UE4M3 scales, FP32 global scale.
// With rht the fixed-sign 16-point Hadamard is applied along cols first.
QuantizedTensor quantize_nvfp4(const float* x, int64_t rows, int64_t cols, int64_t block_rows,
                               const SrKey& key = {}, bool rht = false);

// Quartet forward: optional Hadamard (no signs, size hadamard_size) along cols, then QuEST (or
// absmax) per 1 x 32 group with a trust mask.
QuantizedTensor quantize_quartet_forward(const float* x, int64_t rows, int64_t cols, int hadamard_size = 32,
                                         bool rotate = true, ForwardQuantizer kind = ForwardQuantizer::quest);
// Quartet backward: optional seeded random-sign Hadamard along cols, then the 3/4-prescaled
// absmax quantizer per 1 x 32 group (nearest or stochastic via key; stream kStreamQuartetBackward).
QuantizedTensor quantize_quartet_backward(const float* x, int64_t rows, int64_t cols, uint64_t sign_seed,
                                          int hadamard_size = 32, bool rotate = true, const SrKey& key = {});

// Rotate every block of `rotation.size` values along each row, in place (forward or inverse).
// Throws when cols is not a multiple of the size or the size is not 16/32/64/128.
void hadamard_transform(float* x, int64_t rows, int64_t cols, const Rotation& rotation, bool inverse);

// Quartet dgrad (and wgrad) epilogue: out = (G * 16/9) masked by mask (bit-packed as in QuantizedTensor,
// over rows x cols of G), then the inverse of `rotation` along rows (cols divisible by its size).
std::vector<float> quartet_dgrad_epilogue(const float* g, int64_t rows, int64_t cols,
                                             const std::vector<uint8_t>& mask, const Rotation& rotation);

}  // namespace nibble::quant
