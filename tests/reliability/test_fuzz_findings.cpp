// Replays every input the fuzzers ever found (fuzz_findings/<target>/, kept byte for byte) and every
// seed (the seed folders tools/fuzz.sh gives each target) through the same harness the fuzzer runs,
// so a fixed crash stays fixed in the ordinary (and sanitized) test run, without clang or libFuzzer.
// Then what the findings taught every JSON reader, checked with fresh random inputs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "../../fuzz/parser_harnesses.hpp"
#include "nibble/io/tensor.hpp"
#include "nibble/law/bench_speedups.hpp"
#include "nibble/law/fit.hpp"
#include "nibble/results/result.hpp"
#include "nibble/workload/model_config.hpp"
#include "scratch_file.hpp"
#include "test_seed.hpp"

namespace fs = std::filesystem;

namespace {

using Harness = bool (*)(const uint8_t*, size_t);

std::vector<uint8_t> read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Returns how many files were replayed; each one must stay within the parser contract.
int replay(const fs::path& dir, Harness harness) {
  int n = 0;
  if (!fs::is_directory(dir)) return 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    const std::vector<uint8_t> bytes = read_bytes(e.path());
    SCOPED_TRACE(e.path().string());
    EXPECT_NO_THROW(harness(bytes.data(), bytes.size())) << "outside the parser contract: " << e.path();
    ++n;
  }
  return n;
}

// seeds: the target's seed folders, relative to the repository root; the same table as seed_dirs in
// tools/fuzz.sh (fuzz/corpus/ holds only seeds that are not already repository data files).
struct Target {
  const char* name;
  Harness harness;
  std::vector<const char*> seeds;
};
const Target kTargets[] = {
    {"npy", nibble::fuzz::exercise_npy, {"fuzz/corpus/npy"}},
    {"safetensors", nibble::fuzz::exercise_safetensors, {"fuzz/corpus/safetensors"}},
    {"hf_config", nibble::fuzz::exercise_hf_config, {"tests/workload/fixtures"}},
    {"preset", nibble::fuzz::exercise_preset, {"data/presets"}},
    {"runs_csv", nibble::fuzz::exercise_runs_csv, {"fuzz/corpus/runs_csv", "data/law"}},
    {"bench_result", nibble::fuzz::exercise_bench_result, {"fuzz/corpus/bench_result"}},
    {"bench_speedups", nibble::fuzz::exercise_bench_speedups, {"fuzz/corpus/bench_result", "tests/law"}},
    {"law_fit", nibble::fuzz::exercise_law_fit, {"fuzz/corpus/law_fit", "data/law"}},
};

const fs::path kFindings = NIBBLE_FUZZ_FINDINGS_DIR;
const fs::path kRepo = fs::path(NIBBLE_FUZZ_FINDINGS_DIR) / ".." / ".." / "..";

}  // namespace

TEST(FuzzFindings, EveryStoredFindingStaysWithinTheParserContract) {
  int total = 0;
  for (const Target& t : kTargets) total += replay(kFindings / t.name, t.harness);
  EXPECT_GE(total, 2) << "the findings folder " << kFindings << " is missing";
}

TEST(FuzzFindings, EverySeedParsesWithinTheContract) {
  for (const Target& t : kTargets) {
    for (const char* dir : t.seeds) {
      EXPECT_GT(replay(kRepo / dir, t.harness), 0) << "no seeds for " << t.name << " under " << kRepo / dir;
    }
  }
}

// The harness must be able to fail: an exception outside the contract escapes it.
TEST(FuzzFindings, HarnessLetsForeignExceptionsThrough) {
  EXPECT_THROW(nibble::fuzz::expect_clean_rejection([] { throw std::logic_error("not in the contract"); }),
               std::logic_error);
  EXPECT_NO_THROW(nibble::fuzz::expect_clean_rejection([] { throw std::invalid_argument("contract"); }));
}

// JSON readers under inputs the fuzzers found: nlohmann::json reports a number past double's range
// ("1e999", fuzz_safetensors) as out_of_range, not parse_error, and a non-string "model_type"
// (fuzz_hf_config) as type_error. A reader that caught only parse_error would surface them as
// "[json.exception.out_of_range.406] ..." naming no file; each reader must throw
// std::invalid_argument naming the file.
namespace {

using nibble::testing::ScratchFile;

// A random overflowing exponent each run, so the test does not pin one literal.
std::string huge_number() {
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  std::string out = std::to_string(1 + rng() % 9);
  out += 'e';
  out += std::to_string(400 + rng() % 100000);
  return out;
}

template <class F>
void expect_invalid_argument_naming(const std::string& path, F&& read) {
  try {
    read();
    ADD_FAILURE() << "no exception for " << path;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type for " << path << ": " << e.what();
  }
}

}  // namespace

