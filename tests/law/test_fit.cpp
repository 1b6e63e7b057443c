// The runs CSV (columns, metadata, quoting, bad rows); the fit recovers a known law from noisy synthetic
// runs, extrapolates, and refuses bad input.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <tuple>
#include <vector>

#include "huber_solver.hpp"
#include "nibble/law/fit.hpp"
#include "nibble/law/scaling_law.hpp"
#include "test_seed.hpp"

// Synthetic training runs drawn from a known law with multiplicative noise, for the fit tests.
namespace nibble::law::test {

// A grid like the published study's: 30M-200M parameters, 25-800 tokens per parameter.
inline std::vector<Run> synthetic_runs(const LawConstants& law, const std::string& scheme, Efficiency eff,
                                       double noise, std::mt19937_64& rng) {
  std::normal_distribution<double> jitter(0.0, noise);
  std::vector<Run> runs;
  for (double n : {30e6, 50e6, 100e6, 200e6})
    for (double ratio : {25.0, 50.0, 100.0, 200.0, 400.0, 800.0}) {
      Run r;
      r.scheme = scheme;
      r.n = n;
      r.d = n * ratio;
      r.loss = predict_loss(law, r.n, r.d, eff) * std::exp(jitter(rng));
      runs.push_back(r);
    }
  return runs;
}

}  // namespace nibble::law::test

