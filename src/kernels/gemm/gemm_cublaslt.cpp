// The cuBLASLt backend of nibble::cuda::gemm: handle, workspace and per-shape plans (descriptors,
// layouts, chosen algorithm), an optional autotune over the top heuristics, and the call itself.
//
// Row-major C[M, N] = A[M, K] * B[N, K]^T is, read column-major, C^T[N, M] = B * A^T. So cuBLASLt's
// "A" is our B (K x N column-major, transposed) and its "B" is our A (K x M, not transposed): the TN
// layout FP8 needs. Each operand keeps its own scale buffer and layout (scale_layout.hpp describes
// them per operand, so the swap does not touch them).
#include <cublasLt.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "nibble/kernels/check.hpp"
#include "nibble/kernels/gemm.hpp"

namespace nibble::cuda {
namespace {

cudaDataType_t cuda_type(DType d) {
  switch (d) {
    case DType::bf16: return CUDA_R_16BF;
    case DType::e4m3: return CUDA_R_8F_E4M3;
    case DType::e5m2: return CUDA_R_8F_E5M2;
  }
  return CUDA_R_16BF;
}

cublasLtMatmulMatrixScale_t cublas_scale_mode(ScaleMode m) {
  switch (m) {
    case ScaleMode::none:
    case ScaleMode::per_tensor: return CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
    case ScaleMode::outer_vec: return CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    case ScaleMode::vec128: return CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    case ScaleMode::blk128x128: return CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
    case ScaleMode::vec32_ue8m0: return CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0;
    case ScaleMode::vec16_ue4m3: return CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3;
  }
  return CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
}

// cuBLASLt picks kernels by the alignment it is promised; promise what the pointers really have.
uint32_t alignment_class(const void* p) { return reinterpret_cast<uintptr_t>(p) % 256 == 0 ? 256 : 16; }

struct PlanKey {
  int64_t m, n, k;
  DType a_dtype, b_dtype;
  ScaleMode a_mode, b_mode;
  OutputDType out;
  Accumulation acc;
  uint32_t align_a, align_b, align_c;
  bool autotune;
  bool operator==(const PlanKey&) const = default;
};
struct PlanKeyHash {
  size_t operator()(const PlanKey& p) const {
    size_t h = std::hash<int64_t>()(p.m);
    auto mix = [&h](uint64_t v) { h ^= std::hash<uint64_t>()(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
    mix(p.n); mix(p.k);
    mix((uint64_t(p.a_dtype) << 0) | (uint64_t(p.b_dtype) << 8) | (uint64_t(p.a_mode) << 16) |
        (uint64_t(p.b_mode) << 24) | (uint64_t(p.out) << 32) | (uint64_t(p.acc) << 40) | (uint64_t(p.autotune) << 48));
    mix((uint64_t(p.align_a) << 0) | (uint64_t(p.align_b) << 16) | (uint64_t(p.align_c) << 32));
    return h;
  }
};

struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t layout_a = nullptr, layout_b = nullptr, layout_c = nullptr;  // cuBLASLt's A, B, C=D
  cublasLtMatmulAlgo_t algo{};
  int algo_index = 0;
  size_t workspace = 0;
  bool autotuned = false;
  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (layout_c) cublasLtMatrixLayoutDestroy(layout_c);
    if (layout_b) cublasLtMatrixLayoutDestroy(layout_b);
    if (layout_a) cublasLtMatrixLayoutDestroy(layout_a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

std::string describe(const GemmOperand& a, const GemmOperand& b, const GemmOutput& c, Accumulation acc) {
  std::string s = std::string(to_string(a.dtype)) + " x " + std::string(to_string(b.dtype));
  if (a.dtype != DType::bf16) {
    s += " (" + std::string(to_string(a.scale_mode)) + " x " + std::string(to_string(b.scale_mode)) + ", " +
         std::string(to_string(acc)) + " accumulation)";
  }
  s += c.dtype == OutputDType::bf16 ? " -> bf16" : " -> f32";
  s += ", M=" + std::to_string(a.rows) + " N=" + std::to_string(b.rows) + " K=" + std::to_string(a.k);
  return s;
}

// cudaMalloc that says how much it wanted when the GPU is full.
void* device_alloc(size_t bytes, const char* what) {
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // clear the sticky-free error so later calls work
    size_t free_b = 0, total_b = 0;
    (void)cudaMemGetInfo(&free_b, &total_b);
    throw std::runtime_error("gemm: out of GPU memory allocating " + std::string(what) + ": " +
                             std::to_string(bytes) + " bytes requested, " + std::to_string(free_b) + " free of " +
                             std::to_string(total_b));
  }
  NIBBLE_CUDA_CHECK(e);
  return p;
}

template <typename T>
void set_attr(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T& v) {
  NIBBLE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof(v)));
}

}  // namespace

DeviceCaps query_device_caps(int device) {
  DeviceCaps caps;
  NIBBLE_CUDA_CHECK(cudaDeviceGetAttribute(&caps.sm_major, cudaDevAttrComputeCapabilityMajor, device));
  NIBBLE_CUDA_CHECK(cudaDeviceGetAttribute(&caps.sm_minor, cudaDevAttrComputeCapabilityMinor, device));
  caps.cublaslt_version = cublasLtGetVersion();
  return caps;
}

struct GemmContext::State {
  int device = 0;
  DeviceCaps caps;
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  std::unordered_map<PlanKey, std::unique_ptr<Plan>, PlanKeyHash> plans;
  mutable std::mutex mutex;
};

GemmContext::GemmContext(int device, size_t workspace_bytes) : state_(std::make_unique<State>()) {
  state_->device = device;
  NIBBLE_CUDA_CHECK(cudaSetDevice(device));
  state_->caps = query_device_caps(device);
  // Workspace first: if it does not fit, nothing else has been created that would leak.
  state_->workspace_bytes = workspace_bytes;
  if (workspace_bytes > 0) state_->workspace = device_alloc(workspace_bytes, "the cuBLASLt workspace");
  const cublasStatus_t st = cublasLtCreate(&state_->handle);
  if (st != CUBLAS_STATUS_SUCCESS) {
    if (state_->workspace) cudaFree(state_->workspace);
    NIBBLE_CUBLAS_CHECK(st);
  }
}

GemmContext::~GemmContext() {
  state_->plans.clear();
  if (state_->workspace) cudaFree(state_->workspace);
  if (state_->handle) cublasLtDestroy(state_->handle);
}

const DeviceCaps& GemmContext::caps() const { return state_->caps; }
size_t GemmContext::cached_plans() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->plans.size();
}

