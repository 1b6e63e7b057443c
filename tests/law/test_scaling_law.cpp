// The law itself: published constants, the formula by hand, what the efficiencies mean, bad input. Then the
// compute-normalized planner built on it checked by hand, the published FP4:FP4 threshold, and the optimality map.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

#include "nibble/law/bench_speedups.hpp"
#include "nibble/law/planner.hpp"
#include "nibble/law/reach.hpp"
#include "nibble/law/scaling_law.hpp"
#include "test_seed.hpp"

namespace nibble::law {
namespace {

TEST(ScalingLaw, PublishedConstantsAreSpecSection7) {
  const LawConstants c = published_constants();
  EXPECT_EQ(c.A, 1.52e5);
  EXPECT_EQ(c.alpha, 0.589);
  EXPECT_EQ(c.B, 5.25e5);
  EXPECT_EQ(c.beta, 0.544);
  EXPECT_EQ(c.E, 1.35);
  EXPECT_EQ(c.gamma, 0.274);
  EXPECT_NE(c.source.find("published"), std::string::npos);
  EXPECT_EQ(published_quartet_efficiency().eff_n, 0.65);
  EXPECT_EQ(published_quartet_efficiency().eff_d, 0.95);
}

TEST(ScalingLaw, MatchesTheFormulaOnRandomPoints) {
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  std::uniform_real_distribution<double> log_n(std::log(1e7), std::log(1e12)), ratio(1, 3000), eff(0.3, 1.0);
  const LawConstants c = published_constants();
  for (int i = 0; i < 200; ++i) {
    const double n = std::exp(log_n(rng)), d = n * ratio(rng);
    const Efficiency e{eff(rng), eff(rng)};
    const double by_hand = std::pow(c.A / std::pow(n * e.eff_n, c.alpha) + c.B / std::pow(d * e.eff_d, c.beta), c.gamma) + c.E;
    EXPECT_NEAR(predict_loss(c, n, d, e), by_hand, 1e-12 * by_hand);
    // An efficiency is exactly a rescaling of N or D.
    EXPECT_NEAR(predict_loss(c, n, d, e), predict_loss(c, n * e.eff_n, d * e.eff_d), 1e-12 * by_hand);
    EXPECT_GT(predict_loss(c, n, d, e), c.E);
    // More parameters or more tokens never hurt.
    EXPECT_LT(predict_loss(c, 2 * n, d, e), predict_loss(c, n, d, e));
    EXPECT_LT(predict_loss(c, n, 2 * d, e), predict_loss(c, n, d, e));
    EXPECT_NEAR(reducible_term(c, n, d, e), std::pow(by_hand - c.E, 1 / c.gamma), 1e-9 * reducible_term(c, n, d, e));
  }
}

TEST(ScalingLaw, RejectsBadInputNamingTheField) {
  const LawConstants c = published_constants();
  for (double bad : {0.0, -1.0, double(NAN), double(INFINITY)}) {
    EXPECT_THROW(predict_loss(c, bad, 1e9), std::invalid_argument);
    EXPECT_THROW(predict_loss(c, 1e8, bad), std::invalid_argument);
    EXPECT_THROW(predict_loss(c, 1e8, 1e9, {bad, 1}), std::invalid_argument);
    EXPECT_THROW(predict_loss(c, 1e8, 1e9, {1, bad}), std::invalid_argument);
  }
  try {
    predict_loss(c, -5, 1e9);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("N (non-embedding parameters)"), std::string::npos) << e.what();
  }
  LawConstants bad = c;
  bad.alpha = -0.5;
  EXPECT_THROW(predict_loss(bad, 1e8, 1e9), std::invalid_argument);
  bad = c;
  bad.E = -1;
  EXPECT_THROW(validate(bad), std::invalid_argument);
}

TEST(Planner, TrainingSpeedupWeighsBackwardTwice) {
  EXPECT_DOUBLE_EQ(training_speedup(1, 1), 1);
  EXPECT_DOUBLE_EQ(training_speedup(2, 2), 2);
  EXPECT_DOUBLE_EQ(training_speedup(2, 1), 1.2);  // 1 / (1/6 + 2/3)
  EXPECT_DOUBLE_EQ(training_speedup(1, 2), 1.5);  // 1 / (1/3 + 1/3)
}

TEST(Planner, NoSpeedupAndNoLossMeansEveryoneTies) {
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  std::uniform_real_distribution<double> log_n(std::log(1e8), std::log(1e11)), ratio(5, 3000);
  for (int i = 0; i < 50; ++i) {
    const double n = std::exp(log_n(rng));
    const Plan p = plan_precision(published_constants(), {1, 1}, {1, 1, "none"}, n, n * ratio(rng));
    for (const auto& s : p.schemes) EXPECT_DOUBLE_EQ(s.loss, p.schemes[0].loss) << s.name;
    EXPECT_DOUBLE_EQ(p.margin, 0);
  }
}

TEST(Planner, EachSchemeReachesTheLawAtItsEffectiveBudget) {
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  std::uniform_real_distribution<double> sp(0.7, 3.0), eff(0.4, 1.0);
  const LawConstants law = published_constants();
  for (int i = 0; i < 50; ++i) {
    const Speedups s{sp(rng), sp(rng), "random"};
    const Efficiency e{eff(rng), eff(rng)};
    const double n = 3e9, d = 6e10;
    const Plan p = plan_precision(law, e, s, n, d);
    const double tr_fp4_fwd = training_speedup(s.fwd, 1), tr_fp4_bwd = training_speedup(1, s.bwd),
                 tr_all = training_speedup(s.fwd, s.bwd);
    EXPECT_DOUBLE_EQ(p.schemes[0].loss, predict_loss(law, n, d));
    EXPECT_DOUBLE_EQ(p.schemes[1].loss, predict_loss(law, n * s.fwd, d * tr_fp4_fwd / s.fwd, {e.eff_n, 1}));
    EXPECT_DOUBLE_EQ(p.schemes[2].loss, predict_loss(law, n, d * tr_fp4_bwd, {1, e.eff_d}));
    EXPECT_DOUBLE_EQ(p.schemes[3].loss, predict_loss(law, n * s.fwd, d * tr_all / s.fwd, e));
    for (const auto& o : p.schemes) EXPECT_LE(p.schemes[p.best].loss, o.loss);
    EXPECT_GE(p.margin, 0);
    const nlohmann::json j = plan_to_json(p);
    EXPECT_EQ(j["best"], kSchemeNames[p.best]);
    for (int k = 0; k < 4; ++k) EXPECT_DOUBLE_EQ(j["schemes"][kSchemeNames[k]]["loss"].get<double>(), p.schemes[k].loss);
    EXPECT_FALSE(explain_plan(p).empty());
  }
}

TEST(Planner, DoublingNBehavesAsTheLawSays) {
  // With only the parameter term (B negligible, gamma 1, E 0) loss is A / N^alpha: an FP4 forward
  // that doubles N at full efficiency divides the loss by exactly 2^alpha.
  const LawConstants law{1.52e5, 0.589, 1e-30, 0.544, 0.0, 1.0, "parameter term only"};
  const Plan p = plan_precision(law, {1, 1}, {2, 1, "by hand"}, 1e9, 2e10);
  EXPECT_NEAR(p.schemes[1].loss / p.schemes[0].loss, std::pow(2.0, -0.589), 1e-12);
  EXPECT_EQ(p.best, 1);
  // At effN 0.5 the doubling is exactly cancelled (the data term is negligible): a tie.
  const Plan half = plan_precision(law, {0.5, 1}, {2, 1, "by hand"}, 1e9, 2e10);
  EXPECT_NEAR(half.schemes[1].loss, half.schemes[0].loss, 1e-12 * half.schemes[0].loss);
  // Full law: FP4:FP4 with 2x/2x and effN 0.5, effD 1 trains (2N * 0.5, D) = (N, D): a tie with FP8:FP8.
  const Plan full = plan_precision(published_constants(), {0.5, 1}, {2, 2, "by hand"}, 1e9, 2e10);
  EXPECT_NEAR(full.schemes[3].loss, full.schemes[0].loss, 1e-12);
}

TEST(Planner, PublishedFp4Fp4ThresholdIsSmall) {
  // Published constants, 2x/2x, effN 0.65, effD 0.95: FP4:FP4 trains (1.3 N, 0.95 D), so it wins
  // once the data term is small enough: D/N above c^(1/beta) N^(alpha/beta - 1) with
  // c = B (0.95^-beta - 1) / (A (1 - 1.3^-alpha)).
  const LawConstants L = published_constants();
  const Efficiency e = published_quartet_efficiency();
  const Speedups sp{2, 2, "published 2x/2x"};
  const double c = L.B * (std::pow(0.95, -L.beta) - 1) / (L.A * (1 - std::pow(1.3, -L.alpha)));
  for (double n : {1e8, 1e9, 1e10, 1e11}) {
    const Fp4Threshold t = fp4_fp4_threshold(L, e, sp, n);
    ASSERT_EQ(t.kind, Fp4Threshold::wins_above) << n;
    EXPECT_NEAR(t.tokens_per_param, std::pow(c, 1 / L.beta) * std::pow(n, L.alpha / L.beta - 1),
                1e-9 * t.tokens_per_param);
    // "A small threshold": a few tokens per parameter, far below Chinchilla's 20.
    EXPECT_GT(t.tokens_per_param, 1.0);
    EXPECT_LT(t.tokens_per_param, 5.0);
    auto fp4_wins = [&](double ratio) {
      const Plan p = plan_precision(L, e, sp, n, n * ratio);
      return p.schemes[3].loss < p.schemes[0].loss;
    };
    EXPECT_FALSE(fp4_wins(t.tokens_per_param / 1.01)) << n;
    EXPECT_TRUE(fp4_wins(t.tokens_per_param * 1.01)) << n;
    for (double ratio : {10.0, 20.0, 100.0, 2000.0}) EXPECT_TRUE(fp4_wins(ratio)) << n << " " << ratio;
  }
  EXPECT_NEAR(fp4_fp4_threshold(L, e, sp, 1e9).tokens_per_param, 2.75, 0.01);
}

TEST(Planner, ThresholdKindsAtTheExtremes) {
  const LawConstants L = published_constants();
  // No quality loss and a real speedup: FP4 wins everywhere.
  EXPECT_EQ(fp4_fp4_threshold(L, {1, 1}, {2, 2, ""}, 1e9).kind, Fp4Threshold::always);
  // FP4 slower than FP8 and lossy: never.
  EXPECT_EQ(fp4_fp4_threshold(L, {0.65, 0.95}, {0.5, 0.5, ""}, 1e9).kind, Fp4Threshold::never);
  // Bigger model but fewer effective tokens (forward fast, backward slow): wins only when data is plentiful.
  EXPECT_EQ(fp4_fp4_threshold(L, {1, 1}, {2, 0.8, ""}, 1e9).kind, Fp4Threshold::wins_above);
}

TEST(Planner, RejectsBadSpeedups) {
  for (double bad : {0.0, -2.0, double(NAN)}) {
    EXPECT_THROW(plan_precision(published_constants(), {1, 1}, {bad, 2, ""}, 1e9, 1e10), std::invalid_argument);
    EXPECT_THROW(plan_precision(published_constants(), {1, 1}, {2, bad, ""}, 1e9, 1e10), std::invalid_argument);
  }
  EXPECT_THROW(plan_precision(published_constants(), {1, 1}, {2, 2, ""}, -1, 1e10), std::invalid_argument);
}

}  // namespace
}  // namespace nibble::law