namespace nibble::law {
namespace {

std::vector<FitSolver> available_solvers() {
  std::vector<FitSolver> s;
  if (detail::backend_available(detail::Backend::ceres)) s.push_back(FitSolver::ceres);
  if (detail::backend_available(detail::Backend::eigen_lm)) s.push_back(FitSolver::eigen_lm);
  return s;
}

class FitRecovery : public ::testing::TestWithParam<FitSolver> {
 protected:
  void check_recovery(uint64_t seed);
};

// Draws a law and an FP4 scheme from `seed`, fits noisy synthetic runs of both and checks the recovery.
void FitRecovery::check_recovery(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  // A random FP4-like scheme each time, so a fit that returns the published values by accident fails.
  const Efficiency truth{0.55 + 0.3 * u(rng), 0.8 + 0.15 * u(rng)};
  // A random law near the published one, so the published constants (one of the initialisations)
  // are not the answer.
  LawConstants law = published_constants();
  law.alpha *= 0.9 + 0.2 * u(rng);
  law.beta *= 0.9 + 0.2 * u(rng);
  law.gamma *= 0.9 + 0.2 * u(rng);
  law.E *= 0.9 + 0.2 * u(rng);
  // Loss noise of 0.03%: the published fit's runs are averaged validation losses. With 0.1% noise the
  // base constants still fit the runs, but 50x extrapolation drifts by ~2%.
  auto runs = test::synthetic_runs(law, "bf16", {}, 3e-4, rng);
  auto fp4 = test::synthetic_runs(law, "quartet", truth, 3e-4, rng);
  runs.insert(runs.end(), fp4.begin(), fp4.end());

  FitOptions o;
  o.solver = GetParam();
  o.bootstrap = 30;
  o.n_starts = 32;
  o.seed = seed;
  SCOPED_TRACE(::testing::Message() << "seed " << seed);  // before the fit: a throw must name it too
  const auto t0 = std::chrono::steady_clock::now();
  FitResult fit;
  ASSERT_NO_THROW(fit = fit_scaling_law(runs, o));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  SCOPED_TRACE(::testing::Message() << "solver " << fit.solver << " took " << seconds << " s");
  ASSERT_EQ(fit.schemes.count("quartet"), 1u);
  // Ceres's true Huber fit recovers both within 0.04; the Eigen fallback's reweighted residuals missed
  // eff_d by 0.043 in about 1 of 200 draws (366 repeats), so it gets 0.05. Some draws do not pin eff_d
  // down at all (both solvers agree on a point 0.058 from the truth, seed 8765704044092611391): the fit
  // must then say so with a bootstrap interval at least as wide as its miss, one that holds the truth.
  const double tol = GetParam() == FitSolver::ceres ? 0.04 : 0.05;
  const auto& q = fit.schemes.at("quartet");
  for (auto [name, got, want, iv] : {std::tuple{"eff_n", q.eff.eff_n, truth.eff_n, q.eff_n_interval},
                                     std::tuple{"eff_d", q.eff.eff_d, truth.eff_d, q.eff_d_interval}}) {
    SCOPED_TRACE(::testing::Message() << name << " interval [" << iv.lo << ", " << iv.hi << "]");
    EXPECT_NEAR(got, want, std::max(tol, iv.hi - iv.lo));
    if (std::abs(got - want) > tol) {
      EXPECT_GE(want, iv.lo);
      EXPECT_LE(want, iv.hi);
    }
  }
  EXPECT_DOUBLE_EQ(fit.schemes.at("bf16").eff.eff_n, 1.0);
  EXPECT_LT(fit.rms_log_residual, 1e-3);
  EXPECT_GE(fit.bootstrap_samples, 10);
  EXPECT_TRUE(fit.has_intervals);
  const auto& iv = fit.schemes.at("quartet").eff_n_interval;
  EXPECT_LE(iv.lo, iv.hi);
  // Outside the fitted range (30M-200M parameters): 5x and 50x larger models.
  for (auto [n, tolerance] : {std::pair{1e9, 0.01}, std::pair{1e10, 0.02}})
    for (double ratio : {20.0, 200.0}) {
      EXPECT_NEAR(predict_loss(fit.law, n, n * ratio), predict_loss(law, n, n * ratio),
                  tolerance * predict_loss(law, n, n * ratio))
          << "n " << n << " ratio " << ratio;
      EXPECT_NEAR(predict_loss(fit.law, n, n * ratio, fit.schemes.at("quartet").eff),
                  predict_loss(law, n, n * ratio, truth), tolerance * predict_loss(law, n, n * ratio, truth))
          << "n " << n << " ratio " << ratio;
    }
  // The JSON contract round-trips.
  const nlohmann::json j = fit_to_json(fit);
  for (const char* k : {"A", "alpha", "B", "beta", "E", "gamma", "schemes"}) EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_TRUE(j["schemes"]["quartet"].contains("eff_n"));
  EXPECT_TRUE(j["schemes"]["quartet"]["intervals"].contains("eff_d"));
  // Every base constant has a 95% interval [lo, hi] in the JSON that holds the fitted value.
  ASSERT_TRUE(j["intervals"].is_object()) << j["intervals"].dump();
  for (const char* k : {"A", "alpha", "B", "beta", "E", "gamma"}) {
    ASSERT_TRUE(j["intervals"].contains(k)) << k;
    const auto& i = j["intervals"][k];
    ASSERT_TRUE(i.is_array() && i.size() == 2 && i[0].is_number() && i[1].is_number()) << k << " " << i.dump();
    const double lo = i[0], hi = i[1], v = j[k];
    EXPECT_LE(lo, v) << k;
    EXPECT_LE(v, hi) << k;
  }
  const FitResult back = fit_from_json(j);
  EXPECT_DOUBLE_EQ(back.law.alpha, fit.law.alpha);
  EXPECT_DOUBLE_EQ(scheme_efficiency(back, "quartet").eff_d, fit.schemes.at("quartet").eff.eff_d);
}

// A fresh draw each run (test_seed.hpp: a failure prints how to replay it).
TEST_P(FitRecovery, RecoversEfficienciesAndExtrapolates) { check_recovery(nibble::testing::fresh_seed()); }

// Two draws whose optima lie 470-560 iterations along the flat (A, alpha) / (B, beta) valleys: the
// base fit recovers them only with its 2000-iteration limit (docs/reliability/README.md).
TEST_P(FitRecovery, DrawsThatNeededMoreIterations) {
  for (uint64_t seed : {4760826396273063037ull, 13319210396199251997ull}) check_recovery(seed);
}

INSTANTIATE_TEST_SUITE_P(Solvers, FitRecovery, ::testing::ValuesIn(available_solvers()));

// Runs over a narrow range (N 30M-100M, D/N 50-200; the published grid spans 30M-200M and 25-800)
// pin the base constants down poorly: some bootstrap intervals come out wider than half their value,
// and the fit and its JSON must list those constants.
TEST(FitWarnings, NarrowRangeFlagsPoorlyDeterminedConstants) {
  const uint64_t seed = nibble::testing::fresh_seed();
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> jitter(0.0, 3e-4);
  const LawConstants truth = published_constants();
  FitOptions o;
  o.bootstrap = 30;
  o.n_starts = 16;
  o.seed = seed;
  // About 1 noisy draw in 50 this narrow lets an exponent run to its bound or no start converge, which
  // the fit reports as an error (also honest); a fresh draw then fits.
  std::optional<FitResult> fit;
  std::string refusals;
  for (int attempt = 0; attempt < 3 && !fit; ++attempt) {
    std::vector<law::Run> runs;  // law::, not gtest's Test::Run
    for (double n : {30e6, 50e6, 70e6, 100e6})
      for (double ratio : {50.0, 100.0, 200.0}) {
        law::Run r;
        r.scheme = "bf16";
        r.n = n;
        r.d = n * ratio;
        r.loss = predict_loss(truth, r.n, r.d) * std::exp(jitter(rng));
        runs.push_back(r);
      }
    try {
      fit = fit_scaling_law(runs, o);
    } catch (const std::runtime_error& e) {
      refusals += std::string("\n") + e.what();
    }
  }
  ASSERT_TRUE(fit) << "no fit in 3 draws:" << refusals;
  ASSERT_TRUE(fit->has_intervals);
  ASSERT_FALSE(fit->poorly_determined.empty());
  const std::map<std::string, double> value = {{"A", fit->law.A}, {"alpha", fit->law.alpha}, {"B", fit->law.B},
                                               {"beta", fit->law.beta}, {"E", fit->law.E}, {"gamma", fit->law.gamma}};
  for (const auto& name : fit->poorly_determined) {
    ASSERT_TRUE(value.count(name)) << name << ": only base constants without other schemes";
    const Interval i = fit->intervals.at(name);
    EXPECT_GT(i.hi - i.lo, 0.5 * std::abs(value.at(name))) << name << " is flagged but its interval is narrow";
  }
  for (const auto& [name, v] : value) {
    const auto& flagged = fit->poorly_determined;
    if (std::find(flagged.begin(), flagged.end(), name) != flagged.end()) continue;
    EXPECT_LE(fit->intervals.at(name).hi - fit->intervals.at(name).lo, 0.5 * std::abs(v)) << name << " not flagged";
  }
  const nlohmann::json j = fit_to_json(*fit);
  ASSERT_TRUE(j.contains("poorly_determined"));
  EXPECT_EQ(j["poorly_determined"].get<std::vector<std::string>>(), fit->poorly_determined);
  EXPECT_EQ(fit_from_json(j).poorly_determined, fit->poorly_determined);
}

std::vector<Run> published_grid(std::mt19937_64& rng) {
  return test::synthetic_runs(published_constants(), "bf16", {}, 1e-3, rng);
}

TEST(FitBadInput, NoBaseSchemeRunsListsSchemes) {
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  auto runs = published_grid(rng);
  FitOptions o;
  o.base_scheme = "fp32";
  try {
    fit_scaling_law(runs, o);
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("bf16"), std::string::npos) << e.what();
  }
}

TEST(FitBadInput, TooFewRunsSaysHowMany) {
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  auto runs = published_grid(rng);
  runs.resize(kMinBaseRuns - 1);
  try {
    fit_scaling_law(runs);
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("at least 7"), std::string::npos) << e.what();
  }
  auto full = published_grid(rng);
  auto fp4 = test::synthetic_runs(published_constants(), "quartet", published_quartet_efficiency(), 1e-3, rng);
  full.push_back(fp4[0]);
  full.push_back(fp4[1]);
  EXPECT_THROW(fit_scaling_law(full), std::invalid_argument);
}

