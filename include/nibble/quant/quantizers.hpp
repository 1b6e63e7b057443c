// The quantized tensor (QuantizedTensor, first) and the named CPU reference quantizers behind
// `quantize`. x is row-major rows x cols; blocks run along cols. Shapes a quantizer's blocks do not
// divide throw std::invalid_argument.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nibble/quant/element_codecs.hpp"
#include "nibble/quant/formats.hpp"
#include "nibble/quant/hadamard.hpp"

// A quantized 2-D tensor as plain data (docs/spec.md §2, layouts in docs/recipes.md).
//
// rows x cols, blocks run along cols (the GEMM's inner dimension).
// codes: row-major; bf16 two bytes per element (little endian), fp8 one byte each, E2M1 two per
//   byte with the LOW nibble holding the even column (cols is even for E2M1).
// scales: row-major over the block grid [rows / block_rows][cols / block_cols]; ScaleFormat fp32
//   uses scales_fp32 (DECODE scales), e8m0 / ue4m3 use scale_codes. Per-tensor = one block.
// Decode: value = (decode(code) * block_scale) * tensor_scale, in that float order.
// prescale: the recipe multiplied x by it before quantizing (quartet backward: 3/4), so a GEMM of
//   two such operands is divided by both prescales (16/9); dequantize_original divides it out.
// mask: optional bit-packed trust mask, bit (i % 8) of byte i / 8, i = row * cols + col; 1 = trusted.
// rotation: applied along cols before quantizing; dequantize_original undoes it.
namespace nibble::quant {

struct QuantizedTensor {
  int64_t rows = 0;
  int64_t cols = 0;
  ElementFormat element = ElementFormat::e4m3;
  std::vector<uint8_t> codes;
  int64_t block_rows = 0;
  int64_t block_cols = 0;
  ScaleFormat scale_format = ScaleFormat::none;
  std::vector<float> scales_fp32;
  std::vector<uint8_t> scale_codes;
  float tensor_scale = 1.0f;
  float prescale = 1.0f;
  std::vector<uint8_t> mask;  // empty: no mask
  Rotation rotation;
  bool stochastic = false;  // elements rounded stochastically (seed/stream below)
  uint64_t seed = 0;
  uint32_t stream = 0;
  std::string produced_by;  // e.g. "cpu-reference mxfp4 (ocp scale) role x"

  int64_t block_grid_rows() const { return block_rows ? rows / block_rows : 0; }
  int64_t block_grid_cols() const { return block_cols ? cols / block_cols : 0; }
  int64_t num_elements() const { return rows * cols; }
  bool has_mask() const { return !mask.empty(); }

  uint8_t code_at(int64_t r, int64_t c) const;           // fp8 / e2m1 code (unpacked)
  void set_code(int64_t r, int64_t c, uint8_t code);     // fp8 / e2m1 (e2m1: low 4 bits)
  float block_scale_at(int64_t r, int64_t c) const;      // decoded block scale of element (r, c)
  bool trusted(int64_t r, int64_t c) const;               // mask bit (true when there is no mask)
  float unscaled_value_at(int64_t r, int64_t c) const;    // decode(code) * block_scale (exact)
  float value_at(int64_t r, int64_t c) const;             // unscaled_value_at * tensor_scale
};

// Allocates codes (and mask when with_mask) for the given layout; codes are zero-filled.
QuantizedTensor make_quantized_tensor(int64_t rows, int64_t cols, ElementFormat element,
                                      int64_t block_rows, int64_t block_cols, ScaleFormat scale_format,
                                      bool with_mask);

// Values in the quantized domain (still rotated, still prescaled), row-major rows x cols.
std::vector<float> dequantize(const QuantizedTensor& q);
// Values in the original domain: divide by prescale, then undo the rotation along cols.
std::vector<float> dequantize_original(const QuantizedTensor& q);

// Unpacked trust mask as 0/1 bytes (all ones when the tensor has none).
std::vector<uint8_t> unpack_mask(const QuantizedTensor& q);

const char* element_format_name(ElementFormat f);
const char* scale_format_name(ScaleFormat f);

}  // namespace nibble::quant

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
