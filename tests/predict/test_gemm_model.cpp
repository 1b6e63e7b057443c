// Sanity of the GPU database and the GEMM time model.
#include "nibble/quant/recipe_list.hpp"
#include "nibble/predict.hpp"
#include "test_seed.hpp"

#include <gtest/gtest.h>

#include <random>

namespace nibble::predict {
namespace {

const std::vector<GpuSpec>& db() {
  static const auto gpus = load_gpu_database();
  return gpus;
}

double ms(const char* gpu, const char* recipe, Shape s) {
  const GpuSpec& g = find_gpu(db(), gpu);
  const Execution e = execution_for(recipe, g);
  return gemm_ms(s, e, g, efficiency_of(default_calibration(), e.family));
}

TEST(GpuDatabase, HasTheRequiredGpusWithSources) {
  for (const char* name : {"H100 SXM", "H200 SXM", "H200 NVL", "B200", "B300", "RTX 5090"}) {
    const GpuSpec& g = find_gpu(db(), name);
    EXPECT_FALSE(g.source.empty()) << name;
    EXPECT_GT(g.fp8_tflops, g.bf16_tflops) << name;
  }
  EXPECT_EQ(find_gpu(db(), "h200-sxm").name, "H200 SXM");
  EXPECT_EQ(find_gpu(db(), "H200 SXM").bf16_tflops, 989.4);
}

// The names the CUDA runtime reports (as in a measured result's gpu_info.name) find their entries:
// through device_names ("NVIDIA H100 80GB HBM3", measured on our H100), or the name less "NVIDIA " /
// "GeForce " (with " SXM" for the bare H200). The NVL part is not taken for the SXM one.
TEST(GpuDatabase, RuntimeDeviceNamesFindTheirEntries) {
  EXPECT_EQ(find_gpu(db(), "NVIDIA H100 80GB HBM3").name, "H100 SXM");
  EXPECT_EQ(find_gpu(db(), "NVIDIA H200").name, "H200 SXM");
  EXPECT_EQ(find_gpu(db(), "NVIDIA H200 NVL").name, "H200 NVL");
  EXPECT_EQ(find_gpu(db(), "NVIDIA B200").name, "B200");
  EXPECT_EQ(find_gpu(db(), "NVIDIA GeForce RTX 5090").name, "RTX 5090");
  EXPECT_THROW(find_gpu(db(), "NVIDIA H100 PCIe"), std::invalid_argument);  // not in the database
  EXPECT_THROW(find_gpu(db(), "NVIDIA A100-SXM4-80GB"), std::invalid_argument);
}

TEST(GpuDatabase, UnknownGpuListsTheKnownOnes) {
  try {
    find_gpu(db(), "A100");
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    for (const char* name : {"'A100'", "H100 SXM", "B200", "RTX 5090"})
      EXPECT_NE(msg.find(name), std::string::npos) << msg;
  }
}

TEST(Execution, PathsPerArchitecture) {
  const GpuSpec& h = find_gpu(db(), "H200 SXM");
  const GpuSpec& b = find_gpu(db(), "B200");
  EXPECT_EQ(execution_for("fp8-current", h).path, "native");
  EXPECT_EQ(execution_for("mxfp8", h).path, "emulated-exact (bf16)");
  EXPECT_EQ(execution_for("nvfp4", h).path, "emulated-exact (bf16)");
  EXPECT_EQ(execution_for("mxfp4", h).path, "emulated-exact (fp8)");
  EXPECT_EQ(execution_for("quartet", h).path, "emulated-exact (fp8)");
  for (const auto& r : quant::recipe_names()) {
    if (r != "fp8-block") {
      EXPECT_EQ(execution_for(r, b).path, "native") << r;
    }
  }
  EXPECT_EQ(execution_for("quartet", b).peak_tflops, b.fp4_tflops);
  // The 128-block scale modes are sm_90-only in cuBLASLt: on Blackwell fp8-block runs as an MXFP8 GEMM
  // on exactly converted (power-of-two) scales, at MXFP8's efficiency, not as a native fp8-block GEMM.
  EXPECT_EQ(execution_for("fp8-block", h).path, "native");
  EXPECT_EQ(execution_for("fp8-block", h).family, "fp8-block");
  for (const char* gpu : {"B200", "B300", "RTX 5090"}) {
    const Execution e = execution_for("fp8-block", find_gpu(db(), gpu));
    EXPECT_EQ(e.path, "emulated-exact (fp8)") << gpu;
    EXPECT_EQ(e.family, execution_for("mxfp8", find_gpu(db(), gpu)).family) << gpu;
  }
  try {
    execution_for("int8", h);
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("fp8-delayed"), std::string::npos) << e.what();
  }
}

TEST(GemmModel, BiggerIsSlower) {
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  std::uniform_int_distribution<int64_t> dim(64, 16384);
  for (int i = 0; i < 200; ++i) {
    Shape s{dim(rng), dim(rng), dim(rng), 1};
    Shape bigger = s;
    bigger.k *= 2;  // same tiles, twice the work: strictly slower
    for (const char* recipe : {"bf16", "fp8-current", "quartet"})
      EXPECT_GT(ms("H200 SXM", recipe, bigger), ms("H200 SXM", recipe, s)) << s.m << "x" << s.k << "x" << s.n;
    // More output tiles never cost less (within one wave they cost the same).
    Shape wider{s.m * 4, s.k, s.n, 1};
    EXPECT_GE(ms("H100 SXM", "bf16", wider), ms("H100 SXM", "bf16", s));
    Shape all{s.m * 2, s.k * 2, s.n * 2, 1};
    EXPECT_GT(ms("B200", "nvfp4", all), ms("B200", "nvfp4", s));
  }
}

TEST(GemmModel, H200BeatsH100WhenMemoryBound) {
  const Shape skinny{16, 8192, 8192, 1};  // decode-like: 16 tokens, weights dominate the bytes
  EXPECT_LT(ms("H200 SXM", "bf16", skinny), 0.8 * ms("H100 SXM", "bf16", skinny));
  const Shape big{8192, 8192, 8192, 1};  // compute-bound: same tensor cores, about the same time
  EXPECT_NEAR(ms("H200 SXM", "bf16", big) / ms("H100 SXM", "bf16", big), 1.0, 0.02);
}

TEST(GemmModel, Fp8BeatsBf16OnBigGemms) {
  const Shape big{8192, 8192, 8192, 1};
  const double bf16 = ms("H200 SXM", "bf16", big), fp8 = ms("H200 SXM", "fp8-current", big);
  EXPECT_GT(bf16 / fp8, 1.5);
  EXPECT_LT(bf16 / fp8, 2.05);
  // docs/spec.md §8: cuBLAS BF16 8192^3 at 690-830 TFLOP/s, FP8 per-tensor 1270-1295 (10% slack).
  const double flops = 2.0 * 8192 * 8192 * 8192;
  EXPECT_GT(flops / (bf16 * 1e-3) / 1e12, 690 * 0.9);
  EXPECT_LT(flops / (bf16 * 1e-3) / 1e12, 830 * 1.1);
  EXPECT_GT(flops / (fp8 * 1e-3) / 1e12, 1270 * 0.9);
  EXPECT_LT(flops / (fp8 * 1e-3) / 1e12, 1295 * 1.1);
  EXPECT_LT(ms("B200", "quartet", big), ms("B200", "fp8-current", big));
}

}  // namespace
}  // namespace nibble::predict
