// The bench result model. Its JSON schema (field names are a contract), round trip, and reader errors; the
// MoE fields: a row's moe_path and group_tokens, the result's moe_comparison, and the grouped / per-expert
// comparison computed from two results; then the row of a workload GEMM and the execution-path notes.
#include "handmade_result.hpp"
#include "nibble/results/aggregate.hpp"
#include "nibble/results/path_notes.hpp"
#include "test_seed.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <utility>
#include <vector>

namespace nibble::bench {
namespace {

using nlohmann::json;

BenchResult sample() {
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  return testing::handmade_result(rng);
}

TEST(ResultJson, TopLevelAndRowFieldNames) {
  json j = to_json(sample());
  for (const char* f : {"gpu", "predicted", "summary", "gemms", "gpu_info", "command_line", "date",
                        "model", "tokens", "layers", "baseline_recipe", "copy_bandwidth_gbs",
                        "memory", "fprop_dgrad"})
    EXPECT_TRUE(j.contains(f)) << f;
  EXPECT_TRUE(j["gpu"].is_string());
  for (const char* f : {"sm_count", "sm_clock_mhz", "driver_version", "cuda_version",
                        "cublaslt_version"})
    EXPECT_TRUE(j["gpu_info"].contains(f)) << f;
  for (const char* f : {"recipe", "mode", "layer_ms", "speedup_vs_bf16", "path"})
    EXPECT_TRUE(j["summary"][0].contains(f)) << f;
  for (const char* f : {"layer", "pass", "m", "k", "n", "count", "flops", "recipe", "mode",
                        "gemm_ms", "gemm_p10_ms", "gemm_p90_ms", "n_runs", "quant_ms", "total_ms",
                        "tflops", "pct_of_peak", "path", "quant_bytes", "bound_ms", "error"})
    EXPECT_TRUE(j["gemms"][0].contains(f)) << f;
  for (const char* f : {"recipe", "operand_bytes", "saved_bytes", "peak_bytes"})
    EXPECT_TRUE(j["memory"][0].contains(f)) << f;
  EXPECT_EQ(j["summary"].size(), 6u);
  for (const char* f : {"sequence_layer_ms", "sequence_speedup_vs_bf16"})
    EXPECT_TRUE(j["summary"][0].contains(f)) << f;
  ASSERT_TRUE(j.contains("sequences"));
  ASSERT_FALSE(j["sequences"].empty());
  for (const char* f : {"layer", "t", "i", "o", "recipe", "mode", "count", "per_model", "sequence_ms",
                        "sequence_p10_ms", "sequence_p90_ms", "n_runs", "parts_ms", "sequence_over_parts"})
    EXPECT_TRUE(j["sequences"][0].contains(f)) << f;
  const json& q = j["sequences"][0];
  EXPECT_NEAR(q["sequence_over_parts"].get<double>(), q["sequence_ms"].get<double>() / q["parts_ms"].get<double>(),
              1e-12);
}

TEST(ResultJson, RoundTripKeepsEveryRow) {
  BenchResult a = sample();
  a.rows[3].error = "out of memory";
  a.rows[4].bound_ms = kNaN;
  BenchResult b = result_from_json(json::parse(to_json(a).dump()));
  EXPECT_EQ(b.gpu.name, a.gpu.name);
  EXPECT_EQ(b.gpu.driver_version, a.gpu.driver_version);
  EXPECT_EQ(b.layers, a.layers);
  EXPECT_EQ(b.model, a.model);
  ASSERT_EQ(b.rows.size(), a.rows.size());
  for (size_t i = 0; i < a.rows.size(); ++i) {
    EXPECT_EQ(b.rows[i].layer, a.rows[i].layer);
    EXPECT_EQ(b.rows[i].mode, a.rows[i].mode);
    EXPECT_EQ(b.rows[i].path, a.rows[i].path);
    EXPECT_EQ(b.rows[i].error, a.rows[i].error);
    if (a.rows[i].ok()) {
      EXPECT_DOUBLE_EQ(b.rows[i].total_ms, a.rows[i].total_ms);
      EXPECT_DOUBLE_EQ(b.rows[i].gemm.p90_ms, a.rows[i].gemm.p90_ms);
    } else {
      // A failed row measured nothing: whatever its fields held, its times travel as null.
      EXPECT_TRUE(std::isnan(b.rows[i].total_ms)) << b.rows[i].total_ms;
      EXPECT_TRUE(std::isnan(b.rows[i].gemm.median_ms) && std::isnan(b.rows[i].gemm.p90_ms));
      EXPECT_TRUE(std::isnan(b.rows[i].quant_ms) && std::isnan(b.rows[i].tflops));
    }
    EXPECT_EQ(std::isnan(b.rows[i].bound_ms), std::isnan(a.rows[i].bound_ms));
  }
  EXPECT_EQ(to_json(b).dump(), to_json(a).dump());
  const json row3 = to_json(a)["gemms"][3];
  for (const char* f : {"gemm_ms", "gemm_p90_ms", "quant_ms", "total_ms", "tflops", "pct_of_peak", "quant_bytes"})
    EXPECT_TRUE(row3[f].is_null()) << f;
}

void expect_rejected(const json& j, const std::string& needle) {
  try {
    result_from_json(j);
    ADD_FAILURE() << "accepted a malformed result; expected an error mentioning " << needle;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(ResultJson, ReaderNamesTheBadField) {
  const json good = to_json(sample());
  // Each case spoils one field of a good file; the error must name it.
  const std::vector<std::pair<std::function<void(json&)>, std::string>> cases = {
      {[](json& j) { j.erase("gemms"); }, "gemms"},
      {[](json& j) { j["gemms"][2]["mode"] = "fast"; }, "gemms[2].mode"},
      {[](json& j) { j["gemms"][1]["path"] = "fp4"; }, "gemms[1].path"},
      {[](json& j) { j["gemms"][0]["pass"] = "backward"; }, "gemms[0].pass"},
      {[](json& j) { j["gemms"][0]["m"] = -4; }, "gemms[0]"},
      {[](json& j) { j["sequences"][1]["sequence_ms"] = -1.0; }, "sequences[1].sequence_ms"},
      {[](json& j) { j["sequences"][0].erase("t"); }, "sequences[0].t"},
      {[](json& j) { j["sequences"][2]["mode"] = "fused"; }, "sequences[2].mode"},
      {[](json& j) { j["sequences"][0]["per_model"] = "no"; }, "sequences[0].per_model"},
      {[](json& j) { j["sequences"] = "none"; }, "result.sequences"},
      {[](json& j) { j["predicted"] = "yes"; }, "predicted"},
      {[](json& j) { j["schema"] = "something-else"; }, "schema"},
  };
  for (const auto& [spoil, needle] : cases) {
    json j = good;
    spoil(j);
    expect_rejected(j, needle);
  }
  expect_rejected(json::array(), "object");
  json j = good;
  j.erase("sequences");  // files from before sequences existed still load
  EXPECT_TRUE(result_from_json(j).sequences.empty());
}

TEST(ResultJson, ReadFileErrors) {
  EXPECT_THROW(read_result_file("/nonexistent/dir/result.json"), std::runtime_error);
  auto p = std::filesystem::temp_directory_path() / "nibble_truncated_result.json";
  std::string text = to_json(sample()).dump();
  std::ofstream(p) << text.substr(0, text.size() / 2);
  try {
    read_result_file(p.string());
    ADD_FAILURE() << "accepted a truncated file";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("not valid JSON"), std::string::npos) << e.what();
  }
  std::filesystem::remove(p);
}

// Peak DRAM bandwidth from clock and bus width, against the datasheets: H100 SXM (HBM3, 2619 MHz,
// 5120 bits) 3.35 TB/s; H200 (HBM3e, 3201 MHz, 6144 bits) 4.92 TB/s; RTX 4090 (GDDR6X reported at
// 10501 MHz, 384 bits) 1.01 TB/s; unknown inputs give 0.
TEST(ResultJson, PeakMemoryBandwidthFromClockAndBus) {
  EXPECT_NEAR(peak_memory_bandwidth_gbs(2619, 5120), 3352.3, 0.1);
  EXPECT_NEAR(peak_memory_bandwidth_gbs(3201, 6144), 4917.0, 0.5);
  EXPECT_NEAR(peak_memory_bandwidth_gbs(10501, 384), 1008.1, 0.1);
  EXPECT_EQ(peak_memory_bandwidth_gbs(0, 5120), 0.0);
  EXPECT_EQ(peak_memory_bandwidth_gbs(2619, 0), 0.0);
}

TEST(ResultJson, ModeNames) {
  for (Mode m : {Mode::pre_quantized, Mode::step, Mode::per_gemm})
    EXPECT_EQ(mode_from_string(to_string(m)), m);
  EXPECT_THROW(mode_from_string("autocast"), std::invalid_argument);
  EXPECT_TRUE(is_valid_path("emulated-exact (bf16)"));
  EXPECT_FALSE(is_valid_path("emulated"));
}

// MoE fields. A routed-expert layer's three passes under `path`: grouped (one row, count 1, the experts' tokens) or
// per-expert (one expert's row, count = experts).
BenchResult expert_result(bool grouped, std::mt19937_64& rng) {
  const std::vector<int64_t> tokens = {256, 128, 128, 128};
  const int64_t t = grouped ? 640 : 128, count = grouped ? 1 : 4;
  BenchResult b;
  b.layers = 2;
  b.tokens = 320;
  for (const char* recipe : {"bf16", "fp8-delayed"})
    for (const testing::Shape& s : std::vector<testing::Shape>{{"mlp_up", "fprop", t, 512, 1024, count},
                                                               {"mlp_up", "dgrad", t, 1024, 512, count},
                                                               {"mlp_up", "wgrad", 512, t, 1024, count}}) {
      Row r = testing::make_row(s, recipe, Mode::pre_quantized, rng);
      r.moe_path = grouped ? moe_path::grouped(moe_path::one_quantize_launch) : std::string(moe_path::per_expert);
      if (grouped) r.group_tokens = tokens;
      b.rows.push_back(r);
    }
  return b;
}

TEST(MoeResult, RowsAndComparisonRoundTrip) {
  auto rng = nibble::testing::fresh_rng();
  BenchResult g = expert_result(true, rng);
  const BenchResult p = expert_result(false, rng);
  g.moe_comparison = compare_moe_paths(g, p);
  ASSERT_EQ(g.moe_comparison.size(), 2u);
  for (const MoeComparison& c : g.moe_comparison) {
    double grouped = 0, per = 0;
    for (const Row& r : g.rows)
      if (r.recipe == c.recipe) grouped += r.total_ms;
    for (const Row& r : p.rows)
      if (r.recipe == c.recipe) per += r.total_ms * 4;
    EXPECT_NEAR(c.grouped_ms, grouped, 1e-12);
    EXPECT_NEAR(c.per_expert_ms, per, 1e-12);
    EXPECT_NEAR(c.ratio, grouped / per, 1e-12);
  }
  const BenchResult back = result_from_json(to_json(g));
  ASSERT_EQ(back.rows.size(), g.rows.size());
  for (size_t i = 0; i < g.rows.size(); ++i) {
    EXPECT_EQ(back.rows[i].moe_path, g.rows[i].moe_path);
    EXPECT_EQ(back.rows[i].group_tokens, g.rows[i].group_tokens);
  }
  ASSERT_EQ(back.moe_comparison.size(), 2u);
  EXPECT_DOUBLE_EQ(back.moe_comparison[1].ratio, g.moe_comparison[1].ratio);
  EXPECT_EQ(back.moe_comparison[1].recipe, "fp8-delayed");
  // A failed expert row leaves its comparison NaN (null in the file), not a partial sum.
  g.rows[4].error = "out of memory";
  const auto failed = compare_moe_paths(g, p);
  EXPECT_TRUE(std::isnan(failed[1].grouped_ms));
  EXPECT_TRUE(std::isnan(failed[1].ratio));
  EXPECT_FALSE(std::isnan(failed[0].ratio));
}

TEST(MoeResult, GroupTokensMustSumToTheTokenDimension) {
  auto rng = nibble::testing::fresh_rng();
  nlohmann::json j = to_json(expert_result(true, rng));
  j["gemms"][2]["group_tokens"] = {256, 128, 128};  // wgrad row: k = 640
  try {
    result_from_json(j);
    ADD_FAILURE() << "accepted group_tokens that do not sum to k";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("group_tokens"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("(k)"), std::string::npos) << e.what();
  }
  j["gemms"][2]["group_tokens"] = {256, -1, 128, 257};
  EXPECT_THROW(result_from_json(j), std::invalid_argument);
}

// The small helpers of the result model: bench::row_from_gemm (the row of a workload GEMM) and
// bench::PathNotes (the engine's execution-path note lines per (recipe, layer)).
TEST(RowFromGemm, CopiesShapeAndCountsFlopsPerCall) {
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  std::uniform_int_distribution<int64_t> dim(1, 20000);
  workload::Gemm g;
  g.layer = "mlp_up";
  g.pass = "wgrad";
  g.m = dim(rng);
  g.k = dim(rng);
  g.n = dim(rng);
  g.count = 8;
  g.per_model = true;
  Row r = row_from_gemm(g, "nvfp4", Mode::per_gemm);
  EXPECT_EQ(r.layer, "mlp_up");
  EXPECT_EQ(r.pass, "wgrad");
  EXPECT_EQ(r.m, g.m);
  EXPECT_EQ(r.k, g.k);
  EXPECT_EQ(r.n, g.n);
  EXPECT_EQ(r.count, 8);
  EXPECT_TRUE(r.per_model);
  EXPECT_EQ(r.recipe, "nvfp4");
  EXPECT_EQ(r.mode, Mode::per_gemm);
  EXPECT_DOUBLE_EQ(r.flops * 8, g.flops());
}

TEST(PathNotes, OneUnlabelledLineWhenEveryModeRanTheSamePath) {
  PathNotes n;
  n.add(Mode::pre_quantized, "X: re-encoded per row, exact");
  n.add(Mode::step, "X: re-encoded per row, exact");
  n.add(Mode::per_gemm, "X: re-encoded per row, exact");
  EXPECT_EQ(n.lines("quartet", "qkv"), std::vector<std::string>{"quartet qkv: X: re-encoded per row, exact"});
}

TEST(PathNotes, ModesNamedWhenTheyRanDifferentPaths) {
  PathNotes n;
  n.add(Mode::pre_quantized, "row+col tile");
  n.add(Mode::step, "row+col tile");
  n.add(Mode::per_gemm, "column-wise tile");
  n.add(Mode::step, "row+col tile");  // a mode reported twice is named once
  n.add(Mode::step, "");              // a runner without a note adds nothing
  const std::vector<std::string> want = {"mxfp4 mlp_up: [pre-quantized, step] row+col tile",
                                         "mxfp4 mlp_up: [per-gemm] column-wise tile"};
  EXPECT_EQ(n.lines("mxfp4", "mlp_up"), want);
}

TEST(PathNotes, NoPathNoLine) {
  PathNotes n;
  n.add(Mode::step, "");
  EXPECT_TRUE(n.lines("bf16", "qkv").empty());
}

}  // namespace
}  // namespace nibble::bench