TEST(FitBadInput, LossRisingWithSizeDoesNotConverge) {
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  auto runs = published_grid(rng);
  // Loss that grows with N and D is no scaling law: the fit must say so, not print constants.
  for (auto& r : runs) r.loss = 1.0 + 1e-9 * std::sqrt(r.n) + 1e-11 * std::sqrt(r.d);
  FitOptions o;
  o.bootstrap = 0;
  o.n_starts = 8;
  for (FitSolver s : available_solvers()) {
    o.solver = s;
    EXPECT_THROW(fit_scaling_law(runs, o), std::runtime_error);
  }
}

// With the base constants held (here: the true law), only the efficiencies are fitted, from the scheme's runs
// alone; the result says the constants were held and gives them no interval of this fit's making.
TEST(HeldBase, RecoversEfficienciesFromTheSchemeRunsAlone) {
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  std::uniform_real_distribution<double> u(0, 1);
  const Efficiency truth{0.5 + 0.4 * u(rng), 0.6 + 0.35 * u(rng)};
  LawConstants law = published_constants();
  law.alpha *= 0.9 + 0.2 * u(rng);
  law.E *= 0.9 + 0.2 * u(rng);
  law.source = "the drawn law";
  const auto runs = test::synthetic_runs(law, "mxfp4", truth, 3e-4, rng);  // no bf16 runs at all
  FitOptions o;
  o.held_base = law;
  o.bootstrap = 30;
  const FitResult fit = fit_scaling_law(runs, o);
  EXPECT_TRUE(fit.base_held);
  EXPECT_EQ(fit.law.alpha, law.alpha);
  EXPECT_EQ(fit.law.E, law.E);
  EXPECT_NE(fit.law.source.find("held (not fitted): the drawn law"), std::string::npos) << fit.law.source;
  EXPECT_NEAR(fit.schemes.at("mxfp4").eff.eff_n, truth.eff_n, 0.02);
  EXPECT_NEAR(fit.schemes.at("mxfp4").eff.eff_d, truth.eff_d, 0.02);
  EXPECT_EQ(fit.schemes.at("bf16").eff.eff_n, 1.0);
  EXPECT_EQ(fit.schemes.at("bf16").runs, 0);
  ASSERT_TRUE(fit.has_intervals);
  EXPECT_EQ(fit.intervals.at("alpha").lo, law.alpha);
  EXPECT_EQ(fit.intervals.at("alpha").hi, law.alpha);
  const auto& iv = fit.schemes.at("mxfp4").eff_n_interval;
  EXPECT_LT(iv.lo, iv.hi);
  EXPECT_LT(fit.rms_log_residual, 1e-3);
  const nlohmann::json j = fit_to_json(fit);
  EXPECT_EQ(j.at("base_constants"), "held");
  EXPECT_TRUE(fit_from_json(j).base_held);
  EXPECT_FALSE(fit_from_json(fit_to_json(fit_scaling_law(published_grid(rng)))).base_held);
}

