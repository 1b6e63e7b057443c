// Names of the GEMM enums as users and reports see them. The ExecutionPath strings are part of the
// contract (docs/spec.md §4): a result must never say more than what ran.
#include "nibble/kernels/gemm.hpp"

namespace nibble::cuda {

std::string_view to_string(ExecutionPath path) {
  switch (path) {
    case ExecutionPath::native: return "native";
    case ExecutionPath::emulated_exact_fp8: return "emulated-exact (fp8)";
    case ExecutionPath::emulated_exact_bf16: return "emulated-exact (bf16)";
    case ExecutionPath::emulated_approximate: return "emulated-approximate";
  }
  return "unknown";
}

std::string_view to_string(DType dtype) {
  switch (dtype) {
    case DType::bf16: return "bf16";
    case DType::e4m3: return "e4m3";
    case DType::e5m2: return "e5m2";
  }
  return "unknown";
}

std::string_view to_string(ScaleMode mode) {
  switch (mode) {
    case ScaleMode::none: return "none";
    case ScaleMode::per_tensor: return "per_tensor";
    case ScaleMode::outer_vec: return "outer_vec";
    case ScaleMode::vec128: return "vec128";
    case ScaleMode::blk128x128: return "blk128x128";
    // Compiled for sm_100 builds but never run on Blackwell hardware by this project.
    case ScaleMode::vec32_ue8m0: return "vec32_ue8m0 (untested on hardware)";
    case ScaleMode::vec16_ue4m3: return "vec16_ue4m3 (untested on hardware)";
  }
  return "unknown";
}

std::string_view to_string(Pass pass) {
  switch (pass) {
    case Pass::fprop: return "fprop";
    case Pass::dgrad: return "dgrad";
    case Pass::wgrad: return "wgrad";
  }
  return "unknown";
}

std::string_view to_string(Accumulation acc) {
  switch (acc) {
    case Accumulation::default_for_pass: return "default";
    case Accumulation::fast: return "fast";
    case Accumulation::split: return "split";
  }
  return "unknown";
}

}  // namespace nibble::cuda
