// Memory accounting per recipe: bytes a quantized operand holds (codes, scales, masks, and the
// transposed copy the backward GEMMs read on Hopper) and bytes each linear layer keeps between its
// forward and backward pass, next to BF16. Host-only arithmetic, no CUDA calls; recipe names are
// strings ("bf16", "fp8-delayed", "fp8-current", "fp8-block", "mxfp8", "nvfp4", "mxfp4", "quartet")
// so the benchmark can pass what the user typed without depending on the quantization library.
//
// Shapes follow the forward GEMM: an operand is [rows, cols] with cols the fprop inner dimension
// (activation X [T, I], weight W [O, I], gradient dY [T, O]). The "transposed copy" is [cols, rows],
// scaled along rows: what per-tensor-FP8-on-Hopper (TN only) backward GEMMs need.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace nibble::cuda {

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

// Throws std::invalid_argument for an unknown recipe (listing the known ones) or non-positive shapes.
OperandMemory operand_memory(std::string_view recipe, TensorRole role, int64_t rows, int64_t cols);

struct LinearLayerMemory {
  OperandMemory activation;  // X [tokens, in_features]
  OperandMemory weight;      // W [out_features, in_features]
  OperandMemory gradient;    // dY [tokens, out_features]
  int64_t saved_for_backward = 0;       // activation + weight copies kept from fprop to backward
  int64_t bf16_saved_for_backward = 0;  // the same for BF16 training: X and W in BF16
};
LinearLayerMemory linear_layer_memory(std::string_view recipe, int64_t tokens, int64_t in_features,
                                      int64_t out_features);

// The recipe names this accounting knows, in SPEC order.
std::span<const std::string_view> memory_recipes();

}  // namespace nibble::cuda