namespace {

std::unique_ptr<Plan> make_plan(cublasLtHandle_t handle, const PlanKey& key, const DeviceCaps& caps,
                                size_t workspace_bytes, int candidates, std::vector<cublasLtMatmulHeuristicResult_t>& found,
                                const std::string& what, const void* a_scale, const void* b_scale) {
  auto plan = std::make_unique<Plan>();
  const bool fp8 = key.a_dtype != DType::bf16;
  NIBBLE_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  set_attr(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
  set_attr(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  if (fp8) {
    const int8_t fast = key.acc == Accumulation::fast ? 1 : 0;
    set_attr(plan->desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, fast);
    // cuBLASLt's A is our B and vice versa.
    set_attr(plan->desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, cublas_scale_mode(key.b_mode));
    set_attr(plan->desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, cublas_scale_mode(key.a_mode));
    // The scale pointers must be set before the heuristic query: with vector and block scale modes
    // cuBLASLt rejects a descriptor whose scale pointers are null (CUBLAS_STATUS_INVALID_VALUE).
    set_attr(plan->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, b_scale);
    set_attr(plan->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, a_scale);
  }
  const cudaDataType_t out_type = key.out == OutputDType::bf16 ? CUDA_R_16BF : CUDA_R_32F;
  NIBBLE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->layout_a, cuda_type(key.b_dtype), key.k, key.n, key.k));
  NIBBLE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->layout_b, cuda_type(key.a_dtype), key.k, key.m, key.k));
  NIBBLE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->layout_c, out_type, key.n, key.m, key.n));

  cublasLtMatmulPreference_t pref = nullptr;
  NIBBLE_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  struct PrefGuard {
    cublasLtMatmulPreference_t p;
    ~PrefGuard() { cublasLtMatmulPreferenceDestroy(p); }
  } guard{pref};
  const uint64_t ws = workspace_bytes;
  NIBBLE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  const uint32_t al_a = key.align_b, al_b = key.align_a, al_c = key.align_c;  // swapped like the operands
  NIBBLE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof(al_a)));
  NIBBLE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof(al_b)));
  NIBBLE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof(al_c)));
  NIBBLE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof(al_c)));

  found.resize(static_cast<size_t>(candidates));
  int returned = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle, plan->desc, plan->layout_a, plan->layout_b,
                                                           plan->layout_c, plan->layout_c, pref, candidates,
                                                           found.data(), &returned);
  if (st != CUBLAS_STATUS_SUCCESS || returned == 0) {
    throw std::runtime_error("gemm: cuBLASLt (version " + std::to_string(caps.cublaslt_version) + ") has no " +
                             "algorithm for " + what + " on sm_" + std::to_string(caps.sm()) + " (status " +
                             cublasLtGetStatusName(st) + "); this combination is not supported natively: use " +
                             "per-tensor FP8 or the BF16 path");
  }
  found.resize(static_cast<size_t>(returned));
  plan->algo = found[0].algo;
  plan->workspace = found[0].workspaceSize;
  return plan;
}

