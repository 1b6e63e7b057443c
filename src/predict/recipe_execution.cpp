// Which tensor-core path each recipe takes on a GPU (docs/spec.md §4), and the bytes its
// quantization moves per GEMM.
#include "nibble/predict.hpp"
#include "nibble/predict/quant_traffic.hpp"
#include "nibble/quant/recipe_list.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace nibble::predict {

namespace {

bool is_blackwell(const GpuSpec& gpu) { return gpu.compute_capability >= 100; }

}  // namespace

Execution execution_for(std::string_view recipe, const GpuSpec& gpu) {
  const bool bw = is_blackwell(gpu);
  const std::string native(bench::path::native);
  if (recipe == "bf16") return {"bf16", native, gpu.bf16_tflops, 2};
  if (recipe == "fp8-delayed" || recipe == "fp8-current") return {"fp8-tensor", native, gpu.fp8_tflops, 1};
  if (recipe == "fp8-block")
    // cuBLASLt has the 128-block scale modes (VEC128_32F, BLK128x128_32F) on sm_90 only. On Blackwell
    // Transformer Engine runs this recipe's GEMMs as MXFP8 (its PR #2157): the block scales are powers of
    // two (docs/spec.md §2), so each becomes an exact E8M0 scale repeated over the 1x32 blocks it covers.
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
  quant::require_recipe_name(recipe, "prediction");
  throw std::logic_error(fmt::format("prediction: recipe '{}' has no execution model", recipe));
}

namespace {
// The layer from the GEMM: fprop M x K x N = T x I x O, dgrad T x O x I, wgrad I x T x O.
bench::LinearShape layer_of(const std::string& pass, const Shape& s) {
  return pass == "dgrad" ? bench::LinearShape{s.m, s.n, s.k}
         : pass == "wgrad" ? bench::LinearShape{s.k, s.m, s.n}
                           : bench::LinearShape{s.m, s.k, s.n};
}
TrafficOptions traffic_for(const GpuSpec& gpu) {
  TrafficOptions o;
  o.hopper = !is_blackwell(gpu);
  return o;
}
}  // namespace

double quant_bytes(std::string_view recipe, const std::string& pass, bench::Mode mode, const Shape& s,
                   const GpuSpec& gpu) {
  execution_for(recipe, gpu);  // validates the name
  return pass_quant_bytes(recipe, pass, mode, layer_of(pass, s), traffic_for(gpu));
}

double weight_quant_bytes(std::string_view recipe, const std::string& pass, bench::Mode mode, const Shape& s,
                          const GpuSpec& gpu) {
  execution_for(recipe, gpu);
  return pass_weight_quant_bytes(recipe, pass, mode, layer_of(pass, s), traffic_for(gpu));
}

}  // namespace nibble::predict
