// `nibble bench` recipe/baseline selection end to end (with --gpu, so it predicts on any machine).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_runner.hpp"

namespace {

using nibble::cli::testing::CliSandbox;

nlohmann::json load(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

TEST(CliBench, BaselineDefaultsToBf16WhenFp8DelayedIsNotBenchmarked) {
  CliSandbox box;
  const auto r = box.run("bench --gpu 'H200 SXM' --quiet --recipes mxfp4,quartet --json " + box.path("b.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = load(box.path("b.json"));
  EXPECT_EQ(j.at("baseline_recipe"), "bf16");
  const auto r2 = box.run("bench --gpu 'H200 SXM' --quiet --recipes fp8-delayed,mxfp4 --json " + box.path("c.json"));
  ASSERT_EQ(r2.exit_code, 0) << r2.err;
  EXPECT_EQ(load(box.path("c.json")).at("baseline_recipe"), "fp8-delayed");
}

TEST(CliBench, ExplicitBaselineOutsideTheRecipesIsRefused) {
  CliSandbox box;
  const auto r = box.run("bench --gpu 'H200 SXM' --quiet --recipes mxfp4 --baseline fp8-block --json " +
                         box.path("b.json"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--baseline fp8-block"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(box.path("b.json")));
}

// Timing options are checked before anything runs, also when predicting: a negative or absurd
// --warmup-ms is refused naming the option, and no result file is written.
TEST(CliBench, WarmupMsOutsideItsRangeIsRefused) {
  CliSandbox box;
  for (const char* bad : {"-1", "60001", "abc"}) {
    const auto r = box.run(std::string("bench --gpu 'H200 SXM' --quiet --warmup-ms ") + bad + " --json " +
                           box.path("b.json"));
    EXPECT_NE(r.exit_code, 0) << bad;
    EXPECT_NE(r.err.find("--warmup-ms"), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(box.path("b.json"))) << bad;
  }
  const auto ok = box.run("bench --gpu 'H200 SXM' --quiet --recipes fp8-delayed --warmup-ms 150 --json " +
                          box.path("b.json"));
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

// The JSON records the command as typed: every option, the GPU name quoted. CLI11 leaves no remaining
// arguments once it has parsed them all, so the command line must be kept from argv, not from CLI11.
TEST(CliBench, JsonRecordsTheWholeCommandLine) {
  CliSandbox box;
  const std::string out = box.path("b.json");
  const auto r = box.run("bench --gpu 'H200 SXM' --quiet --recipes bf16,fp8-delayed --mode all --json " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(load(out).at("command_line"),
            "nibble bench --gpu 'H200 SXM' --quiet --recipes bf16,fp8-delayed --mode all --json " + out);
  const auto p = box.run("predict --gpu 'H100 SXM' --recipes bf16 --json " + box.path("p.json"));
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_EQ(load(box.path("p.json")).at("command_line"),
            "nibble predict --gpu 'H100 SXM' --recipes bf16 --json " + box.path("p.json"));
}

}  // namespace
