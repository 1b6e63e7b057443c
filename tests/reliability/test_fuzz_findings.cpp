// Replays every input the fuzzers ever found (fuzz_findings/<target>/, kept byte for byte) and every
// seed (the seed folders tools/fuzz.sh gives each target) through the same harness the fuzzer runs,
// so a fixed crash stays fixed in the ordinary (and sanitized) test run, without clang or libFuzzer.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "../../fuzz/parser_harnesses.hpp"

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
