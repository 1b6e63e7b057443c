// CPU reference: Quartet (docs/spec.md §3). Forward: Hadamard (no signs) + QuEST with a trust mask.
// Backward: seeded random-sign Hadamard + the 3/4-prescaled absmax quantizer.
#include <string>
#include <vector>

#include "nibble/quant/quantizers.hpp"
#include "shape_checks.hpp"

namespace nibble::quant {

namespace {
void set_mask_bit(QuantizedTensor& q, int64_t i, bool on) {
  if (on) q.mask[static_cast<size_t>(i / 8)] |= static_cast<uint8_t>(1u << (i % 8));
}

std::vector<float> rotated_copy(const float* x, int64_t rows, int64_t cols, const Rotation& rotation) {
  std::vector<float> v(x, x + rows * cols);
  if (rotation.size != 0) hadamard_transform(v.data(), rows, cols, rotation, /*inverse=*/false);
  return v;
}
}  // namespace

QuantizedTensor quantize_quartet_forward(const float* x, int64_t rows, int64_t cols, int hadamard_size, bool rotate,
                                         ForwardQuantizer kind) {
  detail::require_input("quartet forward", x, rows, cols);
  if (rotate) {
    detail::require_hadamard_size("quartet forward", hadamard_size);
    detail::require_blocks("quartet forward (hadamard)", rows, cols, 1, hadamard_size);
  }
  detail::require_blocks("quartet forward (mxfp4)", rows, cols, 1, 32);
  const Rotation rotation{rotate ? hadamard_size : 0, SignKind::none, 0};
  const std::vector<float> xr = rotated_copy(x, rows, cols, rotation);
  QuantizedTensor q = make_quantized_tensor(rows, cols, ElementFormat::e2m1, 1, 32, ScaleFormat::e8m0, true);
  q.rotation = rotation;
  // absmax stores 3/4 of the values (as the backward quantizer): GEMM outputs times 16/9.
  if (kind == ForwardQuantizer::absmax) q.prescale = kQuartetBackwardPrescale;
  uint8_t codes[32];
  bool trusted[32];
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < cols / 32; ++b) {
      const int64_t first = r * cols + b * 32;
      const float* g = xr.data() + first;
      q.scale_codes[static_cast<size_t>(r * (cols / 32) + b)] =
          kind == ForwardQuantizer::quest ? quest_group(g, 32, codes, trusted) : absmax_forward_group(g, 32, codes, trusted);
      for (int i = 0; i < 32; ++i) {
        q.set_code(r, b * 32 + i, codes[i]);
        set_mask_bit(q, first + i, trusted[i]);
      }
    }
  }
  q.produced_by = std::string("cpu-reference quartet forward (") + (rotate ? "hadamard-" + std::to_string(hadamard_size) : "no rotation") +
                  (kind == ForwardQuantizer::quest ? ", quest)" : ", absmax, prescale 0.75)");
  return q;
}

QuantizedTensor quantize_quartet_backward(const float* x, int64_t rows, int64_t cols, uint64_t sign_seed,
                                          int hadamard_size, bool rotate, const SrKey& key) {
  detail::require_input("quartet backward", x, rows, cols);
  if (rotate) {
    detail::require_hadamard_size("quartet backward", hadamard_size);
    detail::require_blocks("quartet backward (hadamard)", rows, cols, 1, hadamard_size);
  }
  detail::require_blocks("quartet backward (mxfp4)", rows, cols, 1, 32);
  const Rotation rotation{rotate ? hadamard_size : 0, rotate ? SignKind::seeded : SignKind::none, rotate ? sign_seed : 0};
  const std::vector<float> xr = rotated_copy(x, rows, cols, rotation);
  QuantizedTensor q = make_quantized_tensor(rows, cols, ElementFormat::e2m1, 1, 32, ScaleFormat::e8m0, false);
  q.rotation = rotation;
  q.prescale = kQuartetBackwardPrescale;
  uint8_t codes[32];
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < cols / 32; ++b) {
      const int64_t first = r * cols + b * 32;
      q.scale_codes[static_cast<size_t>(r * (cols / 32) + b)] =
          quartet_backward_group(xr.data() + first, 32, key, static_cast<uint64_t>(first), codes);
      for (int i = 0; i < 32; ++i) q.set_code(r, b * 32 + i, codes[i]);
    }
  }
  q.stochastic = key.enabled;
  q.seed = key.seed;
  q.stream = key.stream;
  q.produced_by = std::string("cpu-reference quartet backward (") +
                  (rotate ? "random-sign hadamard-" + std::to_string(hadamard_size) : "no rotation") +
                  (key.enabled ? ", stochastic)" : ", nearest)");
  return q;
}

}  // namespace nibble::quant