// Held constants from another dataset: a run at or below their E cannot be described; the error names the run
// and the way out.
TEST(HeldBase, RefusesRunsBelowTheHeldE) {
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  auto runs = test::synthetic_runs(published_constants(), "quartet", {0.65, 0.95}, 1e-3, rng);
  runs[4].loss = published_constants().E * 0.8;
  runs[4].line = 9;
  FitOptions o;
  o.held_base = published_constants();
  try {
    fit_scaling_law(runs, o);
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("line 9"), std::string::npos) << m;
    EXPECT_NE(m.find("irreducible loss E"), std::string::npos) << m;
    EXPECT_NE(m.find("leave out --hold-base"), std::string::npos) << m;
  }
}

// The interval level is an option: with the same seed (the same bootstrap samples) the 90% intervals lie inside
// the 95% ones; the level travels in the JSON; a level outside (0, 1) is refused.
TEST(FitIntervals, ConfidenceLevelNestsAndRoundTrips) {
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  auto runs = published_grid(rng);
  const auto fp4 = test::synthetic_runs(published_constants(), "quartet", {0.65, 0.95}, 1e-3, rng);
  runs.insert(runs.end(), fp4.begin(), fp4.end());
  FitOptions o;
  // 32 starts, as FitRecovery: with 8, about one draw in 150 left the base fit's best start at beta's bound
  // (NIBBLE_TEST_SEED=13737777587899742729), which this test of the interval level is not about.
  o.n_starts = 32;
  o.bootstrap = 40;
  const FitResult wide = fit_scaling_law(runs, o);
  o.confidence = 0.9;
  const FitResult narrow = fit_scaling_law(runs, o);
  ASSERT_TRUE(wide.has_intervals && narrow.has_intervals);
  EXPECT_EQ(narrow.confidence, 0.9);
  EXPECT_EQ(narrow.bootstrap_samples, wide.bootstrap_samples);
  double shrink = 0;
  for (const auto& [w, n] : {std::pair{wide.schemes.at("quartet").eff_n_interval, narrow.schemes.at("quartet").eff_n_interval},
                             std::pair{wide.schemes.at("quartet").eff_d_interval, narrow.schemes.at("quartet").eff_d_interval},
                             std::pair{wide.intervals.at("alpha"), narrow.intervals.at("alpha")}}) {
    EXPECT_LE(w.lo, n.lo);
    EXPECT_LE(n.lo, n.hi);
    EXPECT_LE(n.hi, w.hi);
    shrink += (w.hi - w.lo) - (n.hi - n.lo);
  }
  EXPECT_GT(shrink, 0);
  EXPECT_EQ(fit_to_json(narrow).at("confidence"), 0.9);
  EXPECT_EQ(fit_from_json(fit_to_json(narrow)).confidence, 0.9);
  nlohmann::json bad = fit_to_json(narrow);
  bad["confidence"] = 95;
  EXPECT_THROW(fit_from_json(bad), std::invalid_argument);
  o.confidence = 1.0;
  EXPECT_THROW(fit_scaling_law(runs, o), std::invalid_argument);
}

