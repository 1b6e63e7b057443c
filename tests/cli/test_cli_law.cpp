// `nibble law` end to end: bad inputs exit non-zero, name the problem on stderr and leave no output
// file; `predict` prints the docs/spec.md §7 law evaluated at the published constants.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_runner.hpp"

using nibble::cli::testing::CliResult;
using nibble::cli::testing::CliSandbox;

namespace {

void write(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p) << text;
}

bool mentions(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

// A failed command: non-zero exit, `nibble: error:` naming `what` on stderr, nothing on stdout.
void expect_failure(const CliResult& r, const std::string& what) {
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_TRUE(mentions(r.err, "nibble: error:")) << r.err;
  EXPECT_TRUE(mentions(r.err, what)) << "stderr should name '" << what << "': " << r.err;
  EXPECT_EQ(r.out, "");
}

// Seven base-scheme runs that fit well (loss falls with n and d), so a failure is the one the test makes.
const char* kRunRows[] = {"bf16,3e7,7.5e8,3.90", "bf16,3e7,3e9,3.62",   "bf16,1e8,2.5e9,3.41", "bf16,1e8,1e10,3.20",
                          "bf16,2e8,5e9,3.22",   "bf16,2e8,2e10,3.04",  "bf16,5e7,5e9,3.45"};

// One bench row in the `nibble bench --json` layout.
nlohmann::json bench_row(const std::string& recipe, const std::string& pass, double ms) {
  return {{"layer", "qkv"}, {"pass", pass},     {"count", 1},       {"per_model", false}, {"recipe", recipe},
          {"mode", "step"}, {"gemm_ms", ms},    {"quant_ms", 0.0},  {"total_ms", ms},     {"error", nullptr}};
}

nlohmann::json bench_without_quartet() {
  nlohmann::json b = {{"gpu", "made-up"}, {"predicted", true}, {"summary", nlohmann::json::array()},
                      {"gemms", nlohmann::json::array()}};
  for (const char* pass : {"fprop", "dgrad", "wgrad"}) {
    b["gemms"].push_back(bench_row("bf16", pass, 2.0));
    b["gemms"].push_back(bench_row("fp8-current", pass, 1.0));
  }
  return b;
}

}  // namespace

TEST(CliLaw, FitMissingEachRequiredColumnFailsNamingIt) {
  const std::vector<std::string> columns = {"scheme", "n", "d", "loss"};
  for (size_t drop = 0; drop < columns.size(); ++drop) {
    CliSandbox box;
    std::string header, rows;
    for (size_t c = 0; c < columns.size(); ++c)
      if (c != drop) header += (header.empty() ? "" : ",") + columns[c];
    header += ",lr";  // a metadata column, so the header is never the required four
    for (const char* row : kRunRows) {
      std::vector<std::string> fields;
      std::string f;
      for (const char* p = row;; ++p) {
        if (*p == ',' || *p == '\0') fields.push_back(f), f.clear();
        else f += *p;
        if (*p == '\0') break;
      }
      std::string line;
      for (size_t c = 0; c < fields.size(); ++c)
        if (c != drop) line += (line.empty() ? "" : ",") + fields[c];
      rows += line + ",3e-4\n";
    }
    write(box / "runs.csv", header + "\n" + rows);
    const auto r = box.run("law fit " + box.path("runs.csv") + " --json " + box.path("fit.json") + " --starts 2 --bootstrap 0");
    SCOPED_TRACE("dropped column " + columns[drop]);
    expect_failure(r, "missing column(s) " + columns[drop]);
    EXPECT_EQ(box.listing(), "runs.csv") << "a failed fit must not write --json";
  }
}

