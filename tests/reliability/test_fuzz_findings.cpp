// Replays every input the fuzzers ever found (fuzz_findings/<target>/, kept byte for byte) and every
// seed (fuzz/corpus/<target>/) through the same harness the fuzzer runs, so a fixed crash stays fixed
// in the ordinary (and sanitized) test run, without clang or libFuzzer.
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

struct Target {
  const char* name;
  Harness harness;
};
const Target kTargets[] = {
    {"npy", nibble::fuzz::exercise_npy},           {"safetensors", nibble::fuzz::exercise_safetensors},
    {"hf_config", nibble::fuzz::exercise_hf_config}, {"preset", nibble::fuzz::exercise_preset},
    {"runs_csv", nibble::fuzz::exercise_runs_csv}, {"bench_result", nibble::fuzz::exercise_bench_result},
    {"bench_speedups", nibble::fuzz::exercise_bench_speedups}, {"law_fit", nibble::fuzz::exercise_law_fit},
};

const fs::path kFindings = NIBBLE_FUZZ_FINDINGS_DIR;
const fs::path kSeeds = fs::path(NIBBLE_FUZZ_FINDINGS_DIR) / ".." / ".." / ".." / "fuzz" / "corpus";

}  // namespace

TEST(FuzzFindings, EveryStoredFindingStaysWithinTheParserContract) {
  int total = 0;
  for (const Target& t : kTargets) total += replay(kFindings / t.name, t.harness);
  EXPECT_GE(total, 2) << "the findings folder " << kFindings << " is missing";
}

TEST(FuzzFindings, EverySeedParsesWithinTheContract) {
  for (const Target& t : kTargets) {
    EXPECT_GT(replay(kSeeds / t.name, t.harness), 0) << "no seeds for " << t.name << " under " << kSeeds;
  }
}

// The harness must be able to fail: an exception outside the contract escapes it.
TEST(FuzzFindings, HarnessLetsForeignExceptionsThrough) {
  EXPECT_THROW(nibble::fuzz::expect_clean_rejection([] { throw std::logic_error("not in the contract"); }),
               std::logic_error);
  EXPECT_NO_THROW(nibble::fuzz::expect_clean_rejection([] { throw std::invalid_argument("contract"); }));
}
