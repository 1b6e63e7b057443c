// CPU reference: nvfp4, Transformer Engine's NVFP4 recipe (docs/recipes.md, nvfp4). E2M1 elements in
// block_rows x 16 blocks (1x16 for x/dy, 16x16 for w), UE4M3 block scales, one FP32 global decode scale
// S_dec = 1 / S_enc with S_enc = fl(6 * 448 / amax); with rht, the 16-point RHT's output rounded to
// BF16 is what gets quantized (and what the amax sees).
#include <string>
#include <vector>

#include "nibble/quant/quantizers.hpp"
#include "shape_checks.hpp"

namespace nibble::quant {

QuantizedTensor quantize_nvfp4(const float* x, int64_t rows, int64_t cols, int64_t block_rows, const SrKey& key,
                               bool rht) {
  detail::require_input("nvfp4", x, rows, cols);
  if (block_rows != 1 && block_rows != 16) {
    throw std::invalid_argument("nvfp4: block_rows " + std::to_string(block_rows) +
                                " is not supported; use 1 (activations, gradients) or 16 (weights)");
  }
  detail::require_blocks(block_rows == 1 ? "nvfp4 1x16" : "nvfp4 16x16", rows, cols, block_rows, 16);
  const Rotation rotation{rht ? 16 : 0, rht ? SignKind::nvfp4_fixed : SignKind::none, 0};
  std::vector<float> rotated;
  if (rht) {
    rotated.assign(x, x + rows * cols);
    hadamard_transform(rotated.data(), rows, cols, rotation, /*inverse=*/false);
    for (float& v : rotated) v = nvfp4_rht_output(v);
    x = rotated.data();
  }
  QuantizedTensor q = make_quantized_tensor(rows, cols, ElementFormat::e2m1, block_rows, 16, ScaleFormat::ue4m3, false);
  const float s_enc = nvfp4_global_encode_scale(amax_of(x, rows * cols));
  const float s_dec = nvfp4_global_decode_scale_of(s_enc);
  q.tensor_scale = s_dec;
  q.rotation = rotation;
  const int64_t grid_cols = cols / 16;
  for (int64_t br = 0; br < rows / block_rows; ++br) {
    for (int64_t bc = 0; bc < grid_cols; ++bc) {
      uint32_t m = 0;
      for (int64_t r = br * block_rows; r < (br + 1) * block_rows; ++r) {
        m = amax_combine_bits(m, abs_bits(amax_of(x + r * cols + bc * 16, 16)));
      }
      const uint8_t sc = nvfp4_block_scale_code(amax_from_bits(m), s_enc);
      q.scale_codes[static_cast<size_t>(br * grid_cols + bc)] = sc;
      for (int64_t r = br * block_rows; r < (br + 1) * block_rows; ++r) {
        for (int64_t c = bc * 16; c < (bc + 1) * 16; ++c) {
          const int64_t i = r * cols + c;
          q.set_code(r, c, nvfp4_encode_element(x[i], sc, s_dec, key, static_cast<uint64_t>(i)));
        }
      }
    }
  }
  q.stochastic = key.enabled;
  q.seed = key.seed;
  q.stream = key.stream;
  q.produced_by = std::string("cpu-reference nvfp4 ") + (block_rows == 1 ? "1x16" : "16x16") +
                  (key.enabled ? " stochastic" : " nearest") + (rht ? " with 16-point RHT" : "");
  return q;
}

}  // namespace nibble::quant
