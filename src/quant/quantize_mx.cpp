// CPU reference: MX formats (mxfp8 = E4M3, mxfp4 = E2M1), 1 x 32 blocks, E8M0 scales.
#include <string>

#include "nibble/quant/quantizers.hpp"
#include "nibble/quant/recipe.hpp"
#include "shape_checks.hpp"

namespace nibble::quant {

QuantizedTensor quantize_mx(const float* x, int64_t rows, int64_t cols, ElementFormat f, MxScaleRule rule,
                            const SrKey& key) {
  const char* who = f == ElementFormat::e2m1 ? "mxfp4" : "mxfp8";
  detail::require_input(who, x, rows, cols);
  if (f != ElementFormat::e4m3 && f != ElementFormat::e2m1) {
    throw std::invalid_argument(std::string("mx: element format ") + element_format_name(f) +
                                " is not supported; use e4m3 (mxfp8) or e2m1 (mxfp4)");
  }
  detail::require_blocks(who, rows, cols, 1, 32);
  QuantizedTensor q = make_quantized_tensor(rows, cols, f, 1, 32, ScaleFormat::e8m0, false);
  uint8_t codes[32];
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < cols / 32; ++b) {
      const int64_t first = r * cols + b * 32;
      q.scale_codes[static_cast<size_t>(r * (cols / 32) + b)] =
          quantize_mx_group(x + first, 32, f, rule, key, static_cast<uint64_t>(first), codes);
      for (int i = 0; i < 32; ++i) q.set_code(r, b * 32 + i, codes[i]);
    }
  }
  q.stochastic = key.enabled;
  q.seed = key.seed;
  q.stream = key.stream;
  q.produced_by = std::string("cpu-reference ") + who + " (" + mx_scale_rule_name(rule) + " scale)";
  return q;
}

}  // namespace nibble::quant
