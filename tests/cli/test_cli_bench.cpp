// `nibble bench` recipe/baseline selection end to end (with --gpu, so it predicts on any machine).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>
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

namespace {

const std::string kMixtral = "bench --gpu 'H100 SXM' --quiet --hf-config tests/workload/fixtures/mixtral-8x7b.config.json "
                             "--mbs 1 --seq 4096 --recipes bf16,fp8-delayed ";

// --token-imbalance and --moe: bad values refused naming the option, before any file is written; --moe both
// records the comparison and the distribution in the JSON.
TEST(CliBench, MoeOptionsAreCheckedAndRecorded) {
  CliSandbox box;
  for (const char* bad : {"0.5", "4.5", "abc"}) {
    const auto r = box.run(kMixtral + "--token-imbalance " + bad + " --json " + box.path("b.json"));
    EXPECT_NE(r.exit_code, 0) << bad;
    EXPECT_NE(r.err.find("--token-imbalance"), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(box.path("b.json"))) << bad;
  }
  const auto bad_path = box.run(kMixtral + "--moe fused --json " + box.path("b.json"));
  EXPECT_NE(bad_path.exit_code, 0);
  EXPECT_NE(bad_path.err.find("--moe"), std::string::npos) << bad_path.err;
  const auto dense = box.run("bench --gpu 'H200 SXM' --quiet --recipes bf16 --moe both");
  EXPECT_NE(dense.exit_code, 0);
  EXPECT_NE(dense.err.find("--moe both"), std::string::npos) << dense.err;

  // The notes (the token distribution among them) are in the full output.
  const auto r = box.run(kMixtral + "--token-imbalance 2 --moe both --details --json " + box.path("m.json") +
                         " --csv " + box.path("m.csv"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("experts: 2048, 896 x6, 768; max/mean 2.00"), std::string::npos) << r.out;
  const auto j = load(box.path("m.json"));
  EXPECT_EQ(j.at("model").at("moe").at("path"), "grouped");
  EXPECT_EQ(j.at("model").at("moe").at("max_tokens"), 2048);
  EXPECT_EQ(j.at("model").at("moe").at("tokens"), nlohmann::json({2048, 896, 896, 896, 896, 896, 896, 768}));
  EXPECT_NE(j.at("model").at("moe").at("distribution").get<std::string>().find("max/mean 2.00"), std::string::npos);
  ASSERT_EQ(j.at("moe_comparison").size(), 4u);  // 2 recipes x (pre-quantized, step)
  for (const auto& c : j.at("moe_comparison")) {
    EXPECT_LT(c.at("ratio").get<double>(), 1.0);
    EXPECT_NEAR(c.at("ratio").get<double>(), c.at("grouped_ms").get<double>() / c.at("per_expert_ms").get<double>(),
                1e-12);
  }
  int expert_rows = 0;
  for (const auto& g : j.at("gemms"))
    if (g.contains("moe_path")) {
      ++expert_rows;
      EXPECT_EQ(g.at("moe_path").get<std::string>().rfind("grouped: ", 0), 0u) << g.dump();
      EXPECT_EQ(g.at("group_tokens").size(), 8u);
    }
  EXPECT_EQ(expert_rows, 2 * 3 * 2 * 2);  // mlp_up, mlp_down x 3 passes x 2 recipes x 2 modes
  std::ifstream csv(box.path("m.csv"));
  std::string header;
  std::getline(csv, header);
  EXPECT_NE(header.find(",moe_path,group_tokens"), std::string::npos);

  const auto per = box.run(kMixtral + "--moe per-expert --json " + box.path("p.json"));
  ASSERT_EQ(per.exit_code, 0) << per.err;
  int per_expert_rows = 0;
  const auto pj = load(box.path("p.json"));
  for (const auto& g : pj.at("gemms")) {
    if (!g.contains("moe_path")) continue;
    ++per_expert_rows;
    EXPECT_EQ(g.at("moe_path"), "per-expert launches");
    EXPECT_EQ(g.at("count"), 8);
  }
  EXPECT_EQ(per_expert_rows, 2 * 3 * 2 * 2);
}

// --moe both runs two workloads but says once what it does instead of measuring.
TEST(CliBench, MoeBothAnnouncesOnce) {
  CliSandbox box;
  const auto r = box.run(kMixtral + "--moe both --repeat 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string what = "--repeat 2 ignored";
  const size_t first = r.err.find(what);
  ASSERT_NE(first, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(what, first + 1), std::string::npos) << r.err;
}

// `nibble predict --against` predicts the measured MoE workload: what the command line leaves out (here --moe)
// comes from the file, and a path or token spread that contradicts the file is refused, naming the option.
TEST(CliPredict, MoePathMatchesBench) {
  CliSandbox box;
  const std::string model = "--hf-config tests/workload/fixtures/mixtral-8x7b.config.json --mbs 1 --seq 4096 ";
  const auto bench = box.run(kMixtral + "--token-imbalance 2 --moe per-expert --json " + box.path("b.json"));
  ASSERT_EQ(bench.exit_code, 0) << bench.err;
  const auto g = box.run("predict --gpu 'H100 SXM' --recipes bf16,fp8-delayed --details " + model +
                         "--token-imbalance 2 --json " + box.path("g.json") + " --against " + box.path("b.json"));
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_EQ(load(box.path("g.json")).at("model").at("moe").at("path"), "per-expert");
  EXPECT_NE(g.out.find("(as measured): --moe per-expert"), std::string::npos) << g.out;
  EXPECT_NE(g.out.find("experts: 2048, 896 x6, 768; max/mean 2.00"), std::string::npos) << g.out;
  const auto p = box.run("predict --gpu 'H100 SXM' --recipes bf16,fp8-delayed --details " + model +
                         "--token-imbalance 2 --moe per-expert --json " + box.path("p.json") + " --against " +
                         box.path("b.json"));
  ASSERT_EQ(p.exit_code, 0) << p.err;
  const auto pj = load(box.path("p.json")), bj = load(box.path("b.json"));
  EXPECT_EQ(pj.at("model").at("moe").at("path"), "per-expert");
  EXPECT_EQ(p.out.find("(as measured)"), std::string::npos) << p.out;  // everything was given
  // Like with like: the same expert rows as the bench's (count, shapes), so the totals agree.
  auto expert_rows = [](const nlohmann::json& j) {
    std::vector<std::tuple<std::string, std::string, int64_t, int64_t>> rows;
    for (const auto& r : j.at("gemms"))
      if (r.contains("moe_path") && r.at("recipe") == "bf16" && r.at("mode") == "pre-quantized")
        rows.emplace_back(r.at("layer"), r.at("pass"), r.at("m").get<int64_t>(), r.at("count").get<int64_t>());
    return rows;
  };
  EXPECT_EQ(expert_rows(pj), expert_rows(bj));
  EXPECT_FALSE(expert_rows(pj).empty());
  // Both sides are the same model's predictions for the same GPU: every error is zero.
  EXPECT_NE(p.out.find("+0.0%"), std::string::npos) << p.out;
  EXPECT_EQ(p.out.find("outside 10%"), std::string::npos) << p.out;
  const auto grouped = box.run("predict --gpu 'H100 SXM' --recipes bf16 " + model + "--token-imbalance 2 --moe grouped "
                               "--json " + box.path("x.json") + " --against " + box.path("b.json"));
  EXPECT_NE(grouped.exit_code, 0);
  EXPECT_NE(grouped.err.find("routed experts grouped vs per-expert (--moe)"), std::string::npos) << grouped.err;
  const auto even = box.run("predict --gpu 'H100 SXM' --recipes bf16 " + model +
                            "--moe per-expert --token-imbalance 1 --json " + box.path("x.json") + " --against " +
                            box.path("b.json"));
  EXPECT_NE(even.exit_code, 0);
  EXPECT_NE(even.err.find("(--token-imbalance)"), std::string::npos) << even.err;
  EXPECT_FALSE(std::filesystem::exists(box.path("x.json")));  // refused before writing anything
  const auto bad = box.run("predict --gpu 'H100 SXM' " + model + "--moe both");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--moe"), std::string::npos) << bad.err;
}

// Without model options, `nibble predict --against` predicts the model the file measured (with its LM head
// and --grad-accum); model options that describe another workload are refused, naming the difference.
TEST(CliPredict, AgainstPredictsTheMeasuredWorkload) {
  CliSandbox box;
  const auto bench = box.run("bench --gpu 'H100 SXM' --quiet --model llama-3-8b --seq 2048 --lm-head --grad-accum 4 "
                             "--recipes bf16,quartet --json " + box.path("l.json"));
  ASSERT_EQ(bench.exit_code, 0) << bench.err;
  const auto same = box.run("predict --gpu 'H100 SXM' --recipes bf16,quartet --details --json " + box.path("s.json") +
                            " --against " + box.path("l.json"));
  ASSERT_EQ(same.exit_code, 0) << same.err;
  EXPECT_NE(same.out.find("(as measured): model llama-3-8b, --lm-head"), std::string::npos) << same.out;
  EXPECT_NE(same.out.find("--grad-accum 4 as in"), std::string::npos) << same.out;
  const auto sj = load(box.path("s.json"));
  EXPECT_EQ(sj.at("tokens"), 2048);
  EXPECT_EQ(sj.at("model").at("model").at("name"), "llama-3-8b");
  size_t errors = 0;
  for (size_t at = same.out.find("predicted "); at != std::string::npos; at = same.out.find("predicted ", at + 1)) {
    const size_t eol = same.out.find('\n', at);
    const std::string line = same.out.substr(at, eol - at);
    if (line.find("measured") == std::string::npos) continue;
    ++errors;
    EXPECT_NE(line.find("+0.0%"), std::string::npos) << line;
  }
  EXPECT_EQ(errors, 4u) << same.out;  // 2 recipes x the bench's 2 default modes
  for (const std::string& other : {std::string("--model codonfm-5b"), std::string("--model llama-3-8b --seq 4096")}) {
    const auto r = box.run("predict --gpu 'H100 SXM' --recipes bf16 " + other + " --json " + box.path("o.json") +
                           " --against " + box.path("l.json"));
    EXPECT_NE(r.exit_code, 0) << other;
    EXPECT_NE(r.err.find("different workloads"), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(box.path("o.json"))) << other;
  }
  const auto no_head = box.run("predict --gpu 'H100 SXM' --recipes bf16 --model llama-3-8b --seq 2048 --against " +
                               box.path("l.json"));
  EXPECT_EQ(no_head.exit_code, 0) << no_head.err;  // --lm-head still comes from the file
}

}  // namespace