// The optimality map: every cell is the planner's answer; the SVG and CSV say what was drawn.
namespace nibble::law {
namespace {

size_t count(const std::string& s, const std::string& what) {
  size_t c = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++c;
  return c;
}

TEST(OptimalityMap, CellsAreThePlannersAnswer) {
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  std::uniform_real_distribution<double> sp(1.0, 2.5), eff(0.5, 1.0);
  const Speedups s{sp(rng), sp(rng), "random <test> & co"};
  const Efficiency e{eff(rng), eff(rng)};
  MapGridSpec g;
  g.n_steps = 7;
  g.ratio_steps = 5;
  const OptimalityMap m = compute_optimality_map(published_constants(), e, "random", s, g);
  ASSERT_EQ(m.cells.size(), 35u);
  EXPECT_DOUBLE_EQ(m.cells.front().n, 1e8);
  EXPECT_DOUBLE_EQ(m.cells.front().tokens_per_param, 10);
  EXPECT_NEAR(m.cells.back().n, 1e11, 1e-3);
  EXPECT_NEAR(m.cells.back().tokens_per_param, 2000, 1e-9);
  for (const auto& c : m.cells) {
    const Plan p = plan_precision(published_constants(), e, s, c.n, c.n * c.tokens_per_param);
    EXPECT_EQ(c.best, p.best);
    EXPECT_EQ(c.loss[3], p.schemes[3].loss);
  }
  const std::string csv = optimality_map_csv(m);
  EXPECT_EQ(count(csv, "\n"), 36u);
  EXPECT_EQ(csv.rfind("n,tokens_per_param,d,loss_fp8:fp8,loss_fp4:fp8,loss_fp8:fp4,loss_fp4:fp4,best\n", 0), 0u);
  const std::string svg = optimality_map_svg(m);
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_EQ(count(svg, "<title>"), 35u);
  EXPECT_NE(svg.find("A=1.52e+05"), std::string::npos);
  EXPECT_NE(svg.find("random &lt;test&gt; &amp; co"), std::string::npos);  // escaped, so the SVG stays valid
  EXPECT_EQ(svg.find("<test>"), std::string::npos);
  EXPECT_EQ(svg.find("http://", 60), std::string::npos);  // nothing to fetch
}

TEST(OptimalityMap, PublishedDefaultsNeverPickFp8Fp8InTheMappedRange) {
  // With 2x/2x, effN 0.65, effD 0.95 the FP4:FP4 threshold is a few tokens/param: above D/N = 10
  // some FP4 scheme always beats FP8:FP8.
  const OptimalityMap m =
      compute_optimality_map(published_constants(), published_quartet_efficiency(), "published", Speedups{});
  EXPECT_EQ(m.cells.size(), 31u * 31u);
  EXPECT_TRUE(std::none_of(m.cells.begin(), m.cells.end(), [](const MapCell& c) { return c.best == 0; }));
  for (const auto& c : m.cells) EXPECT_LT(c.loss[3], c.loss[0]);
}

TEST(OptimalityMap, RejectsBadGrids) {
  const auto law = published_constants();
  MapGridSpec g;
  g.n_min = 1e11;
  g.n_max = 1e8;
  EXPECT_THROW(compute_optimality_map(law, {1, 1}, "", Speedups{}, g), std::invalid_argument);
  g = {};
  g.ratio_min = 0;
  EXPECT_THROW(compute_optimality_map(law, {1, 1}, "", Speedups{}, g), std::invalid_argument);
  g = {};
  g.n_steps = 0;
  EXPECT_THROW(compute_optimality_map(law, {1, 1}, "", Speedups{}, g), std::invalid_argument);
}

}  // namespace
}  // namespace nibble::law

