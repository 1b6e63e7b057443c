// Speedups read from a `nibble bench` JSON: sums per pass, recipe and mode choice, bad files.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "nibble/law/bench_speedups.hpp"
#include "test_seed.hpp"

namespace nibble::law {
namespace {

struct FakeBench {
  nlohmann::json j;
  std::map<std::string, double> fprop, backward;  // by recipe|mode
};

// Twelve GEMMs per recipe and mode (4 layers x 3 passes) in the layout `nibble bench --json` writes
// (docs/bench-output.md), random times; mlp_up/mlp_down run as 8 grouped expert GEMMs (count 8), and
// a once-per-model LM head row with a huge time must not enter the sums.
FakeBench make_bench(std::initializer_list<const char*> recipes, std::initializer_list<const char*> modes) {
  std::mt19937_64 rng = nibble::testing::fresh_rng();
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
          const int count = std::string(layer_name).rfind("mlp", 0) == 0 ? 8 : 1;
          const double gemm = ms(rng), quant = std::string(m) == "pre-quantized" ? 0.0 : 0.5 * ms(rng);
          layer += (gemm + quant) * count;
          b.j["gemms"].push_back({{"layer", layer_name}, {"pass", pass}, {"recipe", r}, {"mode", m},
                                  {"count", count}, {"per_model", false}, {"gemm_ms", gemm},
                                  {"quant_ms", quant}, {"total_ms", gemm + quant}, {"error", nullptr}});
          (std::string(pass) == "fprop" ? b.fprop : b.backward)[std::string(r) + "|" + m] += (gemm + quant) * count;
        }
      b.j["gemms"].push_back({{"layer", "lm_head"}, {"pass", "fprop"}, {"recipe", r}, {"mode", m}, {"count", 1},
                              {"per_model", true}, {"gemm_ms", 1e3 * ms(rng)}, {"quant_ms", 0.0},
                              {"total_ms", 1e3 * ms(rng)}, {"error", nullptr}});
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
  // A GEMM that failed (the engine's out-of-memory row, or no time) must not silently shrink the sum.
  FakeBench oom = make_bench({"fp8-current", "quartet"}, {"step"});
  oom.j["gemms"][14]["error"] = "out of GPU memory: X needs 9000 MiB";
  oom.j["gemms"][14]["total_ms"] = nullptr;
  EXPECT_NE(error_of(oom.j).find("gemms[14]"), std::string::npos) << error_of(oom.j);
  EXPECT_NE(error_of(oom.j).find("out of GPU memory"), std::string::npos) << error_of(oom.j);
  FakeBench no_time = make_bench({"fp8-current", "quartet"}, {"step"});
  no_time.j["gemms"][15].erase("total_ms");
  EXPECT_NE(error_of(no_time.j).find("gemms[15]"), std::string::npos) << error_of(no_time.j);
  EXPECT_NE(error_of(no_time.j).find("total_ms"), std::string::npos) << error_of(no_time.j);
  // Different GEMM sets cannot be compared.
  FakeBench partial = make_bench({"fp8-current", "quartet"}, {"step"});
  partial.j["gemms"].erase(partial.j["gemms"].begin() + 14);
  EXPECT_NE(error_of(partial.j).find("same"), std::string::npos) << error_of(partial.j);
  EXPECT_THROW(read_bench_speedups("/nonexistent/bench.json"), std::invalid_argument);
}

// An H200 measurement shipped in docs/results, as `nibble bench --json` wrote it: the speedups read from
// its rows equal those of the per-pass sums the bench's own aggregation wrote into `summary`
// (gemm_ms + quant_ms per pass), for every mode both recipes ran in.
TEST(BenchSpeedups, ReadsARealBenchResultAndAgreesWithItsSummary) {
  const std::string path = "docs/results/h200-2026-12-02/bench-codonfm-5b.json";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path << " (tests run from the source root)";
  const nlohmann::json bench = nlohmann::json::parse(in);
  auto pass_sums = [&](const std::string& recipe, const std::string& mode) {
    for (const auto& e : bench["summary"])
      if (e["recipe"] == recipe && e["mode"] == mode) {
        const auto &g = e["gemm_ms"], &q = e["quant_ms"];
        const double fwd = g["fprop_ms"].get<double>() + q["fprop_ms"].get<double>();
        const double bwd = g["dgrad_ms"].get<double>() + q["dgrad_ms"].get<double>() +
                           g["wgrad_ms"].get<double>() + q["wgrad_ms"].get<double>();
        return std::pair{fwd, bwd};
      }
    ADD_FAILURE() << "no summary for " << recipe << " " << mode;
    return std::pair{1.0, 1.0};
  };
  for (const char* mode : {"step", "pre-quantized"}) {
    BenchSpeedupOptions o;
    o.mode = mode;
    const BenchSpeedups s = speedups_from_bench_json(bench, o, path);
    EXPECT_EQ(s.fp8_recipe, "fp8-current");
    EXPECT_EQ(s.fp4_recipe, "quartet");
    EXPECT_FALSE(s.predicted);
    const auto fp8 = pass_sums("fp8-current", mode), fp4 = pass_sums("quartet", mode);
    EXPECT_NEAR(s.speedups.fwd, fp8.first / fp4.first, 1e-9 * s.speedups.fwd) << mode;
    EXPECT_NEAR(s.speedups.bwd, fp8.second / fp4.second, 1e-9 * s.speedups.bwd) << mode;
    EXPECT_EQ(s.fp4_path, "emulated-exact (fp8)");
  }
}

}  // namespace
}  // namespace nibble::law
