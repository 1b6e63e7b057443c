// GEMM-only (pre-quantized) benchmark of the 12 CodonFM-5B linear-layer GEMMs per recipe, through
// nibble::cuda::gemm, with cuBLAS BF16 measured in the same run as the baseline.
//
//   gpu_gemm_bench [--reps 20] [--warmup 5] [--sets 3] [--autotune] [--json FILE]
//
// Operands are random non-zero codes written on the device outside the timed region; `--sets`
// operand sets are rotated between timed runs so no run finds its operands in L2 (every operand here
// is >= 32 MiB; L2 is 50 MiB). Each run is timed alone with CUDA events; per GEMM the median and
// p10/p90 are reported, per layer the sum of medians and the speedup over BF16.
// mxfp8 and nvfp4 have no Hopper tensor-core path: their exact emulation decodes to BF16 and runs the
// very same BF16 GEMM, so their rows reuse the BF16 timings and say so.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "nibble/kernels/check.hpp"
#include "nibble/kernels/gemm.hpp"
#include "nibble/format.hpp"

namespace nc = nibble::cuda;
namespace nf = nibble::fmt;

namespace {

constexpr int64_t T = 15872, H = 4096, F = 16384;

struct Shape {
  const char* layer;
  nc::Pass pass;
  int64_t m, k, n;  // docs/spec.md §5: fprop M=T,K=I,N=O; dgrad M=T,K=O,N=I; wgrad M=I,K=T,N=O
};
const Shape kShapes[] = {
    {"qkv", nc::Pass::fprop, T, H, 3 * H},      {"qkv", nc::Pass::dgrad, T, 3 * H, H},
    {"qkv", nc::Pass::wgrad, H, T, 3 * H},      {"attn_out", nc::Pass::fprop, T, H, H},
    {"attn_out", nc::Pass::dgrad, T, H, H},     {"attn_out", nc::Pass::wgrad, H, T, H},
    {"mlp_up", nc::Pass::fprop, T, H, F},       {"mlp_up", nc::Pass::dgrad, T, F, H},
    {"mlp_up", nc::Pass::wgrad, H, T, F},       {"mlp_down", nc::Pass::fprop, T, F, H},
    {"mlp_down", nc::Pass::dgrad, T, H, F},     {"mlp_down", nc::Pass::wgrad, F, T, H},
};

struct OperandSpec {
  nc::DType dtype;
  nc::ScaleMode mode;
};
struct Recipe {
  std::string name;
  std::string note;
  OperandSpec a[3], b[3];  // per pass: fprop, dgrad, wgrad
  nc::Accumulation acc;
  nc::ExecutionPath operands;
  bool reuse_bf16 = false;
};

std::vector<Recipe> recipes() {
  using D = nc::DType;
  using S = nc::ScaleMode;
  const OperandSpec bf{D::bf16, S::none}, e4{D::e4m3, S::per_tensor}, e5{D::e5m2, S::per_tensor};
  const OperandSpec row{D::e4m3, S::outer_vec}, v128{D::e4m3, S::vec128}, blk{D::e4m3, S::blk128x128};
  const auto A = nc::Accumulation::default_for_pass;
  std::vector<Recipe> r;
  r.push_back({"bf16", "cuBLASLt BF16", {bf, bf, bf}, {bf, bf, bf}, A, nc::ExecutionPath::native});
  // Hybrid: dY in E5M2 (dgrad A = dY, wgrad B = dY^T).
  r.push_back({"fp8-tensor split", "per-tensor hybrid, split accumulation", {e4, e5, e4}, {e4, e4, e5},
               nc::Accumulation::split, nc::ExecutionPath::native});
  r.push_back({"fp8-tensor fast", "per-tensor hybrid, fast accumulation", {e4, e5, e4}, {e4, e4, e5},
               nc::Accumulation::fast, nc::ExecutionPath::native});
  r.push_back({"fp8-tensor TE default", "fast fprop, split dgrad/wgrad", {e4, e5, e4}, {e4, e4, e5}, A,
               nc::ExecutionPath::native});
  r.push_back({"fp8-block", "1x128 x 128x128 fprop/dgrad, 1x128 x 1x128 wgrad", {v128, v128, v128},
               {blk, blk, v128}, A, nc::ExecutionPath::native});
  r.push_back({"mxfp4 rowwise split", "MXFP4 re-encoded to E4M3, OUTER_VEC_32F", {row, row, row}, {row, row, row},
               nc::Accumulation::split, nc::ExecutionPath::emulated_exact_fp8});
  r.push_back({"mxfp4 rowwise fast", "as above, fast accumulation (labelled approximate)", {row, row, row},
               {row, row, row}, nc::Accumulation::fast, nc::ExecutionPath::emulated_exact_fp8});
  r.push_back({"mxfp4 vec128", "MXFP4 re-encoded per 1x128, VEC128 x VEC128", {v128, v128, v128},
               {v128, v128, v128}, A, nc::ExecutionPath::emulated_exact_fp8});
  Recipe mx8{"mxfp8 emulated", "decoded to BF16: the BF16 GEMM by construction", {bf, bf, bf}, {bf, bf, bf}, A,
             nc::ExecutionPath::emulated_exact_bf16, true};
  r.push_back(mx8);
  mx8.name = "nvfp4 emulated";
  r.push_back(mx8);
  return r;
}

// Random non-zero codes of `dtype`: a uniform value in +-[0.25, 2) from a hash, encoded with the
// project's codecs (no NaN, no zero), and scales near 1 that are powers of two.
__global__ void fill_codes(uint8_t* p, int64_t n, nc::DType dtype, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const uint32_t r = nf::random_bits(seed, 0, static_cast<uint64_t>(i));
    const float mag = 0.25f + 1.75f * static_cast<float>(r >> 8) * 0x1p-24f;
    const float v = (r & 1) ? -mag : mag;
    if (dtype == nc::DType::bf16) {
      reinterpret_cast<uint16_t*>(p)[i] = nf::encode_bf16(v);
    } else {
      p[i] = dtype == nc::DType::e4m3 ? nf::encode_e4m3(v) : nf::encode_e5m2(v);
    }
  }
}
__global__ void fill_scales(float* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    p[i] = nf::pow2f(static_cast<int>(nf::random_bits(seed, 1, static_cast<uint64_t>(i)) % 5) - 2);
  }
}