// ---- time to reach a loss (nibble law reach) ----

namespace {
nibble::law::FitResult reach_fit() {
  nibble::law::FitResult f;
  f.law = nibble::law::published_constants();
  f.base_scheme = "bf16";
  f.schemes["bf16"] = {{1.0, 1.0}, {1.0, 1.0}, {1.0, 1.0}, 10};
  f.schemes["quartet"] = {{0.64, 0.94}, {0.60, 0.68}, {0.90, 0.97}, 10};
  f.schemes["quartet-sr"] = {{0.62, 0.96}, {0.58, 0.66}, {0.93, 0.99}, 10};
  f.schemes["fp8-current"] = {{0.98, 0.99}, {0.96, 1.0}, {0.97, 1.0}, 10};
  f.schemes["nvfp4"] = {{0.7, 0.9}, {}, {}, 10};  // no bench recipe below: reported as not ranked
  return f;
}
nibble::law::RecipeSpeedups reach_speedups() {
  nibble::law::RecipeSpeedups s;
  s.speedup = {{"bf16", 1.0}, {"fp8-current", 1.65}, {"quartet", 1.32}, {"mxfp4", 1.5}};
  s.mode = "step";
  s.source = "test";
  return s;
}
}  // namespace

TEST(ReachLoss, TokensToReachInvertsTheLaw) {
  auto rng = nibble::testing::fresh_rng();
  const auto law = nibble::law::published_constants();
  std::uniform_real_distribution<double> u(0, 1);
  for (int k = 0; k < 200; ++k) {
    const double n = std::pow(10.0, 6 + 4 * u(rng)), d = n * std::pow(10.0, 0.5 + 2.5 * u(rng));
    const nibble::law::Efficiency e{0.4 + 0.6 * u(rng), 0.4 + 0.6 * u(rng)};
    const double loss = nibble::law::predict_loss(law, n, d, e);
    EXPECT_NEAR(nibble::law::tokens_to_reach(law, e, n, loss) / d, 1.0, 1e-9) << n << " " << d;
  }
  // Below the infinite-data loss of this N: unreachable.
  const double floor_loss = law.E + std::pow(law.A / std::pow(1e7, law.alpha), law.gamma);
  EXPECT_TRUE(std::isinf(nibble::law::tokens_to_reach(law, {}, 1e7, floor_loss * 0.999)));
  EXPECT_TRUE(std::isinf(nibble::law::tokens_to_reach(law, {}, 1e7, law.E)));
}

