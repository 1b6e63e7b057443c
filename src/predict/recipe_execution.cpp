// Which tensor-core path each recipe takes on a GPU (SPEC section 4), and the bytes its
// quantization moves per GEMM.
#include "nibble/predict.hpp"
#include "nibble/quant/recipe_list.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace nibble::predict {

namespace {

bool is_blackwell(const GpuSpec& gpu) { return gpu.compute_capability >= 100; }

// Bytes per quantized element including its share of the scales.
struct Encoding {
  double element = 1;  // fp8 1, fp4 0.5
  double scale = 0;    // scale bytes per element
  int copies = 2;      // row-wise plus the transposed copy the backward GEMMs need
  double extra_read = 0;  // additional bf16 reads per element (an amax pass)
};

Encoding encoding_of(std::string_view recipe) {
  if (recipe == "fp8-delayed") return {1, 0, 2, 0};      // one fused pass records the amax
  if (recipe == "fp8-current") return {1, 0, 2, 2};      // amax pass, then the cast pass
  if (recipe == "fp8-block") return {1, 4.0 / 128, 2, 0};
  if (recipe == "mxfp8") return {1, 1.0 / 32, 2, 0};
  if (recipe == "nvfp4") return {0.5, 1.0 / 16, 2, 0};
  if (recipe == "mxfp4") return {0.5, 1.0 / 32, 2, 0};
  if (recipe == "quartet") return {0.5, 1.0 / 32 + 1.0 / 8, 1, 0};  // + 1-bit trust masks
  return {0, 0, 0, 0};
}

// One tensor of `elements` quantized from bf16: read it (plus any amax pass), write the copies;
// on Hopper the bf16 emulation of mxfp8/nvfp4 also writes the decoded bf16 operand.
double tensor_bytes(std::string_view recipe, double elements, int copies, const GpuSpec& gpu) {
  const Encoding e = encoding_of(recipe);
  double bytes = elements * (2 + e.extra_read) + copies * elements * (e.element + e.scale);
  if (!is_blackwell(gpu) && (recipe == "mxfp8" || recipe == "nvfp4")) bytes += copies * elements * 2;
  return bytes;
}

}  // namespace

std::vector<std::string> known_recipes() { return quant::recipe_names(); }

Execution execution_for(std::string_view recipe, const GpuSpec& gpu) {
  const bool bw = is_blackwell(gpu);
  const std::string native(bench::path::native);
  if (recipe == "bf16") return {"bf16", native, gpu.bf16_tflops, 2};
  if (recipe == "fp8-delayed" || recipe == "fp8-current") return {"fp8-tensor", native, gpu.fp8_tflops, 1};
  if (recipe == "fp8-block")
    // cuBLASLt has the 128-block scale modes (VEC128_32F, BLK128x128_32F) on sm_90 only. On Blackwell
    // Transformer Engine runs this recipe's GEMMs as MXFP8 (its PR #2157): the block scales are powers of
    // two (SPEC section 2), so each becomes an exact E8M0 scale repeated over the 1x32 blocks it covers.
    return bw ? Execution{"mx-native", std::string(bench::path::emulated_exact_fp8), gpu.fp8_tflops, 1 + 1.0 / 32}
              : Execution{"fp8-block", native, gpu.fp8_tflops, 1 + 4.0 / 128};
  if (recipe == "mxfp8")
    return bw ? Execution{"mx-native", native, gpu.fp8_tflops, 1 + 1.0 / 32}
              : Execution{"bf16-decoded", std::string(bench::path::emulated_exact_bf16), gpu.bf16_tflops, 2};
  if (recipe == "nvfp4")
    return bw && gpu.fp4_tflops > 0
               ? Execution{"fp4-native", native, gpu.fp4_tflops, 0.5 + 1.0 / 16}
               : Execution{"bf16-decoded", std::string(bench::path::emulated_exact_bf16), gpu.bf16_tflops, 2};
  if (recipe == "mxfp4" || recipe == "quartet")
    return bw && gpu.fp4_tflops > 0
               ? Execution{"fp4-native", native, gpu.fp4_tflops, 0.5 + 1.0 / 32}
               // exact re-encoding in E4M3 with one scale per row (OUTER_VEC_32F)
               : Execution{"fp8-rowwise", std::string(bench::path::emulated_exact_fp8), gpu.fp8_tflops, 1};
  std::string known;
  for (const auto& r : known_recipes()) known += (known.empty() ? "" : ", ") + r;
  throw std::invalid_argument(fmt::format("recipe '{}' is unknown; valid recipes: {}", recipe, known));
}

double quant_bytes(std::string_view recipe, const std::string& pass, bench::Mode mode, const Shape& s,
                   const GpuSpec& gpu) {
  execution_for(recipe, gpu);  // validates the name
  if (recipe == "bf16" || mode == bench::Mode::pre_quantized) return 0;
  const double a = double(s.m) * double(s.k);  // A operand elements
  const double b = double(s.k) * double(s.n);  // B operand elements
  if (mode == bench::Mode::per_gemm) return tensor_bytes(recipe, a, 1, gpu) + tensor_bytes(recipe, b, 1, gpu);
  // Step-faithful: fprop quantizes X (A) and W (B) with the copies backward needs; dgrad quantizes
  // dY (A) and reuses W's copy; wgrad reuses both copies.
  const int copies = encoding_of(recipe).copies;
  if (pass == "fprop") return tensor_bytes(recipe, a, copies, gpu) + tensor_bytes(recipe, b, copies, gpu);
  if (pass == "dgrad") {
    double bytes = tensor_bytes(recipe, a, copies, gpu);
    // Quartet re-rotates Wq^T with the step's random signs and re-quantizes it (4-bit in, 4-bit out).
    if (recipe == "quartet") bytes += b * 2 * (0.5 + 1.0 / 32);
    return bytes;
  }
  if (recipe == "quartet") return (a + b) * 2 * (0.5 + 1.0 / 32);  // dY^T and Xq^T re-rotated
  return 0;
}

}  // namespace nibble::predict
