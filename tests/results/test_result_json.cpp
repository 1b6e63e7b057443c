// JSON schema (field names are a contract), round trip, and reader errors.
#include "handmade_result.hpp"
#include "nibble/results/aggregate.hpp"
#include "test_seed.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
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

}  // namespace
}  // namespace nibble::bench
