// Bytes per operand and per saved-for-backward tensor for each recipe (SPEC section 2). Block-scaled
// FP8 counts the padded buffers cuBLASLt reads (scale_layout.hpp); MX and NV formats count one scale
// byte per block without the 128x4 tile padding (their Hopper GEMMs re-encode or decode anyway).
#include <array>
#include <stdexcept>
#include <string>

#include "nibble/cuda/memory.hpp"
#include "nibble/cuda/scale_layout.hpp"

namespace nibble::cuda {
namespace {

constexpr std::array<std::string_view, 8> kRecipes = {"bf16",  "fp8-delayed", "fp8-current", "fp8-block",
                                                      "mxfp8", "nvfp4",       "mxfp4",       "quartet"};
constexpr int64_t kAmaxHistory = 1024;  // fp8-delayed default window, FP32 each

using scale_layout::ceil_div;

int64_t fp4_bytes(int64_t n) { return ceil_div(n, 2); }
// One scale byte per `vec` elements along the scaled dimension.
int64_t block_scale_bytes(int64_t rows, int64_t cols, int64_t vec) { return rows * ceil_div(cols, vec); }

TensorBytes bytes_for(std::string_view recipe, TensorRole role, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  TensorBytes b;
  if (recipe == "bf16") {
    b.codes = 2 * n;  // cuBLAS reads BF16 in any layout: no transposed copy
  } else if (recipe == "fp8-delayed" || recipe == "fp8-current") {
    // Per-tensor FP8 on Hopper is TN only, so every operand keeps a transposed copy for backward.
    b.codes = n;
    b.transposed_codes = n;
    b.scales = 4 + (recipe == "fp8-delayed" ? 4 * kAmaxHistory : 0);
  } else if (recipe == "fp8-block") {
    b.codes = n;
    b.transposed_codes = n;
    const ScaleMode mode = role == TensorRole::weight ? ScaleMode::blk128x128 : ScaleMode::vec128;
    b.scales = scale_layout::scale_bytes(mode, rows, cols);
    b.transposed_scales = scale_layout::scale_bytes(mode, cols, rows);
  } else if (recipe == "mxfp8") {
    // 1x32 along the inner dimension plus a separate 32x1 copy for the transposed use.
    b.codes = n;
    b.scales = block_scale_bytes(rows, cols, 32);
    b.transposed_codes = n;
    b.transposed_scales = block_scale_bytes(cols, rows, 32);
  } else if (recipe == "nvfp4") {
    // 1x16 UE4M3 (weights 16x16, stored per 1x16 row as the GEMM reads them) + one FP32 global scale.
    b.codes = fp4_bytes(n);
    b.scales = block_scale_bytes(rows, cols, 16) + 4;
    b.transposed_codes = fp4_bytes(n);
    b.transposed_scales = block_scale_bytes(cols, rows, 16) + 4;
  } else if (recipe == "mxfp4") {
    b.codes = fp4_bytes(n);
    b.scales = block_scale_bytes(rows, cols, 32);
    b.transposed_codes = fp4_bytes(n);
    b.transposed_scales = block_scale_bytes(cols, rows, 32);
  } else if (recipe == "quartet") {
    b.codes = fp4_bytes(n);
    b.scales = block_scale_bytes(rows, cols, 32);
    if (role == TensorRole::gradient) {
      // dY is quantized twice in backward (along O for dgrad, along T for wgrad), never saved.
      b.transposed_codes = fp4_bytes(n);
      b.transposed_scales = block_scale_bytes(cols, rows, 32);
    } else {
      // Forward keeps Xq / Wq and the 1-bit trust masks; backward re-rotates and re-quantizes from
      // them, so no transposed copy is stored.
      b.masks = ceil_div(n, 8);
    }
  }
  return b;
}

// The part of an operand that lives from fprop to backward: what wgrad reads of X, dgrad of W.
int64_t saved_bytes(std::string_view recipe, TensorRole role, const TensorBytes& b) {
  if (role == TensorRole::gradient) return 0;
  if (recipe == "bf16") return b.codes;
  if (recipe == "quartet") return b.codes + b.scales + b.masks;
  return b.transposed_codes + b.transposed_scales;  // the backward GEMMs read the transposed copy
}

std::string known_list() {
  std::string s;
  for (auto r : kRecipes) s += (s.empty() ? "" : ", ") + std::string(r);
  return s;
}

}  // namespace

std::string_view to_string(TensorRole role) {
  switch (role) {
    case TensorRole::activation: return "activation";
    case TensorRole::weight: return "weight";
    case TensorRole::gradient: return "gradient";
  }
  return "unknown";
}

std::span<const std::string_view> memory_recipes() { return kRecipes; }

OperandMemory operand_memory(std::string_view recipe, TensorRole role, int64_t rows, int64_t cols) {
  bool known = false;
  for (auto r : kRecipes) known = known || r == recipe;
  if (!known) {
    throw std::invalid_argument("memory: unknown recipe '" + std::string(recipe) + "'; known recipes: " +
                                known_list());
  }
  if (rows <= 0 || cols <= 0) {
    throw std::invalid_argument("memory: " + std::string(to_string(role)) + " shape [" + std::to_string(rows) +
                                ", " + std::to_string(cols) + "] must have positive dimensions");
  }
  OperandMemory m;
  m.recipe = std::string(recipe);
  m.role = role;
  m.rows = rows;
  m.cols = cols;
  m.bytes = bytes_for(recipe, role, rows, cols);
  m.saved_for_backward = saved_bytes(recipe, role, m.bytes);
  m.bf16_bytes = 2 * rows * cols;
  return m;
}

LinearLayerMemory linear_layer_memory(std::string_view recipe, int64_t tokens, int64_t in_features,
                                      int64_t out_features) {
  LinearLayerMemory l;
  l.activation = operand_memory(recipe, TensorRole::activation, tokens, in_features);
  l.weight = operand_memory(recipe, TensorRole::weight, out_features, in_features);
  l.gradient = operand_memory(recipe, TensorRole::gradient, tokens, out_features);
  l.saved_for_backward = l.activation.saved_for_backward + l.weight.saved_for_backward;
  l.bf16_saved_for_backward = l.activation.bf16_bytes + l.weight.bf16_bytes;
  return l;
}

}  // namespace nibble::cuda