TEST(FitJson, MissingFieldNamesIt) {
  nlohmann::json j = {{"A", 1.0}, {"alpha", 0.5}, {"B", 1.0}, {"beta", 0.5}, {"E", 1.0}};
  try {
    fit_from_json(j, "x.json");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("gamma"), std::string::npos) << e.what();
  }
  j["gamma"] = -1.0;
  EXPECT_THROW(fit_from_json(j), std::invalid_argument);
  j["gamma"] = 0.3;
  EXPECT_NO_THROW(fit_from_json(j));
  EXPECT_THROW(scheme_efficiency(fit_from_json(j), "quartet"), std::invalid_argument);
}

TEST(FitJson, RunsDataSummarisesTheStudyColumns) {
  std::istringstream csv(
      "scheme,n,d,loss,size,corpus,gpu,path_kind,finished_utc\n"
      "bf16,1e6,1e7,2.0,xs,linux-6.1-bytes,NVIDIA H100 80GB HBM3,torch,2026-12-07T20:01:02Z\n"
      "quartet,2e6,2e7,1.9,s,linux-6.1-bytes,NVIDIA H100 80GB HBM3,cuda,2026-12-08T01:00:00Z\n"
      "bf16,2e6,4e7,1.8,s,linux-6.1-bytes,NVIDIA H200,torch,2026-12-06T23:59:59Z\n");
  FitResult fit;
  for (auto& r : parse_runs_csv(csv)) fit.residuals.push_back({r, r.loss, 0.0});
  const nlohmann::json j = fit_to_json(fit);
  ASSERT_TRUE(j.contains("runs_data")) << j.dump();
  const auto& d = j["runs_data"];
  EXPECT_EQ(d["size"], nlohmann::json({"s", "xs"}));
  EXPECT_EQ(d["corpus"], nlohmann::json({"linux-6.1-bytes"}));
  EXPECT_EQ(d["gpu"], nlohmann::json({"NVIDIA H100 80GB HBM3", "NVIDIA H200"}));
  EXPECT_EQ(d["path_kind"], nlohmann::json({"cuda", "torch"}));
  EXPECT_EQ(d["dates"], nlohmann::json({"2026-12-06", "2026-12-08"}));
  // Runs without those columns: no runs_data at all (nothing is made up).
  std::istringstream bare("scheme,n,d,loss\nbf16,1e6,1e7,2.0\n");
  FitResult plain;
  for (auto& r : parse_runs_csv(bare)) plain.residuals.push_back({r, r.loss, 0.0});
  EXPECT_FALSE(fit_to_json(plain).contains("runs_data"));
}

