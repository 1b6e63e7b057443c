// Memory accounting per recipe: bytes a quantized operand holds (codes, scales, masks, and the copy
// along the other dimension that a backward GEMM reads) and bytes each linear layer keeps between its
// forward and backward pass, next to BF16; and, from a benchmark's rows, a recipe's memory for one
// transformer block (`recipe_memory`), which the measured and the predicted `nibble bench` both report.
// Host-only arithmetic, no CUDA calls; recipe names are strings as users type them.
//
// Shapes follow the forward GEMM: an operand is [rows, cols] with cols the fprop inner dimension
// (activation X [T, I], weight W [O, I], gradient dY [T, O]). The "transposed copy" is [cols, rows],
// scaled along rows: what per-tensor-FP8-on-Hopper (TN only) backward GEMMs need.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "nibble/results/result.hpp"

namespace nibble::predict {

enum class TensorRole : uint8_t { activation, weight, gradient };
std::string_view to_string(TensorRole role);

struct TensorBytes {
  int64_t codes = 0;              // element codes: 2 bytes (BF16), 1 byte (FP8) or 4 bits packed (FP4)
  int64_t scales = 0;             // scales (+ the amax history of fp8-delayed)
  int64_t masks = 0;              // Quartet's trust masks, 1 bit per element
  int64_t transposed_codes = 0;   // second copy, [cols, rows]
  int64_t transposed_scales = 0;
  int64_t total() const { return codes + scales + masks + transposed_codes + transposed_scales; }
};

struct OperandMemory {
  std::string recipe;
  TensorRole role = TensorRole::activation;
  int64_t rows = 0;
  int64_t cols = 0;
  TensorBytes bytes;
  int64_t saved_for_backward = 0;  // the part the backward pass reads (0 for gradients: transient)
  int64_t bf16_bytes = 0;          // rows * cols * 2
  double ratio_vs_bf16() const { return bf16_bytes ? static_cast<double>(bytes.total()) / bf16_bytes : 0.0; }
};

// Throws std::invalid_argument for a recipe not in quant::recipe_names() (listing them) or non-positive shapes.
// fp8_tn_only: per-tensor FP8 GEMMs take only the TN layout (Hopper), so per-tensor FP8 keeps a transposed
// copy for the backward GEMMs; false on Blackwell, whose FP8 GEMMs take any layout (one copy serves all).
OperandMemory operand_memory(std::string_view recipe, TensorRole role, int64_t rows, int64_t cols,
                             bool fp8_tn_only = true);

struct LinearLayerMemory {
  OperandMemory activation;  // X [tokens, in_features]
  OperandMemory weight;      // W [out_features, in_features]
  OperandMemory gradient;    // dY [tokens, out_features]
  int64_t saved_for_backward = 0;       // activation + weight copies kept from fprop to backward
  int64_t bf16_saved_for_backward = 0;  // the same for BF16 training: X and W in BF16
};
LinearLayerMemory linear_layer_memory(std::string_view recipe, int64_t tokens, int64_t in_features,
                                      int64_t out_features, bool fp8_tn_only = true);

// Buffers an emulated execution path adds to one operand of [rows, cols] (both copies): the exact E4M3
// re-encodings with one FP32 scale per row (mxfp4, quartet on Hopper) or the exact BF16 decodings
// (mxfp8, nvfp4 on Hopper). 0 for a native path.
int64_t emulation_bytes(std::string_view recipe, std::string_view path, int64_t rows, int64_t cols);

// One transformer block's memory for `recipe`, from the fprop rows of its block linear layers in one
// mode (T = m, I = k, O = n; other recipes, failed rows and once-per-model layers are skipped) and
// the execution path each ran or would run (`predicted_path` of a prediction):
//   operand_bytes = the largest linear layer's X, W and dY operands, all copies, emulation buffers included;
//   saved_bytes   = the copies every linear layer keeps from fprop for backward (count-weighted);
//   peak_bytes    = saved_bytes + the largest layer's operands that are not saved (its backward step).
// measured_bytes stays 0: only the engine measures.
bench::MemoryUsage recipe_memory(const std::string& recipe, const std::vector<bench::Row>& rows,
                                 bool fp8_tn_only = true);

}  // namespace nibble::predict
