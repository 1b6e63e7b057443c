// CPU reference: bf16, per-tensor fp8 (current scaling) and fp8-block (1x128, 128x128), and the
// fp8-delayed scaling history.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "nibble/format/bf16.hpp"
#include "nibble/quant/amax_history.hpp"
#include "nibble/quant/quantizers.hpp"
#include "nibble/quant/scale_rules.hpp"
#include "shape_checks.hpp"

namespace nibble::quant {

QuantizedTensor quantize_bf16(const float* x, int64_t rows, int64_t cols) {
  detail::require_input("bf16", x, rows, cols);
  QuantizedTensor q = make_quantized_tensor(rows, cols, ElementFormat::bf16, rows, cols, ScaleFormat::none, false);
  for (int64_t i = 0; i < rows * cols; ++i) {
    const uint16_t h = fmt::encode_bf16(x[i]);
    q.codes[static_cast<size_t>(2 * i)] = static_cast<uint8_t>(h & 0xFF);
    q.codes[static_cast<size_t>(2 * i + 1)] = static_cast<uint8_t>(h >> 8);
  }
  q.produced_by = "cpu-reference bf16 (round to nearest even)";
  return q;
}

QuantizedTensor quantize_fp8_per_tensor(const float* x, int64_t rows, int64_t cols, ElementFormat f,
                                        float encode_scale, const SrKey& key) {
  detail::require_input("fp8 per-tensor", x, rows, cols);
  if (f != ElementFormat::e4m3 && f != ElementFormat::e5m2) {
    throw std::invalid_argument(std::string("fp8 per-tensor: element format ") + element_format_name(f) +
                                " is not fp8; use e4m3 or e5m2");
  }
  if (!(encode_scale > 0.0f) || !is_finite(encode_scale)) {
    throw std::invalid_argument("fp8 per-tensor: encode scale " + std::to_string(encode_scale) +
                                " must be finite and positive");
  }
  QuantizedTensor q = make_quantized_tensor(rows, cols, f, rows, cols, ScaleFormat::none, false);
  for (int64_t i = 0; i < rows * cols; ++i) q.codes[static_cast<size_t>(i)] = encode_scaled(f, x[i], encode_scale, key, static_cast<uint64_t>(i));
  q.tensor_scale = per_tensor_decode_scale(encode_scale);
  q.stochastic = key.enabled;
  q.seed = key.seed;
  q.stream = key.stream;
  q.produced_by = std::string("cpu-reference fp8 per-tensor ") + element_format_name(f);
  return q;
}

QuantizedTensor quantize_fp8_current(const float* x, int64_t rows, int64_t cols, ElementFormat f, int margin,
                                     const SrKey& key) {
  detail::require_input("fp8-current", x, rows, cols);
  const float amax = amax_of(x, rows * cols);
  QuantizedTensor q = quantize_fp8_per_tensor(x, rows, cols, f, per_tensor_encode_scale(element_max(f), amax, margin), key);
  q.produced_by = std::string("cpu-reference fp8 per-tensor current scaling ") + element_format_name(f);
  return q;
}

namespace {
// One FP32 power-of-two decode scale per block_rows x 128 block.
QuantizedTensor quantize_fp8_block(const float* x, int64_t rows, int64_t cols, int64_t block_rows, const char* who) {
  detail::require_input(who, x, rows, cols);
  detail::require_blocks(who, rows, cols, block_rows, 128);
  QuantizedTensor q = make_quantized_tensor(rows, cols, ElementFormat::e4m3, block_rows, 128, ScaleFormat::fp32, false);
  const int64_t grid_cols = cols / 128;
  for (int64_t br = 0; br < rows / block_rows; ++br) {
    for (int64_t bc = 0; bc < grid_cols; ++bc) {
      uint32_t m = 0;
      for (int64_t r = br * block_rows; r < (br + 1) * block_rows; ++r) {
        for (int64_t c = bc * 128; c < (bc + 1) * 128; ++c) m = amax_combine_bits(m, abs_bits(x[r * cols + c]));
      }
      const int k = fp8_block_scale_exponent(amax_from_bits(m));
      const float s_enc = fmt::pow2f(k);
      q.scales_fp32[static_cast<size_t>(br * grid_cols + bc)] = fmt::pow2f(-k);
      for (int64_t r = br * block_rows; r < (br + 1) * block_rows; ++r) {
        for (int64_t c = bc * 128; c < (bc + 1) * 128; ++c) {
          q.codes[static_cast<size_t>(r * cols + c)] = fmt::encode_e4m3(x[r * cols + c] * s_enc);
        }
      }
    }
  }
  q.produced_by = std::string("cpu-reference ") + who + " e4m3, pow2 fp32 scales";
  return q;
}
}  // namespace

QuantizedTensor quantize_fp8_block_1x128(const float* x, int64_t rows, int64_t cols) {
  return quantize_fp8_block(x, rows, cols, 1, "fp8-block 1x128");
}
QuantizedTensor quantize_fp8_block_128x128(const float* x, int64_t rows, int64_t cols) {
  return quantize_fp8_block(x, rows, cols, 128, "fp8-block 128x128");
}

}  // namespace nibble::quant

// fp8-delayed scaling history: a ring buffer of past amaxes.
namespace nibble::quant {

AmaxHistory::AmaxHistory(int window, int margin, DelayedFirstStep first_step)
    : margin_(margin), first_step_(first_step) {
  if (window <= 0) {
    throw std::invalid_argument("amax history window " + std::to_string(window) +
                                " must be at least 1 (default 1024 steps)");
  }
  if (margin < 0 || margin > 64) {
    throw std::invalid_argument("amax history margin " + std::to_string(margin) +
                                " must be in [0, 64] (scale = fmax * 2^-margin / amax)");
  }
  values_.assign(static_cast<size_t>(window), 0.0f);
}

float AmaxHistory::max() const {
  // Any non-finite entry makes the max non-finite (NaN bits order above inf's).
  uint32_t m = 0;
  for (int64_t i = 0; i < filled_; ++i) m = amax_combine_bits(m, abs_bits(values_[static_cast<size_t>(i)]));
  return amax_from_bits(m);
}

float AmaxHistory::encode_scale(float fmax, float amax) const {
  if (filled_ == 0 && first_step_ == DelayedFirstStep::own_amax) return per_tensor_encode_scale(fmax, amax, margin_);
  return scale_;
}

void AmaxHistory::record(float amax, float fmax) {
  values_[static_cast<size_t>(next_)] = amax;
  next_ = (next_ + 1) % static_cast<int64_t>(values_.size());
  filled_ = std::min<int64_t>(filled_ + 1, static_cast<int64_t>(values_.size()));
  const float m = max();
  // Zero or non-finite history max: keep the previous scale.
  if (m > 0.0f && is_finite(m)) scale_ = per_tensor_encode_scale(fmax, m, margin_);
}

}  // namespace nibble::quant
