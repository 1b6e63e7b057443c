// Quantization traffic per recipe, pass and mode (include/nibble/predict/quant_traffic.hpp): the
// bytes each of nibble's kernels reads and writes, as the engine runs them.
#include "nibble/predict/quant_traffic.hpp"

#include <stdexcept>
#include <string>

#include "nibble/quant/recipe_list.hpp"

namespace nibble::predict {

namespace {

constexpr double kFp4 = 0.5 + 1.0 / 32;   // MXFP4 codes + E8M0 scales per element
constexpr double kE4m3 = 1.0;             // a re-encoded E4M3 operand (its per-row scales are negligible)
constexpr double kMask = 1.0 / 8;         // Quartet's trust mask, one bit per element
constexpr double kBf16 = 2.0;

// Quartet's passes (src/recipes/quartet_layer.cu): the forward quantizer per operand (Hadamard + QuEST,
// MXFP4 codes, scales and masks, and on Hopper the E4M3 operand), the backward quantizer of dY (one or
// both copies), the re-rotation of the saved forward codes (4-bit in, 4-bit out), on Hopper the E4M3
// re-encoding of what the backward GEMMs read, and the epilogue (read the BF16 GEMM output and the
// masks, write the BF16 result).
// Quartet's forward quantizer, bytes per element of one operand.
double quartet_forward_bytes(const TrafficOptions& o) {
  return kBf16 + kFp4 + kMask + (o.hopper ? kE4m3 : 0.0) + (o.hopper && !o.quartet_forward_fused ? kFp4 : 0.0);
}

double quartet_pass_bytes(std::string_view pass, bench::Mode mode, const bench::LinearShape& l,
                          const TrafficOptions& o) {
  const double t = static_cast<double>(l.t), i = static_cast<double>(l.i), out = static_cast<double>(l.o);
  const double reenc = o.hopper ? kFp4 + kE4m3 : 0.0;  // read the MXFP4 copy, write E4M3
  const double epi = kBf16 + kBf16 + kMask;
  if (pass == "fprop") {
    return (t * i + out * i) * quartet_forward_bytes(o);
  }
  if (pass == "dgrad") {
    const double dy_copies = mode == bench::Mode::step ? 2 : 1;
    return t * out * (kBf16 + dy_copies * kFp4 + reenc) + out * i * (kFp4 + kFp4 + reenc) + t * i * epi;
  }
  // wgrad: per-gemm re-quantizes dY^T; both modes re-encode it, re-rotate Xq^T and run the epilogue.
  return (mode == bench::Mode::per_gemm ? t * out * (kBf16 + kFp4) : 0.0) + out * t * reenc +
         t * i * (kFp4 + kFp4 + reenc) + out * i * epi;
}

}  // namespace

double tensor_quant_bytes(std::string_view recipe, TensorRole role, int64_t rows, int64_t cols, bool rowwise,
                          bool colwise, const TrafficOptions& o) {
  quant::require_recipe_name(recipe, "quantization traffic");
  const double n = static_cast<double>(rows) * static_cast<double>(cols);
  const double copies = (rowwise ? 1 : 0) + (colwise ? 1 : 0);
  if (copies == 0 || recipe == "bf16") return 0;
  const bool weight = role == TensorRole::weight;
  // Per-tensor FP8: one pass that records the amax (delayed), or an amax pass and then the cast pass
  // (current); on Blackwell one copy serves the transposed uses too.
  const double fp8_copies = o.hopper ? copies : 1;
  if (recipe == "fp8-delayed") return n * kBf16 + fp8_copies * n;
  if (recipe == "fp8-current") return 2 * n * kBf16 + fp8_copies * n;
  if (recipe == "fp8-block") {
    const double scale = weight ? 4.0 / (128 * 128) : 4.0 / 128;   // FP32 per 128x128 or per 1x128 block
    return n * kBf16 + copies * n * (1 + scale);
  }
  if (recipe == "mxfp8") {
    const double copy = n * (1 + 1.0 / 32);
    return n * kBf16 + copies * copy + (o.hopper ? copies * (copy + n * kBf16) : 0.0);  // + decode
  }
  if (recipe == "nvfp4") {
    const double copy = n * (0.5 + (weight ? 1.0 / 256 : 1.0 / 16));  // UE4M3 per 16x16 or per 1x16
    return 2 * n * kBf16 + copies * copy + (o.hopper ? copies * (copy + n * kBf16) : 0.0);  // + decode
  }
  if (recipe == "mxfp4") {
    return n * kBf16 + copies * n * kFp4 + (o.hopper ? copies * n * (kFp4 + kE4m3) : 0.0);  // + re-encode
  }
  throw std::invalid_argument("quantization traffic: recipe '" + std::string(recipe) +
                              "' quantizes whole layers, not single tensors: use pass_quant_bytes");
}

namespace {
void check_recipe_and_pass(std::string_view recipe, std::string_view pass) {
  quant::require_recipe_name(recipe, "quantization traffic");
  if (pass != "fprop" && pass != "dgrad" && pass != "wgrad") {
    throw std::invalid_argument("quantization traffic: pass '" + std::string(pass) +
                                "' is unknown; use fprop, dgrad or wgrad");
  }
}
}  // namespace

double pass_weight_quant_bytes(std::string_view recipe, std::string_view pass, bench::Mode mode,
                               const bench::LinearShape& l, const TrafficOptions& o) {
  check_recipe_and_pass(recipe, pass);
  if (mode != bench::Mode::step || pass != "fprop" || recipe == "bf16") return 0;
  // Quartet's backward re-rotates the saved weight codes with the step's random Hadamard: not cached.
  if (recipe == "quartet") return static_cast<double>(l.o) * static_cast<double>(l.i) * quartet_forward_bytes(o);
  return tensor_quant_bytes(recipe, TensorRole::weight, l.o, l.i, true, true, o);
}

double pass_quant_bytes(std::string_view recipe, std::string_view pass, bench::Mode mode, const bench::LinearShape& l,
                        const TrafficOptions& o) {
  check_recipe_and_pass(recipe, pass);
  if (mode == bench::Mode::pre_quantized || recipe == "bf16") return 0;
  if (recipe == "quartet") return quartet_pass_bytes(pass, mode, l, o);
  auto x = [&](bool r, bool c) { return tensor_quant_bytes(recipe, TensorRole::activation, l.t, l.i, r, c, o); };
  auto w = [&](bool r, bool c) { return tensor_quant_bytes(recipe, TensorRole::weight, l.o, l.i, r, c, o); };
  auto dy = [&](bool r, bool c) { return tensor_quant_bytes(recipe, TensorRole::gradient, l.t, l.o, r, c, o); };
  if (mode == bench::Mode::step) {
    if (pass == "fprop") return x(true, true) + w(true, true);
    if (pass == "dgrad") return dy(true, true);
    return 0;  // wgrad reads the copies fprop and dgrad wrote
  }
  if (pass == "fprop") return x(true, false) + w(true, false);
  if (pass == "dgrad") return dy(true, false) + w(false, true);
  const double dyt = recipe == "fp8-block" && o.te_forward_layouts
                         ? tensor_quant_bytes(recipe, TensorRole::weight, l.t, l.o, false, true, o)
                         : dy(false, true);
  return x(false, true) + dyt;
}

}  // namespace nibble::predict
