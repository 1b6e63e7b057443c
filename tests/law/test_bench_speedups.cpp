// Speedups read from a `nibble bench` JSON: sums per pass, recipe and mode choice, bad files.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "nibble/law/bench_speedups.hpp"

namespace nibble::law {
namespace {

struct FakeBench {
  nlohmann::json j;
  std::map<std::string, double> fprop, backward;  // by recipe|mode
};

// Twelve GEMMs per recipe and mode (4 layers x 3 passes), random times.
FakeBench make_bench(std::initializer_list<const char*> recipes, std::initializer_list<const char*> modes) {
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<double> ms(0.2, 5.0);
  FakeBench b;
  b.j["gpu"] = "NVIDIA H200";
  b.j["predicted"] = false;
  b.j["gemms"] = nlohmann::json::array();
  b.j["summary"] = nlohmann::json::array();
  for (const char* r : recipes)
    for (const char* m : modes) {
      double layer = 0;
      for (const char* layer_name : {"qkv", "attn_out", "mlp_up", "mlp_down"})
        for (const char* pass : {"fprop", "dgrad", "wgrad"}) {
          const double t = ms(rng);
          layer += t;
          b.j["gemms"].push_back({{"layer", layer_name}, {"pass", pass}, {"recipe", r}, {"mode", m}, {"ms", t}});
          (std::string(pass) == "fprop" ? b.fprop : b.backward)[std::string(r) + "|" + m] += t;
        }
      b.j["summary"].push_back({{"recipe", r}, {"mode", m}, {"layer_ms", layer}, {"speedup_vs_bf16", 1.0},
                                {"path", std::string(r) == "quartet" ? "emulated-exact (fp8)" : "native"}});
    }
  return b;
}

std::string error_of(const nlohmann::json& j, const BenchSpeedupOptions& o = {}) {
  try {
    speedups_from_bench_json(j, o, "b.json");
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(BenchSpeedups, RatiosOfPassSumsPreferringStepAndFp8Current) {
  const FakeBench b = make_bench({"bf16", "fp8-delayed", "fp8-current", "quartet"}, {"pre-quantized", "step"});
  const BenchSpeedups s = speedups_from_bench_json(b.j, {}, "b.json");
  EXPECT_EQ(s.fp8_recipe, "fp8-current");
  EXPECT_EQ(s.fp4_recipe, "quartet");
  EXPECT_EQ(s.mode, "step");
  EXPECT_DOUBLE_EQ(s.speedups.fwd, b.fprop.at("fp8-current|step") / b.fprop.at("quartet|step"));
  EXPECT_DOUBLE_EQ(s.speedups.bwd, b.backward.at("fp8-current|step") / b.backward.at("quartet|step"));
  EXPECT_EQ(s.fp4_path, "emulated-exact (fp8)");
  EXPECT_NE(s.speedups.source.find("emulated-exact (fp8)"), std::string::npos) << s.speedups.source;
  EXPECT_NE(s.speedups.source.find("measured"), std::string::npos);
  EXPECT_EQ(s.gpu, "NVIDIA H200");
}

TEST(BenchSpeedups, ExplicitChoicesAndFallbacks) {
  FakeBench b = make_bench({"fp8-delayed", "nvfp4", "quartet"}, {"pre-quantized"});
  BenchSpeedupOptions o;
  o.fp4_recipe = "nvfp4";
  const BenchSpeedups s = speedups_from_bench_json(b.j, o);
  EXPECT_EQ(s.fp8_recipe, "fp8-delayed");  // no fp8-current: the delayed recipe is the baseline
  EXPECT_EQ(s.mode, "pre-quantized");
  EXPECT_DOUBLE_EQ(s.speedups.fwd, b.fprop.at("fp8-delayed|pre-quantized") / b.fprop.at("nvfp4|pre-quantized"));
  b.j["predicted"] = true;
  EXPECT_NE(speedups_from_bench_json(b.j).speedups.source.find("PREDICTED"), std::string::npos);
}

TEST(BenchSpeedups, BadFilesSayWhatIsMissing) {
  EXPECT_NE(error_of(nlohmann::json::object()).find("no 'gemms'"), std::string::npos);
  const FakeBench no_fp4 = make_bench({"bf16", "fp8-current"}, {"step"});
  const std::string e = error_of(no_fp4.j);
  EXPECT_NE(e.find("quartet"), std::string::npos) << e;
  EXPECT_NE(e.find("bf16, fp8-current"), std::string::npos) << e;
  const FakeBench no_fp8 = make_bench({"bf16", "quartet"}, {"step"});
  EXPECT_NE(error_of(no_fp8.j).find("FP8 baseline"), std::string::npos) << error_of(no_fp8.j);
  BenchSpeedupOptions o;
  o.fp8_recipe = "fp8-block";
  EXPECT_NE(error_of(make_bench({"fp8-current", "quartet"}, {"step"}).j, o).find("fp8-block"), std::string::npos);
  o = {};
  o.mode = "per-gemm";
  EXPECT_NE(error_of(make_bench({"fp8-current", "quartet"}, {"step"}).j, o).find("modes present: step"),
            std::string::npos);
  // A GEMM that failed (no time) must not silently shrink the sum.
  FakeBench oom = make_bench({"fp8-current", "quartet"}, {"step"});
  oom.j["gemms"][13]["ms"] = nullptr;
  EXPECT_NE(error_of(oom.j).find("gemms[13]"), std::string::npos) << error_of(oom.j);
  // Different GEMM sets cannot be compared.
  FakeBench partial = make_bench({"fp8-current", "quartet"}, {"step"});
  partial.j["gemms"].erase(partial.j["gemms"].begin() + 14);
  EXPECT_NE(error_of(partial.j).find("same"), std::string::npos) << error_of(partial.j);
  EXPECT_THROW(read_bench_speedups("/nonexistent/bench.json"), std::invalid_argument);
}

}  // namespace
}  // namespace nibble::law