void launch(cublasLtHandle_t handle, const Plan& plan, const cublasLtMatmulAlgo_t& algo, const GemmOperand& a,
            const GemmOperand& b, const GemmOutput& c, float alpha, void* workspace, size_t workspace_bytes,
            cudaStream_t stream, cublasStatus_t* status_out) {
  const float beta = 0.0f;
  const cublasStatus_t st = cublasLtMatmul(handle, plan.desc, &alpha, b.data, plan.layout_a, a.data, plan.layout_b,
                                           &beta, c.data, plan.layout_c, c.data, plan.layout_c, &algo, workspace,
                                           workspace_bytes, stream);
  if (status_out) {
    *status_out = st;
    return;
  }
  NIBBLE_CUBLAS_CHECK(st);
}

// Time each candidate (1 warm-up, 3 timed runs, best of the three) and keep the fastest.
void autotune_plan(cublasLtHandle_t handle, Plan& plan, const std::vector<cublasLtMatmulHeuristicResult_t>& found,
                   const GemmOperand& a, const GemmOperand& b, const GemmOutput& c, float alpha, void* workspace,
                   size_t workspace_bytes, cudaStream_t stream) {
  cudaEvent_t start, stop;
  NIBBLE_CUDA_CHECK(cudaEventCreate(&start));
  NIBBLE_CUDA_CHECK(cudaEventCreate(&stop));
  float best = -1.0f;
  for (size_t i = 0; i < found.size(); ++i) {
    if (found[i].state != CUBLAS_STATUS_SUCCESS || found[i].workspaceSize > workspace_bytes) continue;
    cublasStatus_t st;
    launch(handle, plan, found[i].algo, a, b, c, alpha, workspace, workspace_bytes, stream, &st);
    if (st != CUBLAS_STATUS_SUCCESS) continue;  // a candidate that refuses the call is simply skipped
    float fastest = -1.0f;
    for (int rep = 0; rep < 3; ++rep) {
      NIBBLE_CUDA_CHECK(cudaEventRecord(start, stream));
      launch(handle, plan, found[i].algo, a, b, c, alpha, workspace, workspace_bytes, stream, nullptr);
      NIBBLE_CUDA_CHECK(cudaEventRecord(stop, stream));
      NIBBLE_CUDA_CHECK(cudaEventSynchronize(stop));
      float ms = 0.0f;
      NIBBLE_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      fastest = fastest < 0.0f ? ms : std::min(fastest, ms);
    }
    if (best < 0.0f || fastest < best) {
      best = fastest;
      plan.algo = found[i].algo;
      plan.algo_index = static_cast<int>(i);
      plan.workspace = found[i].workspaceSize;
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  plan.autotuned = best >= 0.0f;
}

}  // namespace

ExecutionPath GemmContext::run(const GemmOperand& a, const GemmOperand& b, const GemmOutput& c,
                               const GemmOptions& options, GemmReport* report) {
  State& s = *state_;
  validate_gemm(a, b, c, options, s.caps);
  const Accumulation acc = resolve_accumulation(a, b, options);
  const ExecutionPath path = resolve_execution_path(a, b, options);
  int current = -1;
  NIBBLE_CUDA_CHECK(cudaGetDevice(&current));
  if (current != s.device) {
    throw std::invalid_argument("gemm: the GemmContext belongs to device " + std::to_string(s.device) +
                                " but the current device is " + std::to_string(current) +
                                ": call cudaSetDevice or use that device's context");
  }

  std::lock_guard<std::mutex> lock(s.mutex);
  const PlanKey key{a.rows, b.rows, a.k, a.dtype, b.dtype, a.scale_mode, b.scale_mode, c.dtype, acc,
                    alignment_class(a.data), alignment_class(b.data), alignment_class(c.data), options.autotune};
  const std::string what = describe(a, b, c, acc);
  auto it = s.plans.find(key);
  if (it == s.plans.end()) {
    std::vector<cublasLtMatmulHeuristicResult_t> found;
    auto plan = make_plan(s.handle, key, s.caps, s.workspace_bytes, options.autotune ? options.autotune_candidates : 1,
                          found, what, a.scale, b.scale);
    if (options.autotune && found.size() > 1) {
      autotune_plan(s.handle, *plan, found, a, b, c, options.alpha, s.workspace, s.workspace_bytes, options.stream);
    }
    it = s.plans.emplace(key, std::move(plan)).first;
  }
  Plan& plan = *it->second;
  if (a.dtype != DType::bf16) {
    set_attr(plan.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, b.scale);
    set_attr(plan.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, a.scale);
  }
  cublasStatus_t st;
  launch(s.handle, plan, plan.algo, a, b, c, options.alpha, s.workspace, s.workspace_bytes, options.stream, &st);
  if (st == CUBLAS_STATUS_ALLOC_FAILED) {
    throw std::runtime_error("gemm: out of memory inside cuBLASLt for " + what + " (workspace " +
                             std::to_string(plan.workspace) + " bytes requested)");
  }
  if (st != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error("gemm: cublasLtMatmul failed for " + what + ": " + cublasLtGetStatusName(st) + " (" +
                             cublasLtGetStatusString(st) + ")");
  }
  if (report) {
    report->path = path;
    report->accumulation = acc;
    report->autotuned = plan.autotuned;
    report->algorithm_index = plan.algo_index;
    report->workspace_bytes = plan.workspace;
    report->description = what;
  }
  return path;
}

GemmContext& default_gemm_context() {
  static std::mutex mutex;
  static std::map<int, std::unique_ptr<GemmContext>> contexts;
  int device = 0;
  NIBBLE_CUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(mutex);
  auto& ctx = contexts[device];
  if (!ctx) ctx = std::make_unique<GemmContext>(device);
  return *ctx;
}

ExecutionPath gemm(const GemmOperand& a, const GemmOperand& b, const GemmOutput& c, const GemmOptions& options,
                   GemmReport* report) {
  return default_gemm_context().run(a, b, c, options, report);
}

}  // namespace nibble::cuda
