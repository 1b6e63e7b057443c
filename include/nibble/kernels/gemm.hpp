// One GEMM entry point for the three passes of a linear layer, through cuBLASLt.
//
//   C[M, N] = alpha * A[M, K] * B[N, K]^T      (both operands row-major and contiguous along K: "TN")
//
// Operands are BF16, or FP8 (E4M3 / E5M2) with one of cuBLASLt's scale modes (see scale_layout.hpp
// for where each scale lives). The output is row-major BF16 (FP32 on request, for tests). Every call
// returns the ExecutionPath that produced the numbers: what the caller did to the operands
// (`options.operands`, e.g. MXFP4 re-encoded exactly into E4M3) combined with what the GEMM ran.
//
// Pass conventions (docs/spec.md §5): fprop M = T, K = I, N = O; dgrad M = T, K = O, N = I;
// wgrad M = I, K = T, N = O. The caller supplies the physically transposed copies the backward
// passes need (e.g. W^T [I, O] for dgrad), because per-tensor FP8 on Hopper accepts only TN.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "nibble/kernels/scale_layout.hpp"

namespace nibble::cuda {

enum class DType : uint8_t { bf16, e4m3, e5m2 };
enum class OutputDType : uint8_t { bf16, f32 };
enum class Pass : uint8_t { fprop, dgrad, wgrad };
// default_for_pass follows Transformer Engine: fast accumulation for fprop, split (FP32 promotion)
// for dgrad and wgrad. Block-scaled modes (VEC128, BLK128x128) always run split.
enum class Accumulation : uint8_t { default_for_pass, fast, split };

// What produced a result. to_string gives exactly "native", "emulated-exact (fp8)",
// "emulated-exact (bf16)", "emulated-approximate".
enum class ExecutionPath : uint8_t { native, emulated_exact_fp8, emulated_exact_bf16, emulated_approximate };

std::string_view to_string(ExecutionPath path);
std::string_view to_string(DType dtype);
std::string_view to_string(ScaleMode mode);  // Blackwell modes say "untested on hardware"
std::string_view to_string(Pass pass);
std::string_view to_string(Accumulation acc);

// One GEMM operand: a row-major [rows, k] device matrix (16-byte aligned) and its scales.
struct GemmOperand {
  const void* data = nullptr;
  DType dtype = DType::bf16;
  int64_t rows = 0;
  int64_t k = 0;
  ScaleMode scale_mode = ScaleMode::none;
  const void* scale = nullptr;  // device pointer: FP32 scales (multiply on decode), layout per mode
};

// Row-major [rows, cols] device output; rows = A.rows (M), cols = B.rows (N).
struct GemmOutput {
  void* data = nullptr;
  OutputDType dtype = OutputDType::bf16;
};

struct GemmOptions {
  Pass pass = Pass::fprop;
  float alpha = 1.0f;  // Quartet's backward 16/9 folds in here
  Accumulation accumulation = Accumulation::default_for_pass;
  // How the caller produced the operands: native (the recipe's own FP8/BF16 data),
  // emulated_exact_fp8 (MXFP4 re-encoded exactly into E4M3), emulated_exact_bf16 (MXFP8/NVFP4 decoded
  // to BF16) or emulated_approximate. Checked against the operand dtypes.
  ExecutionPath operands = ExecutionPath::native;
  // Time the top heuristics (cudaEvents) once per plan and keep the fastest.
  bool autotune = false;
  int autotune_candidates = 8;
  cudaStream_t stream = nullptr;
};

// Details of one call, for benchmarks and reports (optional out-parameter).
struct GemmReport {
  ExecutionPath path = ExecutionPath::native;
  Accumulation accumulation = Accumulation::split;  // what actually ran (never default_for_pass)
  bool autotuned = false;
  int algorithm_index = 0;       // position in the heuristic list of the algorithm used
  size_t workspace_bytes = 0;
  std::string description;       // e.g. "fp8 e4m3 x e4m3, outer_vec x outer_vec, fast accumulation"
};

// What the device and the runtime cuBLASLt can do; queried once per device.
struct DeviceCaps {
  int sm_major = 0;
  int sm_minor = 0;
  size_t cublaslt_version = 0;  // cublasLtGetVersion(): major * 10000 + minor * 100 + patch
  int sm() const { return sm_major * 10 + sm_minor; }
};
DeviceCaps query_device_caps(int device);

// cuBLASLt versions that introduced the scale modes (CUDA 12.9 added OUTER_VEC, VEC128, BLK128x128).
inline constexpr size_t kCublasLtScaleModesVersion = 120900;

// Host-only checks of everything cuBLASLt would reject or we refuse to run; throws
// std::invalid_argument naming the field and the fix. Needs no GPU (tests call it on the CPU).
void validate_gemm(const GemmOperand& a, const GemmOperand& b, const GemmOutput& c, const GemmOptions& options,
                   const DeviceCaps& caps);

// The accumulation a call resolves to (throws if the caller forces fast on a block-scaled mode).
Accumulation resolve_accumulation(const GemmOperand& a, const GemmOperand& b, const GemmOptions& options);

// The label a result gets: what the caller did to the operands, checked against what ran.
ExecutionPath resolve_execution_path(const GemmOperand& a, const GemmOperand& b, const GemmOptions& options);

// Owns a cuBLASLt handle, a workspace and the plans (descriptors, layouts, chosen algorithm) cached
// per (shape, dtypes, scale modes, accumulation, pointer alignment, autotune). One per device; calls
// are serialized by a mutex.
class GemmContext {
 public:
  explicit GemmContext(int device, size_t workspace_bytes = size_t{32} << 20);
  ~GemmContext();
  GemmContext(const GemmContext&) = delete;
  GemmContext& operator=(const GemmContext&) = delete;

  ExecutionPath run(const GemmOperand& a, const GemmOperand& b, const GemmOutput& c, const GemmOptions& options,
                    GemmReport* report = nullptr);
  const DeviceCaps& caps() const;
  size_t cached_plans() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The context of the current device (created on first use).
GemmContext& default_gemm_context();

// C = alpha * A * B^T on the current device's default context. Returns the path that produced C.
ExecutionPath gemm(const GemmOperand& a, const GemmOperand& b, const GemmOutput& c, const GemmOptions& options,
                   GemmReport* report = nullptr);

}  // namespace nibble::cuda
