// Which linear layers a recipe can run, as the benchmark runs them: in one training step every
// dimension of the layer (tokens T, in_features I, out_features O) is the inner dimension K of one of
// its GEMMs and the blocked dimension of one quantized copy (X and X^T, W and W^T, dY and dY^T), so
// each must be a multiple of the recipe's block along K: 8 for BF16 (16-byte rows for cuBLASLt),
// 16 for per-tensor FP8 (cuBLASLt FP8, the 16-byte stores of the cast + transpose) and NVFP4 (1x16 and
// 16x16 blocks), 32 for MXFP8, MXFP4 and Quartet, 128 for fp8-block (1x128 and 128x128 blocks).
// The GPU runner (engine) and the performance model (predict) both refuse a layer with this message,
// so a prediction never shows a time for a row the measurement would reject. Header-only: the
// predictor uses it without linking the quantizers.
#pragma once
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>

#include "nibble/quant/recipe_list.hpp"

namespace nibble::quant {

// The multiple T, I and O must be for `recipe` (0 for a name that is not a recipe).
inline int64_t layer_multiple(std::string_view recipe) {
  constexpr int64_t kMultiple[] = {8, 16, 16, 128, 32, 16, 32, 32};  // in kRecipeNames' order
  static_assert(std::size(kMultiple) == std::size(kRecipeNames), "one multiple per recipe");
  for (size_t i = 0; i < std::size(kRecipeNames); ++i) {
    if (kRecipeNames[i] == recipe) return kMultiple[i];
  }
  return 0;
}

// Empty when `recipe` can run a linear layer of T tokens, I in_features and O out_features; otherwise
// what is wrong and how to fix it. `layer` names the layer in the message.
inline std::string layer_shape_error(std::string_view recipe, std::string_view layer, int64_t t, int64_t i,
                                     int64_t o) {
  const int64_t b = layer_multiple(recipe);
  if (b <= 0) return "unknown recipe '" + std::string(recipe) + "'; valid recipes: " + recipe_name_list();
  std::string bad;
  int n_bad = 0;
  for (const auto& [name, v] : {std::pair<const char*, int64_t>{"T (tokens)", t}, {"in_features", i}, {"out_features", o}}) {
    if (v % b != 0) {
      bad += (bad.empty() ? "" : ", ") + std::string(name) + " = " + std::to_string(v) + " (next multiple " +
             std::to_string((v + b - 1) / b * b) + ")";
      ++n_bad;
    }
  }
  if (bad.empty()) return {};
  return std::string(recipe) + " cannot run " + std::string(layer) + ": " + bad +
         (n_bad > 1 ? " are not multiples of " : " is not a multiple of ") + std::to_string(b) +
         ", the block every dimension of a linear layer needs under this recipe (each is the inner dimension of "
         "one GEMM of the step); pad " + (n_bad > 1 ? "them" : "it") + " or choose another recipe";
}

// Empty when a BF16 GEMM operand whose inner dimension is k has 16-byte aligned rows (k % 8 == 0), as
// cuBLASLt needs; otherwise what is wrong and the fix. cuda::gemm refuses such an operand with this text
// and the predictor marks the same GEMM failed with it (e.g. the BF16 LM head at an unpadded vocabulary).
inline std::string bf16_gemm_k_error(int64_t k) {
  if (k % 8 == 0) return {};
  return "K = " + std::to_string(k) + " gives rows that are not 16-byte aligned in BF16; K % 8 == 0 is required "
         "(pad K with zeros)";
}

}  // namespace nibble::quant