TEST(ReachLoss, RanksSchemesByTokensOverSpeedupWithIntervals) {
  const auto fit = reach_fit();
  const double n = 1e8, loss = nibble::law::predict_loss(fit.law, n, 2e9, {});
  const auto plan = nibble::law::reach_plan(fit, reach_speedups(), n, loss);
  ASSERT_EQ(plan.rows.size(), 4u);
  ASSERT_EQ(plan.skipped.size(), 1u);
  EXPECT_NE(plan.skipped[0].find("nvfp4"), std::string::npos);
  for (size_t i = 1; i < plan.rows.size(); ++i) EXPECT_LE(plan.rows[i - 1].time, plan.rows[i].time);
  for (const auto& r : plan.rows) {
    const nibble::law::Efficiency e = r.fit.eff;
    EXPECT_NEAR(r.time, nibble::law::tokens_to_reach(fit.law, e, n, loss) / r.speedup / 2e9, 1e-9) << r.scheme;
    EXPECT_LE(r.time_lo, r.time) << r.scheme;
    EXPECT_GE(r.time_hi, r.time) << r.scheme;
    if (r.scheme == "bf16") {
      EXPECT_NEAR(r.time, 1.0, 1e-9);
    }
  }
  // quartet-sr has no bench recipe of its own: it runs at quartet's speed.
  const auto sr = std::find_if(plan.rows.begin(), plan.rows.end(), [](const auto& r) { return r.scheme == "quartet-sr"; });
  ASSERT_NE(sr, plan.rows.end());
  EXPECT_EQ(sr->recipe, "quartet");
  EXPECT_DOUBLE_EQ(sr->speedup, 1.32);
  // A loss bf16 cannot reach at this N is refused with the limit named.
  EXPECT_THROW(nibble::law::reach_plan(fit, reach_speedups(), n, fit.law.E), std::invalid_argument);
}

