// The predict layer's data files (GPU database, calibration) as a user may edit them: the shipped files
// load, and a field of the wrong type, picked at random each run, is refused with std::invalid_argument
// naming the field (never nlohmann's type_error, whose message names none).
#include "nibble/predict.hpp"
#include "nibble/workload/model_config.hpp"
#include "scratch_file.hpp"
#include "test_seed.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

namespace nibble::predict {
namespace {

namespace fs = std::filesystem;

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

// A data file holding `j`, removed afterwards.
struct ScratchJson : nibble::testing::ScratchFile {
  explicit ScratchJson(const nlohmann::json& j) : ScratchFile(".json", j.dump()) {}
};

// A JSON value of a type other than `keep` (string or number), drawn from rng.
nlohmann::json wrong_type(std::mt19937_64& rng, bool was_string) {
  const nlohmann::json choices[] = {nullptr, true, nlohmann::json::array({1, 2}), nlohmann::json::object(),
                                    was_string ? nlohmann::json(static_cast<double>(rng() % 977))
                                               : nlohmann::json(fmt::format("x{}", rng() % 977))};
  return choices[rng() % std::size(choices)];
}

template <class F>
void expect_refusal_naming(const std::string& field, F&& load) {
  try {
    load();
    ADD_FAILURE() << "a wrong-typed '" << field << "' was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
  }
}

TEST(PredictDataFiles, GpuDatabaseFieldOfTheWrongTypeNamesTheField) {
  const nlohmann::json db = read_json(workload::data_dir() / "gpus.json");
  ASSERT_GE(db["gpus"].size(), 6u);
  {
    const ScratchJson f(db);
    EXPECT_EQ(load_gpu_database(f.str()).size(), db["gpus"].size());
  }
  auto rng = nibble::testing::fresh_rng();
  const size_t i = rng() % db["gpus"].size();
  for (const char* key : {"name", "arch", "source", "sm_count", "bf16_tflops", "copy_fraction"}) {
    nlohmann::json bad = db;
    const bool was_string = bad["gpus"][i][key].is_string();
    bad["gpus"][i][key] = wrong_type(rng, was_string);
    SCOPED_TRACE(bad["gpus"][i].dump());
    const ScratchJson f(bad);
    expect_refusal_naming(key, [&] { (void)load_gpu_database(f.str()); });
  }
  // Whole-number fields past int, fractional or zero (a double -> int cast would be undefined or wrong).
  for (const char* key : {"sm_count", "compute_capability", "tile_m"}) {
    const double bad_values[] = {std::ldexp(1.0, 31 + static_cast<int>(rng() % 900)), 2.5, 0.0};
    nlohmann::json bad = db;
    bad["gpus"][i][key] = bad_values[rng() % std::size(bad_values)];
    SCOPED_TRACE(bad["gpus"][i].dump());
    const ScratchJson f(bad);
    expect_refusal_naming(key, [&] { (void)load_gpu_database(f.str()); });
  }
  // device_names: an array of non-empty strings, or refused naming the field.
  for (const nlohmann::json& bad_names : {nlohmann::json("NVIDIA H200"), nlohmann::json::array({1}),
                                          nlohmann::json::array({""})}) {
    nlohmann::json bad = db;
    bad["gpus"][i]["device_names"] = bad_names;
    const ScratchJson f(bad);
    expect_refusal_naming("device_names", [&] { (void)load_gpu_database(f.str()); });
  }
  nlohmann::json not_an_entry = db;
  not_an_entry["gpus"][i] = static_cast<int>(rng() % 100);
  const ScratchJson f(not_an_entry);
  expect_refusal_naming("gpus[" + std::to_string(i) + "]", [&] { (void)load_gpu_database(f.str()); });
}

TEST(PredictDataFiles, CalibrationFieldOfTheWrongTypeNamesTheField) {
  const nlohmann::json cal = read_json(workload::data_dir() / "calibration" / "h200-spec-reference.json");
  {
    const ScratchJson f(cal);
    EXPECT_FALSE(load_calibration(f.str()).observations.empty());
  }
  auto rng = nibble::testing::fresh_rng();
  ASSERT_TRUE(cal["observations"].is_array() && !cal["observations"].empty());
  const size_t i = rng() % cal["observations"].size();
  const std::pair<std::vector<std::string>, bool> fields[] = {
      {{"label"}, true}, {{"gpu"}, true}, {{"quant_bandwidth_fraction"}, false},
      {{"observations", std::to_string(i), "family"}, true}, {{"observations", std::to_string(i), "ms"}, false}};
  for (const auto& [path, was_string] : fields) {
    nlohmann::json bad = cal;
    nlohmann::json* slot = &bad;
    for (const auto& key : path) slot = slot->is_array() ? &(*slot)[std::stoul(key)] : &(*slot)[key];
    *slot = wrong_type(rng, was_string);
    SCOPED_TRACE(slot->dump());
    const ScratchJson f(bad);
    expect_refusal_naming(path.back(), [&] { (void)load_calibration(f.str()); });
  }
}

}  // namespace
}  // namespace nibble::predict