TEST(CliLaw, FitTooFewRunsFailsSayingHowMany) {
  CliSandbox box;
  std::string csv = "scheme,n,d,loss\n";
  for (int i = 0; i < 3; ++i) csv += std::string(kRunRows[i]) + "\n";
  write(box / "runs.csv", csv);
  const auto r = box.run("law fit " + box.path("runs.csv") + " --json " + box.path("fit.json"));
  expect_failure(r, "too few base-scheme ('bf16') runs");
  EXPECT_TRUE(mentions(r.err, "3 runs")) << r.err;
  EXPECT_TRUE(mentions(r.err, "at least 7")) << r.err;
  EXPECT_EQ(box.listing(), "runs.csv");

  // Control: the full seven rows are enough, so the failure above is the row count and nothing else.
  csv = "scheme,n,d,loss\n";
  for (const char* row : kRunRows) csv += std::string(row) + "\n";
  write(box / "runs.csv", csv);
  const auto ok = box.run("law fit " + box.path("runs.csv") + " --json " + box.path("fit.json") +
                          " --starts 8 --bootstrap 0");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(box.listing(), "fit.json runs.csv");
}

// --hold-base: the shipped example runs (drawn from the published law) fitted with the published constants held
// give back the published Quartet efficiencies; runs below the held E are refused before anything is written.
TEST(CliLaw, FitWithHeldBaseConstants) {
  CliSandbox box;
  const auto r = box.run("law fit data/law/example_runs.csv --hold-base data/law/published_quartet_fit.json "
                         "--bootstrap 20 --json " + box.path("fit.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(mentions(r.out, "base constants held, only the schemes' efficiencies fitted")) << r.out;
  std::ifstream in(box.path("fit.json"));
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j.at("base_constants"), "held");
  EXPECT_EQ(j.at("A").get<double>(), 1.52e5);
  EXPECT_NEAR(j.at("schemes").at("quartet").at("eff_n").get<double>(), 0.65, 0.02);
  EXPECT_NEAR(j.at("schemes").at("quartet").at("eff_d").get<double>(), 0.95, 0.02);
  write(box / "low.csv", "scheme,n,d,loss\nquartet,3e7,3e8,1.2\nquartet,3e7,6e8,1.1\nquartet,5e7,5e8,1.0\n");
  const auto low = box.run("law fit " + box.path("low.csv") + " --hold-base data/law/published_quartet_fit.json "
                           "--json " + box.path("low.json"));
  expect_failure(low, "irreducible loss E = 1.35");
  EXPECT_FALSE(std::filesystem::exists(box.path("low.json")));
}

TEST(CliLaw, PlanWithBenchLackingTheRecipeFails) {
  CliSandbox box;
  write(box / "bench.json", bench_without_quartet().dump(1));
  // Default --fp4-recipe is quartet, which this benchmark lacks.
  auto r = box.run("law plan --n 1e9 --d 2e10 --speedups " + box.path("bench.json"));
  expect_failure(r, "FP4 recipe 'quartet' is not in the benchmark");
  EXPECT_TRUE(mentions(r.err, "recipes present: bf16, fp8-current")) << r.err;
  // map reads the same speedups: it must fail before writing either file.
  r = box.run("law map --svg " + box.path("map.svg") + " --csv " + box.path("map.csv") + " --speedups " +
              box.path("bench.json"));
  expect_failure(r, "FP4 recipe 'quartet' is not in the benchmark");
  EXPECT_EQ(box.listing(), "bench.json");

  // Control: with the quartet rows added, the same command plans.
  auto bench = bench_without_quartet();
  for (const char* pass : {"fprop", "dgrad", "wgrad"}) bench["gemms"].push_back(bench_row("quartet", pass, 0.6));
  write(box / "bench.json", bench.dump(1));
  r = box.run("law plan --n 1e9 --d 2e10 --speedups " + box.path("bench.json") + " --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(nlohmann::json::parse(r.out).contains("best")) << r.out;
}

TEST(CliLaw, ReachNeedsAFitAndRefusesAnUnreachableLoss) {
  CliSandbox box;
  auto r = box.run("law reach --n 1e8 --loss 3.0");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(mentions(r.err, "--fit is required")) << r.err;  // the command-line parser's own message
  auto bench = bench_without_quartet();
  bench["summary"] = {{{"recipe", "bf16"}, {"mode", "step"}, {"model_speedup_vs_bf16", 1.0}},
                      {{"recipe", "fp8-current"}, {"mode", "step"}, {"model_speedup_vs_bf16", 1.6}}};
  write(box / "bench.json", bench.dump(1));
  r = box.run("law fit data/law/example_runs.csv --starts 8 --bootstrap 10 --json " + box.path("fit.json"));  // cwd: the repo
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Below the infinite-data limit of this N: an error naming the limit, nothing printed as a plan.
  r = box.run("law reach --n 1e8 --loss 0.5 --fit " + box.path("fit.json") + " --speedups " + box.path("bench.json"));
  expect_failure(r, "not reachable");
  // Control: a reachable loss ranks the fitted schemes; quartet has no bench row here, so it is not ranked.
  r = box.run("law reach --n 1e8 --loss 3.3 --fit " + box.path("fit.json") + " --speedups " + box.path("bench.json") +
              " --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["best"], "bf16");
  EXPECT_EQ(j["skipped"].size(), 1u) << r.out;
}

TEST(CliLaw, MapWithNothingToWriteFails) {
  CliSandbox box;
  const auto r = box.run("law map --steps 4");
  expect_failure(r, "nothing to write");
  EXPECT_TRUE(mentions(r.err, "--svg")) << r.err;
  EXPECT_TRUE(mentions(r.err, "--csv")) << r.err;
  EXPECT_EQ(box.listing(), "");

  // Control: with --csv it writes that file and only that file.
  const auto ok = box.run("law map --steps 4 --csv " + box.path("map.csv"));
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(box.listing(), "map.csv");
}

TEST(CliLaw, PredictUnknownSchemeFails) {
  CliSandbox box;
  const auto r = box.run("law predict --n 1e9 --d 2e10 --scheme int3 --format json");
  expect_failure(r, "scheme 'int3' is unknown");
  EXPECT_TRUE(mentions(r.err, "bf16, fp8, quartet or fp4")) << r.err;
  EXPECT_EQ(box.listing(), "");
}

TEST(CliLaw, PredictEqualsSpecFormulaAtPublishedConstants) {
  CliSandbox box;
  const auto r = box.run("law predict --n 1e9 --d 2e10 --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const auto j = nlohmann::json::parse(r.out);
  // docs/spec.md §7: L = (A / (N effN)^alpha + B / (D effD)^beta)^gamma + E, effN = effD = 1 for BF16.
  const double A = 1.52e5, alpha = 0.589, B = 5.25e5, beta = 0.544, E = 1.35, gamma = 0.274;
  const double N = 1e9, D = 2e10, eff_n = 1.0, eff_d = 1.0;
  const double expected = std::pow(A / std::pow(N * eff_n, alpha) + B / std::pow(D * eff_d, beta), gamma) + E;
  const double loss = j.at("loss").get<double>();
  EXPECT_NEAR(loss, expected, 1e-9 * expected);
  EXPECT_EQ(j.at("eff_n").get<double>(), 1.0);
  EXPECT_EQ(j.at("eff_d").get<double>(), 1.0);
  // The quartet scheme must lose to BF16 at the same N, D (effN 0.65, effD 0.95 < 1).
  const auto q = box.run("law predict --n 1e9 --d 2e10 --scheme quartet --format json");
  ASSERT_EQ(q.exit_code, 0) << q.err;
  const double q_expected =
      std::pow(A / std::pow(N * 0.65, alpha) + B / std::pow(D * 0.95, beta), gamma) + E;
  EXPECT_NEAR(nlohmann::json::parse(q.out).at("loss").get<double>(), q_expected, 1e-9 * q_expected);
}