TEST(ReachLoss, SpeedupsFromABenchJsonSummary) {
  const nlohmann::json bench = {
      {"gpu", "H100"},
      {"summary",
       {{{"recipe", "bf16"}, {"mode", "step"}, {"model_speedup_vs_bf16", 1.0}, {"path", "native"}},
        {{"recipe", "quartet"}, {"mode", "step"}, {"model_speedup_vs_bf16", 1.3}, {"path", "emulated-exact (fp8)"}},
        {{"recipe", "quartet"}, {"mode", "pre-quantized"}, {"model_speedup_vs_bf16", 1.8}},
        {{"recipe", "nvfp4"}, {"mode", "step"}, {"model_speedup_vs_bf16", nullptr}}}}};
  const auto s = nibble::law::recipe_speedups_from_bench_json(bench);
  EXPECT_EQ(s.mode, "step");
  EXPECT_DOUBLE_EQ(s.speedup.at("quartet"), 1.3);
  EXPECT_EQ(s.speedup.count("nvfp4"), 0u);  // a failed row has no speedup
  EXPECT_DOUBLE_EQ(nibble::law::recipe_speedups_from_bench_json(bench, "pre-quantized").speedup.at("quartet"), 1.8);
  EXPECT_THROW(nibble::law::recipe_speedups_from_bench_json(bench, "per-gemm"), std::invalid_argument);
  EXPECT_THROW(nibble::law::recipe_speedups_from_bench_json(nlohmann::json::object()), std::invalid_argument);
  // The workload the bench timed travels with its speedups (they are that model's, whatever N is asked about).
  EXPECT_EQ(s.workload, "");
  nlohmann::json with_model = bench;
  with_model["model"] = {{"model", {{"name", "llama-3-8b"}}}, {"tokens", 8192}};
  EXPECT_EQ(nibble::law::recipe_speedups_from_bench_json(with_model).workload, "llama-3-8b, 8192 tokens");
  with_model["model"] = {{"model", 3}, {"tokens", "many"}};  // malformed: nothing said, nothing thrown
  EXPECT_EQ(nibble::law::bench_workload_text(with_model), "");
}
