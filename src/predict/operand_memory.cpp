// Bytes per operand and per saved-for-backward tensor for each recipe (docs/spec.md §2). Block-scaled
// FP8 counts the padded buffers cuBLASLt reads (scale_layout.hpp); MX and NV formats count one scale
// byte per block without the 128x4 tile padding (their Hopper GEMMs re-encode or decode anyway).
#include <algorithm>
#include <stdexcept>
#include <string>

#include "nibble/predict.hpp"
#include "nibble/predict/operand_memory.hpp"
#include "nibble/quant/recipe_list.hpp"
#include "nibble/kernels/scale_layout.hpp"

namespace nibble::predict {
namespace {

constexpr int64_t kAmaxHistory = 1024;  // fp8-delayed default window, FP32 each

namespace scale_layout = cuda::scale_layout;
using cuda::ScaleMode;
using scale_layout::ceil_div;

int64_t fp4_bytes(int64_t n) { return ceil_div(n, 2); }
// One scale byte per `vec` elements along the scaled dimension.
int64_t block_scale_bytes(int64_t rows, int64_t cols, int64_t vec) { return rows * ceil_div(cols, vec); }

TensorBytes bytes_for(std::string_view recipe, TensorRole role, int64_t rows, int64_t cols, bool fp8_tn_only) {
  const int64_t n = rows * cols;
  TensorBytes b;
  if (recipe == "bf16") {
    b.codes = 2 * n;  // cuBLAS reads BF16 in any layout: no transposed copy
  } else if (recipe == "fp8-delayed" || recipe == "fp8-current") {
    // Per-tensor FP8 on Hopper is TN only, so every operand keeps a transposed copy for backward.
    b.codes = n;
    b.transposed_codes = fp8_tn_only ? n : 0;
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
    // Every operand has a copy along each GEMM's inner dimension: dY quantized twice in backward
    // (along O for dgrad, along T for wgrad); X and W keep their forward copy and 1-bit trust masks,
    // and backward re-rotates and re-quantizes them along the other dimension (a transient copy,
    // not saved: see saved_bytes).
    b.codes = fp4_bytes(n);
    b.scales = block_scale_bytes(rows, cols, 32);
    b.transposed_codes = fp4_bytes(n);
    b.transposed_scales = block_scale_bytes(cols, rows, 32);
    if (role != TensorRole::gradient) b.masks = ceil_div(n, 8);
  }
  return b;
}

// The part of an operand that lives from fprop to backward: what wgrad reads of X, dgrad of W.
int64_t saved_bytes(std::string_view recipe, TensorRole role, const TensorBytes& b) {
  if (role == TensorRole::gradient) return 0;
  if (recipe == "bf16") return b.codes;
  if (recipe == "quartet") return b.codes + b.scales + b.masks;
  if (b.transposed_codes == 0) return b.codes + b.scales;  // one copy serves every GEMM (FP8 on Blackwell)
  return b.transposed_codes + b.transposed_scales;  // the backward GEMMs read the transposed copy
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

OperandMemory operand_memory(std::string_view recipe, TensorRole role, int64_t rows, int64_t cols,
                             bool fp8_tn_only) {
  quant::require_recipe_name(recipe, "memory");
  if (rows <= 0 || cols <= 0) {
    throw std::invalid_argument("memory: " + std::string(to_string(role)) + " shape [" + std::to_string(rows) +
                                ", " + std::to_string(cols) + "] must have positive dimensions");
  }
  OperandMemory m;
  m.recipe = std::string(recipe);
  m.role = role;
  m.rows = rows;
  m.cols = cols;
  m.bytes = bytes_for(recipe, role, rows, cols, fp8_tn_only);
  m.saved_for_backward = saved_bytes(recipe, role, m.bytes);
  m.bf16_bytes = 2 * rows * cols;
  return m;
}

LinearLayerMemory linear_layer_memory(std::string_view recipe, int64_t tokens, int64_t in_features,
                                      int64_t out_features, bool fp8_tn_only) {
  LinearLayerMemory l;
  l.activation = operand_memory(recipe, TensorRole::activation, tokens, in_features, fp8_tn_only);
  l.weight = operand_memory(recipe, TensorRole::weight, out_features, in_features, fp8_tn_only);
  l.gradient = operand_memory(recipe, TensorRole::gradient, tokens, out_features, fp8_tn_only);
  l.saved_for_backward = l.activation.saved_for_backward + l.weight.saved_for_backward;
  l.bf16_saved_for_backward = l.activation.bf16_bytes + l.weight.bf16_bytes;
  return l;
}

int64_t emulation_bytes(std::string_view recipe, std::string_view path, int64_t rows, int64_t cols) {
  if (path.empty() || path == bench::path::native) return 0;
  const int64_t n = rows * cols;
  if (recipe == "mxfp8" || recipe == "nvfp4") return 2 * (2 * n);  // BF16 decodings of both copies
  if (recipe == "mxfp4" || recipe == "quartet") return 2 * n + 4 * (rows + cols);  // E4M3 + row scales
  return 0;
}

bench::MemoryUsage recipe_memory(const std::string& recipe, const std::vector<bench::Row>& rows, bool fp8_tn_only) {
  bench::MemoryUsage m;
  m.recipe = recipe;
  // Every mode runs the same layers: count the rows of one (the first this recipe has).
  auto first = std::find_if(rows.begin(), rows.end(), [&](const bench::Row& r) { return r.recipe == recipe; });
  if (first == rows.end()) return m;
  const bench::Mode mode = first->mode;
  int64_t largest = 0, largest_unsaved = 0;
  for (const bench::Row& r : rows) {
    if (r.recipe != recipe || r.mode != mode || r.pass != "fprop" || r.per_model || !r.ok()) continue;
    const int64_t t = r.m, i = r.k, o = r.n;
    const LinearLayerMemory l = linear_layer_memory(recipe, t, i, o, fp8_tn_only);
    const std::string_view path = r.path == bench::path::predicted ? r.predicted_path : r.path;
    const int64_t operands = l.activation.bytes.total() + l.weight.bytes.total() + l.gradient.bytes.total() +
                             emulation_bytes(recipe, path, t, i) + emulation_bytes(recipe, path, o, i) +
                             emulation_bytes(recipe, path, t, o);
    m.saved_bytes += l.saved_for_backward * r.count;
    if (operands > largest) {
      largest = operands;
      largest_unsaved = operands - l.saved_for_backward;
    }
  }
  m.operand_bytes = largest;
  m.peak_bytes = m.saved_bytes + largest_unsaved;
  return m;
}

}  // namespace nibble::predict
