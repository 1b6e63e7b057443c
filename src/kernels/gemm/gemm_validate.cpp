// Host-only checks of a GEMM request: everything cuBLASLt would reject (with its reason spelled out)
// and every recipe this GPU cannot run natively (with the path that runs instead). No CUDA calls, so
// the CPU tests exercise all of it.
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "nibble/kernels/gemm.hpp"
#include "nibble/quant/layer_shape_rule.hpp"

namespace nibble::cuda {
namespace {

[[noreturn]] void fail(const std::string& msg) { throw std::invalid_argument("gemm: " + msg); }

bool is_fp8(DType d) { return d == DType::e4m3 || d == DType::e5m2; }
bool is_block_mode(ScaleMode m) { return m == ScaleMode::vec128 || m == ScaleMode::blk128x128; }
bool is_blackwell_mode(ScaleMode m) { return m == ScaleMode::vec32_ue8m0 || m == ScaleMode::vec16_ue4m3; }
uintptr_t misalignment(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes; }

std::string sm_name(const DeviceCaps& caps) { return "sm_" + std::to_string(caps.sm()); }

void check_scale_mode_on_device(const std::string& name, ScaleMode mode, const DeviceCaps& caps) {
  const std::string mode_name(to_string(mode));
  if (is_blackwell_mode(mode)) {
    if (caps.sm_major < 10) {
      fail(name + ".scale_mode " + mode_name + " needs sm_100 (Blackwell) for a native GEMM; this GPU is " +
           sm_name(caps) + ": decode the operands to BF16 and run the exact BF16 emulation (path " +
           "emulated-exact (bf16))");
    }
    if (mode == ScaleMode::vec16_ue4m3) {
      fail(name + ".scale_mode " + mode_name + " needs FP4 E2M1 operands, which this GEMM does not take " +
           "yet: decode NVFP4 to BF16 and run the exact BF16 emulation (path emulated-exact (bf16))");
    }
  }
  if (mode != ScaleMode::per_tensor && caps.cublaslt_version < kCublasLtScaleModesVersion) {
    fail(name + ".scale_mode " + mode_name + " needs cuBLASLt >= 12.9 at run time (found version " +
         std::to_string(caps.cublaslt_version) + "): upgrade the CUDA runtime libraries or use per-tensor " +
         "FP8 / the BF16 path");
  }
  if ((mode == ScaleMode::outer_vec || is_block_mode(mode)) && caps.sm_major < 9) {
    fail(name + ".scale_mode " + mode_name + " needs sm_90 (Hopper) in cuBLASLt; this GPU is " + sm_name(caps) +
         ": use per-tensor FP8 or the BF16 path");
  }
  if (is_block_mode(mode) && caps.sm_major != 9) {
    fail(name + ".scale_mode " + mode_name + " (DeepSeek-style block scaling) runs natively only on sm_90 in " +
         "cuBLASLt; this GPU is " + sm_name(caps) + ": convert the scales to MXFP8 (vec32_ue8m0) or decode to " +
         "BF16 (path emulated-exact (bf16))");
  }
}

void check_operand(const std::string& name, const GemmOperand& op, const DeviceCaps& caps) {
  if (op.data == nullptr) fail(name + ".data is null: pass the device pointer of the operand");
  if (op.rows <= 0 || op.k <= 0) {
    fail(name + " has shape [" + std::to_string(op.rows) + ", " + std::to_string(op.k) +
         "]: rows and k must both be positive");
  }
  if (const auto off = misalignment(op.data, 16); off != 0) {
    fail(name + ".data is not 16-byte aligned (address % 16 = " + std::to_string(off) +
         "): cuBLASLt tensor-core GEMMs need 16-byte aligned operands; allocate with cudaMalloc or offset " +
         "by multiples of 16 bytes");
  }
  if (op.dtype == DType::bf16) {
    if (op.scale_mode != ScaleMode::none) {
      fail(name + " is bf16 but scale_mode is " + std::string(to_string(op.scale_mode)) +
           ": BF16 operands carry no scale; set scale_mode = none (decode scaled formats before the GEMM)");
    }
    if (const std::string e = quant::bf16_gemm_k_error(op.k); !e.empty()) fail(name + ": " + e);
    return;
  }
  // FP8 operand.
  if (caps.sm() < 89) {
    fail(name + " is " + std::string(to_string(op.dtype)) + ": FP8 GEMMs need sm_89 or newer; this GPU is " +
         sm_name(caps) + ": use the bf16 recipe");
  }
  if (op.scale_mode == ScaleMode::none) {
    fail(name + " is " + std::string(to_string(op.dtype)) + " but scale_mode is none: FP8 operands need a " +
         "scale (per_tensor with scale 1.0 if the data is unscaled)");
  }
  if (op.scale == nullptr) fail(name + ".scale is null: FP8 operands need a device pointer to their scales");
  // Seen on the H200 (cuBLASLt 13.1): a per-tensor scale at an 8-byte offset makes cublasLtMatmul
  // return NOT_SUPPORTED, so every scale pointer must be 16-byte aligned.
  const uintptr_t scale_align = 16;
  if (const auto off = misalignment(op.scale, scale_align); off != 0) {
    fail(name + ".scale is not " + std::to_string(scale_align) + "-byte aligned (address % " +
         std::to_string(scale_align) + " = " + std::to_string(off) + ")");
  }
  if (op.k % 16 != 0) {
    fail(name + ": K = " + std::to_string(op.k) + " is not a multiple of 16: cuBLASLt FP8 GEMMs need 16-byte " +
         "aligned rows (K % 16 == 0); pad K with zeros");
  }
  if (is_block_mode(op.scale_mode) && op.k % scale_layout::kBlock != 0) {
    fail(name + ": K = " + std::to_string(op.k) + " is not a multiple of 128: block-scaled modes (" +
         std::string(to_string(op.scale_mode)) + ") need whole 128-element blocks along K; pad K or use " +
         "per-tensor / outer_vec scaling");
  }
  check_scale_mode_on_device(name, op.scale_mode, caps);
}

void check_scale_pair(const GemmOperand& a, const GemmOperand& b) {
  const ScaleMode ma = a.scale_mode, mb = b.scale_mode;
  const std::string pair = std::string(to_string(ma)) + " x " + std::string(to_string(mb));
  if (is_block_mode(ma) || is_block_mode(mb)) {
    if (!(is_block_mode(ma) && is_block_mode(mb))) {
      fail("scale modes " + pair + ": a block-scaled operand needs a block-scaled partner (vec128 or blk128x128)");
    }
    if (ma == ScaleMode::blk128x128 && mb == ScaleMode::blk128x128) {
      fail("scale modes blk128x128 x blk128x128: cuBLASLt on Hopper supports 1x128 x 1x128 and 1x128 x 128x128 " +
           std::string("only; quantize one operand (the activation or gradient) with 1x128 blocks (vec128)"));
    }
    return;
  }
  if (ma != mb) {
    fail("scale modes " + pair + ": both operands must use the same scale mode (per_tensor, outer_vec) " +
         "in cuBLASLt");
  }
}

}  // namespace

Accumulation resolve_accumulation(const GemmOperand& a, const GemmOperand& b, const GemmOptions& options) {
  if (!is_fp8(a.dtype)) return Accumulation::split;  // BF16 has no fast-accumulation mode: always FP32
  const bool block = is_block_mode(a.scale_mode) || is_block_mode(b.scale_mode);
  if (block) {
    if (options.accumulation == Accumulation::fast) {
      fail("accumulation = fast is not available with block-scaled FP8 (" + std::string(to_string(a.scale_mode)) +
           " x " + std::string(to_string(b.scale_mode)) + "): cuBLASLt promotes every block to FP32; use split " +
           "or default_for_pass");
    }
    return Accumulation::split;
  }
  if (options.accumulation != Accumulation::default_for_pass) return options.accumulation;
  return options.pass == Pass::fprop ? Accumulation::fast : Accumulation::split;
}

ExecutionPath resolve_execution_path(const GemmOperand& a, const GemmOperand& b, const GemmOptions& options) {
  switch (options.operands) {
    case ExecutionPath::native:
    case ExecutionPath::emulated_approximate: return options.operands;
    case ExecutionPath::emulated_exact_bf16:
      if (a.dtype != DType::bf16 || b.dtype != DType::bf16) {
        fail("operands = emulated-exact (bf16) means both operands were decoded to BF16, but A is " +
             std::string(to_string(a.dtype)) + " and B is " + std::string(to_string(b.dtype)));
      }
      return options.operands;
    case ExecutionPath::emulated_exact_fp8:
      if (a.dtype != DType::e4m3 || b.dtype != DType::e4m3) {
        fail("operands = emulated-exact (fp8) means MXFP4 re-encoded exactly into E4M3, but A is " +
             std::string(to_string(a.dtype)) + " and B is " + std::string(to_string(b.dtype)));
      }
      // The products are exact, but fast accumulation keeps fewer bits than FP32 inside the tensor
      // core, so the sum is no longer "the MXFP4 GEMM up to FP32 accumulation order".
      return resolve_accumulation(a, b, options) == Accumulation::fast ? ExecutionPath::emulated_approximate
                                                                        : ExecutionPath::emulated_exact_fp8;
  }
  return options.operands;
}

void validate_gemm(const GemmOperand& a, const GemmOperand& b, const GemmOutput& c, const GemmOptions& options,
                   const DeviceCaps& caps) {
  check_operand("A", a, caps);
  check_operand("B", b, caps);
  if (a.k != b.k) {
    fail("A is [" + std::to_string(a.rows) + ", " + std::to_string(a.k) + "] and B is [" + std::to_string(b.rows) +
         ", " + std::to_string(b.k) + "]: both must have the same inner dimension K (C = A * B^T)");
  }
  if (is_fp8(a.dtype) != is_fp8(b.dtype)) {
    fail("A is " + std::string(to_string(a.dtype)) + " and B is " + std::string(to_string(b.dtype)) +
         ": mixed BF16 x FP8 GEMMs are not supported; quantize both operands or decode both to BF16");
  }
  if (a.dtype == DType::e5m2 && b.dtype == DType::e5m2) {
    fail("A and B are both e5m2: cuBLASLt has no E5M2 x E5M2 GEMM; keep one operand E4M3 (hybrid recipes "
         "quantize only the gradient to E5M2)");
  }
  if (is_fp8(a.dtype)) check_scale_pair(a, b);
  if (c.data == nullptr) fail("C.data is null: pass the device pointer of the [M, N] output");
  if (const auto off = misalignment(c.data, 16); off != 0) {
    fail("C.data is not 16-byte aligned (address % 16 = " + std::to_string(off) + ")");
  }
  const int64_t n_align = c.dtype == OutputDType::bf16 ? 8 : 4;
  if (b.rows % n_align != 0) {
    fail("N = B.rows = " + std::to_string(b.rows) + " is not a multiple of " + std::to_string(n_align) +
         ": output rows must be 16-byte aligned (" + (c.dtype == OutputDType::bf16 ? "bf16" : "f32") +
         "); pad N");
  }
  if (!std::isfinite(options.alpha)) fail("alpha = " + std::to_string(options.alpha) + " is not finite");
  if (options.autotune && (options.autotune_candidates < 1 || options.autotune_candidates > 64)) {
    fail("autotune_candidates = " + std::to_string(options.autotune_candidates) + " must be in [1, 64]");
  }
  (void)resolve_accumulation(a, b, options);
  (void)resolve_execution_path(a, b, options);
}

}  // namespace nibble::cuda