struct DeviceBytes {
  void* p = nullptr;
  explicit DeviceBytes(size_t bytes) {
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
      (void)cudaGetLastError();
      throw std::runtime_error("gpu_gemm_bench: out of GPU memory allocating " + std::to_string(bytes) + " bytes");
    }
  }
  ~DeviceBytes() { cudaFree(p); }
};

struct OperandSet {
  std::unique_ptr<DeviceBytes> a, b, a_scale, b_scale;
};

struct Stats {
  double median = 0, p10 = 0, p90 = 0;
};
Stats summarize(std::vector<float> ms) {
  std::sort(ms.begin(), ms.end());
  auto at = [&](double q) { return static_cast<double>(ms[static_cast<size_t>(q * (ms.size() - 1) + 0.5)]); };
  return {at(0.5), at(0.1), at(0.9)};
}

int64_t arg_int(int& i, int argc, char** argv) {
  if (i + 1 >= argc) throw std::invalid_argument(std::string(argv[i]) + " needs a value");
  return std::stoll(argv[++i]);
}

}  // namespace

int main(int argc, char** argv) try {
  int reps = 20, warmup = 5, sets = 3;
  bool autotune = false;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reps") reps = static_cast<int>(arg_int(i, argc, argv));
    else if (a == "--warmup") warmup = static_cast<int>(arg_int(i, argc, argv));
    else if (a == "--sets") sets = static_cast<int>(arg_int(i, argc, argv));
    else if (a == "--autotune") autotune = true;
    else if (a == "--json" && i + 1 < argc) json_path = argv[++i];
    else throw std::invalid_argument("unknown argument '" + a + "' (use --reps N --warmup N --sets N --autotune --json FILE)");
  }
  if (reps < 1 || sets < 1 || warmup < 0) throw std::invalid_argument("--reps and --sets must be >= 1, --warmup >= 0");

  int device = 0;
  NIBBLE_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  NIBBLE_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  auto& ctx = nc::default_gemm_context();

  // Largest operand / scale buffer over the 12 shapes, allocated once per set and shared by recipes.
  int64_t max_elems = 0, max_scales = 0;
  for (const auto& s : kShapes) {
    max_elems = std::max({max_elems, s.m * s.k, s.n * s.k, s.m * s.n});
    for (auto mode : {nc::ScaleMode::outer_vec, nc::ScaleMode::vec128, nc::ScaleMode::blk128x128}) {
      max_scales = std::max({max_scales, nc::scale_layout::scale_count(mode, s.m, s.k),
                             nc::scale_layout::scale_count(mode, s.n, s.k)});
    }
  }
  std::vector<OperandSet> opsets(static_cast<size_t>(sets));
  for (auto& o : opsets) {
    o.a = std::make_unique<DeviceBytes>(static_cast<size_t>(max_elems) * 2);
    o.b = std::make_unique<DeviceBytes>(static_cast<size_t>(max_elems) * 2);
    o.a_scale = std::make_unique<DeviceBytes>(static_cast<size_t>(max_scales) * 4);
    o.b_scale = std::make_unique<DeviceBytes>(static_cast<size_t>(max_scales) * 4);
  }
  DeviceBytes c(static_cast<size_t>(max_elems) * 2);
  cudaEvent_t start, stop;
  NIBBLE_CUDA_CHECK(cudaEventCreate(&start));
  NIBBLE_CUDA_CHECK(cudaEventCreate(&stop));

  std::printf("gpu_gemm_bench: %s (sm_%d%d), cuBLASLt %zu, %d reps, %d warm-up, %d operand sets%s\n", prop.name,
              prop.major, prop.minor, ctx.caps().cublaslt_version, reps, warmup, sets, autotune ? ", autotune" : "");
  nlohmann::json out = {{"device", prop.name}, {"sm", prop.major * 10 + prop.minor},
                        {"cublaslt_version", ctx.caps().cublaslt_version}, {"reps", reps}, {"warmup", warmup},
                        {"operand_sets", sets}, {"autotune", autotune}, {"recipes", nlohmann::json::array()}};
  double bf16_layer_ms = 0.0;
  nlohmann::json bf16_gemms;
  bool any_failed = false;
  for (const auto& r : recipes()) {
    nlohmann::json jr = {{"recipe", r.name}, {"note", r.note}, {"gemms", nlohmann::json::array()}};
    double layer_ms = 0.0;
    std::string failure;
    std::printf("\n%-22s %s\n", r.name.c_str(), r.note.c_str());
    if (r.reuse_bf16) {
      jr["gemms"] = bf16_gemms;
      jr["timing_source"] = "bf16 run (identical BF16 GEMM on decoded operands)";
      jr["path"] = std::string(nc::to_string(r.operands));
      layer_ms = bf16_layer_ms;
      std::printf("  = the BF16 GEMM on decoded operands (same kernel, same time): %.2f ms per layer, path %s\n",
                  layer_ms, std::string(nc::to_string(r.operands)).c_str());
    }
    for (size_t si = 0; si < std::size(kShapes) && !r.reuse_bf16 && failure.empty(); ++si) {
      const Shape& s = kShapes[si];
      const int p = static_cast<int>(s.pass);
      nc::GemmOptions opt;
      opt.pass = s.pass;
      opt.accumulation = r.acc;
      opt.operands = r.operands;
      opt.autotune = autotune;
      for (size_t k = 0; k < opsets.size(); ++k) {  // fresh codes in the dtypes this GEMM reads
        fill_codes<<<1024, 256>>>(static_cast<uint8_t*>(opsets[k].a->p), s.m * s.k, r.a[p].dtype, 17 + uint32_t(k));
        NIBBLE_CHECK_LAUNCH();
        fill_codes<<<1024, 256>>>(static_cast<uint8_t*>(opsets[k].b->p), s.n * s.k, r.b[p].dtype, 91 + uint32_t(k));
        NIBBLE_CHECK_LAUNCH();
        fill_scales<<<256, 256>>>(static_cast<float*>(opsets[k].a_scale->p), max_scales, 5 + uint32_t(k));
        NIBBLE_CHECK_LAUNCH();
        fill_scales<<<256, 256>>>(static_cast<float*>(opsets[k].b_scale->p), max_scales, 7 + uint32_t(k));
        NIBBLE_CHECK_LAUNCH();
      }
      NIBBLE_CUDA_CHECK(cudaDeviceSynchronize());
      auto operand = [&](const OperandSet& o, bool is_a) {
        const OperandSpec& spec = is_a ? r.a[p] : r.b[p];
        return nc::GemmOperand{(is_a ? o.a : o.b)->p, spec.dtype, is_a ? s.m : s.n, s.k, spec.mode,
                               spec.dtype == nc::DType::bf16 ? nullptr : (is_a ? o.a_scale : o.b_scale)->p};
      };
      const nc::GemmOutput cout{c.p, nc::OutputDType::bf16};
      std::vector<float> ms;
      nc::GemmReport rep;
      try {
        for (int w = 0; w < warmup + reps; ++w) {
          const OperandSet& o = opsets[static_cast<size_t>(w) % opsets.size()];
          NIBBLE_CUDA_CHECK(cudaEventRecord(start));
          nc::gemm(operand(o, true), operand(o, false), cout, opt, &rep);
          NIBBLE_CUDA_CHECK(cudaEventRecord(stop));
          NIBBLE_CUDA_CHECK(cudaEventSynchronize(stop));
          float t = 0.0f;
          NIBBLE_CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
          if (w >= warmup) ms.push_back(t);
        }
      } catch (const std::exception& e) {
        failure = std::string(s.layer) + " " + std::string(nc::to_string(s.pass)) + ": " + e.what();
        break;
      }
      const Stats st = summarize(ms);
      const double tflops = 2.0 * double(s.m) * double(s.n) * double(s.k) / (st.median * 1e-3) / 1e12;
      layer_ms += st.median;
      std::printf("  %-9s %-6s %6ldx%6ldx%6ld  %8.3f ms (p10 %.3f p90 %.3f)  %7.1f TFLOP/s  %s, %s acc\n", s.layer,
                  std::string(nc::to_string(s.pass)).c_str(), long(s.m), long(s.k), long(s.n), st.median, st.p10,
                  st.p90, tflops, std::string(nc::to_string(rep.path)).c_str(),
                  std::string(nc::to_string(rep.accumulation)).c_str());
      jr["gemms"].push_back({{"layer", s.layer}, {"pass", std::string(nc::to_string(s.pass))}, {"m", s.m},
                             {"k", s.k}, {"n", s.n}, {"median_ms", st.median}, {"p10_ms", st.p10},
                             {"p90_ms", st.p90}, {"tflops", tflops},
                             {"path", std::string(nc::to_string(rep.path))},
                             {"accumulation", std::string(nc::to_string(rep.accumulation))},
                             {"algorithm_index", rep.algorithm_index}, {"autotuned", rep.autotuned}});
      jr["path"] = std::string(nc::to_string(rep.path));
    }
    if (!failure.empty()) {
      any_failed = true;
      std::printf("  FAILED: %s\n", failure.c_str());
      jr["error"] = failure;
    } else {
      if (r.name == "bf16") {
        bf16_layer_ms = layer_ms;
        bf16_gemms = jr["gemms"];
      }
      const double speedup = bf16_layer_ms > 0 ? bf16_layer_ms / layer_ms : 0.0;
      jr["layer_ms"] = layer_ms;
      jr["speedup_vs_bf16"] = speedup;
      std::printf("  layer: %.2f ms, %.2fx BF16\n", layer_ms, speedup);
    }
    out["recipes"].push_back(jr);
  }

  std::printf("\n%-22s %10s %9s  %s\n", "recipe", "layer ms", "vs bf16", "path");
  for (const auto& jr : out["recipes"]) {
    if (jr.contains("error")) {
      std::printf("%-22s %10s %9s  %s\n", jr["recipe"].get<std::string>().c_str(), "FAILED", "-", "-");
    } else {
      std::printf("%-22s %10.2f %8.2fx  %s\n", jr["recipe"].get<std::string>().c_str(), jr["layer_ms"].get<double>(),
                  jr["speedup_vs_bf16"].get<double>(), jr.value("path", std::string("-")).c_str());
    }
  }
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    if (!f) throw std::runtime_error("cannot write --json file '" + json_path + "'");
    f << out.dump(2) << "\n";
    std::printf("wrote %s\n", json_path.c_str());
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return any_failed ? 2 : 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "gpu_gemm_bench: error: %s\n", e.what());
  return 1;
}