TEST(JsonReaderErrors, NumberPastDoubleNamesTheFileInEveryReader) {
  const std::string doc = "{\"hidden_size\": " + huge_number() + "}";
  {
    ScratchFile f(".json", doc);
    expect_invalid_argument_naming(f.str(), [&] { nibble::workload::load_hf_config(f.str()); });
  }
  {
    ScratchFile f(".json", doc);
    expect_invalid_argument_naming(f.str(), [&] { nibble::bench::read_result_file(f.str()); });
  }
  {
    ScratchFile f(".json", doc);
    expect_invalid_argument_naming(f.str(), [&] { nibble::law::read_bench_speedups(f.str()); });
  }
  {
    ScratchFile f(".json", doc);
    expect_invalid_argument_naming(f.str(), [&] { nibble::law::load_fit(f.str()); });
  }
  {
    std::string header = "{\"__metadata__\": " + huge_number() + "}";
    header.append((8 - header.size() % 8) % 8, ' ');
    std::string image(8, '\0');
    for (int i = 0; i < 8; ++i) image[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
    ScratchFile f(".safetensors", image + header);
    expect_invalid_argument_naming(f.str(), [&] { nibble::io::read_safetensors(f.str()); });
  }
}

TEST(JsonReaderErrors, NonStringModelTypeNamesTheField) {
  auto rd = nibble::testing::fresh_engine<std::mt19937>();
  const nlohmann::json j = {{"hidden_size", 64 * (1 + rd() % 8)}, {"num_attention_heads", 4},
                            {"num_hidden_layers", 2}, {"vocab_size", 100}, {"intermediate_size", 256},
                            {"model_type", static_cast<int>(rd() % 1000)}};
  try {
    nibble::workload::hf_config_from_json(j, "cfg.json");
    ADD_FAILURE() << "a numeric model_type was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("model_type"), std::string::npos) << e.what();
  }
  nlohmann::json ok = j;
  ok["model_type"] = "llama";
  EXPECT_TRUE(nibble::workload::hf_config_from_json(ok, "cfg.json").gated);  // llama is a gated family
}

// Fuzz finding (fuzz_law_fit): a fit JSON whose optional fields have the wrong type
// ("base_scheme": null) must not escape as nlohmann's type_error. Each optional field, given a random value
// of a wrong type, is refused with std::invalid_argument naming it; the valid document still loads.
TEST(JsonReaderErrors, FitJsonOptionalFieldsOfTheWrongTypeNameTheField) {
  auto rng = nibble::testing::fresh_rng();
  const nlohmann::json valid = {{"A", 2.52e5},  {"alpha", 0.58}, {"B", 5.25e5}, {"beta", 0.544},
                                {"E", 1.35},    {"gamma", 2.27}, {"source", "published"},
                                {"base_scheme", "bf16"},          {"solver", "ceres"},
                                {"poorly_determined", {"A"}},
                                {"schemes", {{"bf16", {{"eff_n", 1.0}, {"eff_d", 1.0}, {"runs", 12}}}}}};
  EXPECT_NO_THROW(nibble::law::fit_from_json(valid, "fit.json"));
  const nlohmann::json wrong[] = {nullptr, static_cast<double>(rng() % 1000) / 7, nlohmann::json::array({1, 2}),
                                  nlohmann::json::object(), true};
  struct Field {
    std::vector<std::string> path;
    bool text;  // a string field (else a count or a list)
  };
  const Field fields[] = {{{"source"}, true}, {{"base_scheme"}, true}, {{"solver"}, true},
                          {{"schemes", "bf16", "runs"}, false}};
  for (const Field& f : fields) {
    const nlohmann::json bad_value = wrong[rng() % std::size(wrong)];
    nlohmann::json bad = valid;
    nlohmann::json* slot = &bad;
    for (const auto& key : f.path) slot = &(*slot)[key];
    *slot = f.text ? bad_value : nlohmann::json("many");
    SCOPED_TRACE(bad.dump());
    try {
      nibble::law::fit_from_json(bad, "fit.json");
      ADD_FAILURE() << "accepted " << f.path.back() << " = " << slot->dump();
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(f.path.back()), std::string::npos) << e.what();
    }
  }
  nlohmann::json bad_list = valid;
  bad_list["poorly_determined"] = {"A", rng() % 100};
  EXPECT_THROW(nibble::law::fit_from_json(bad_list, "fit.json"), std::invalid_argument);
}

// Fuzz finding (fuzz_bench_result under UBSan): a bench result whose gpu_info.compute_capability is
// 9.6e102 must not reach a double -> int cast (undefined behaviour). Counts past int, negative or
// fractional, drawn at random, are refused naming the field; the valid document still reads.
TEST(JsonReaderErrors, BenchResultCountsOutOfRangeNameTheField) {
  const std::string sample = std::string(NIBBLE_FUZZ_FINDINGS_DIR) + "/../../../fuzz/corpus/bench_result/predicted_small.json";
  std::ifstream in(sample);
  ASSERT_TRUE(in.good()) << sample;
  const nlohmann::json valid = nlohmann::json::parse(in);
  EXPECT_NO_THROW(nibble::bench::result_from_json(valid));
  auto rng = nibble::testing::fresh_rng();
  const double bad_values[] = {std::ldexp(1.0, 31 + static_cast<int>(rng() % 900)), -1.0 - static_cast<double>(rng() % 50),
                               2.5 + static_cast<double>(rng() % 100)};
  for (const char* key : {"sm_count", "compute_capability"}) {
    nlohmann::json bad = valid;
    bad["gpu_info"][key] = bad_values[rng() % std::size(bad_values)];
    SCOPED_TRACE(bad["gpu_info"].dump());
    try {
      nibble::bench::result_from_json(bad);
      ADD_FAILURE() << "accepted gpu_info." << key;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  }
}