TEST(HuberRho, QuadraticInsideLinearOutside) {
  EXPECT_DOUBLE_EQ(detail::huber_rho(0.5e-4, 1e-4), 0.25e-8);
  EXPECT_DOUBLE_EQ(detail::huber_rho(-3e-4, 1e-4), 2 * 1e-4 * 3e-4 - 1e-8);
}

}  // namespace
}  // namespace nibble::law

// The runs CSV: columns, metadata, quoting, and every kind of bad row.
namespace nibble::law {
namespace {

std::vector<Run> parse(const std::string& text) {
  std::istringstream in(text);
  return parse_runs_csv(in, "t.csv");
}

std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(RunsCsv, ReadsColumnsInAnyOrderAndKeepsMetadata) {
  const auto runs = parse("# comment\nLoss,d,note,N,scheme\n3.25,2e9,\"lr=3e-4, warm\",1e8,bf16\n\n2.9,4e9,x,2e8,quartet\r\n");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].scheme, "bf16");
  EXPECT_EQ(runs[0].n, 1e8);
  EXPECT_EQ(runs[0].d, 2e9);
  EXPECT_EQ(runs[0].loss, 3.25);
  EXPECT_EQ(runs[0].metadata.at("note"), "lr=3e-4, warm");
  EXPECT_EQ(runs[0].line, 3);
  EXPECT_EQ(runs[1].scheme, "quartet");
  EXPECT_EQ(runs[1].loss, 2.9);
}

TEST(RunsCsv, MissingColumnsAreNamed) {
  const std::string e = error_of("scheme,n,tokens,loss\nbf16,1e8,2e9,3.2\n");
  EXPECT_NE(e.find("missing column(s) d"), std::string::npos) << e;
  const std::string e2 = error_of("model,params\nx,1\n");
  EXPECT_NE(e2.find("scheme, n, d, loss"), std::string::npos) << e2;
}

TEST(RunsCsv, NonPositiveOrUnparsableValuesAreRejectedWithTheLine) {
  for (const char* bad : {"0", "-1e8", "nan", "inf", "abc", "1e8x", ""}) {
    for (int col = 0; col < 3; ++col) {
      std::string vals[3] = {"1e8", "2e9", "3.1"};
      vals[col] = bad;
      const std::string e = error_of("scheme,n,d,loss\nbf16,1e8,2e9,3.3\nbf16," + vals[0] + "," + vals[1] + "," + vals[2] + "\n");
      EXPECT_NE(e.find("line 3"), std::string::npos) << bad << " col " << col << ": " << e;
    }
  }
}

TEST(RunsCsv, StructuralProblems) {
  EXPECT_NE(error_of("").find("empty"), std::string::npos);
  EXPECT_NE(error_of("scheme,n,d,loss\n").find("no runs"), std::string::npos);
  EXPECT_NE(error_of("scheme,n,d,loss\nbf16,1e8,2e9\n").find("3 fields"), std::string::npos);
  EXPECT_NE(error_of("scheme,n,d,loss\n,1e8,2e9,3\n").find("empty scheme"), std::string::npos);
  EXPECT_THROW(read_runs_csv("/nonexistent/runs.csv"), std::invalid_argument);
}

TEST(RunsCsv, ShippedExampleParses) {
  const auto runs = read_runs_csv("data/law/example_runs.csv");
  EXPECT_GE(runs.size(), 30u);
  EXPECT_TRUE(runs.front().metadata.count("tokens_per_param"));
}

}  // namespace
}  // namespace nibble::law
