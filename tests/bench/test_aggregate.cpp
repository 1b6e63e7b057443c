// Aggregation arithmetic on hand-made results with fresh random times: every sum, speedup and
// overhead recomputed here the long way.
#include "handmade_result.hpp"
#include "nibble/bench/aggregate.hpp"
#include "test_seed.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace nibble::bench {
namespace {

using nibble::testing::fresh_rng;

// The long way: one recipe/mode's per-layer time in one pass (gemm + quant, times count).
double pass_ms(const BenchResult& b, const std::string& recipe, Mode mode, const std::string& pass) {
  double sum = 0;
  for (const Row& r : b.rows)
    if (r.recipe == recipe && r.mode == mode && r.pass == pass && r.layer != "lm_head")
      sum += (r.gemm.median_ms + r.quant_ms) * double(r.count);
  return sum;
}

TEST(Aggregate, PassSumsLayerAndModelTotals) {
  auto rng = fresh_rng();
  BenchResult b = testing::handmade_result(rng);
  auto summaries = summarize(b);
  ASSERT_EQ(summaries.size(), 6u);  // 3 recipes x 2 modes
  for (const RecipeSummary& s : summaries) {
    const double f = pass_ms(b, s.recipe, s.mode, "fprop");
    const double d = pass_ms(b, s.recipe, s.mode, "dgrad");
    const double w = pass_ms(b, s.recipe, s.mode, "wgrad");
    EXPECT_NEAR(s.ms.fprop_ms, f, 1e-12);
    EXPECT_NEAR(s.ms.dgrad_ms, d, 1e-12);
    EXPECT_NEAR(s.ms.wgrad_ms, w, 1e-12);
    EXPECT_NEAR(s.layer_ms, f + d + w, 1e-12);
    EXPECT_NEAR(s.gemm.total_ms() + s.quant.total_ms(), s.layer_ms, 1e-12);
    double lm = 0;
    for (const Row& r : b.rows)
      if (r.recipe == s.recipe && r.mode == s.mode && r.layer == "lm_head") lm = r.total_ms;
    EXPECT_GT(lm, 0);
    EXPECT_NEAR(s.once_per_model_ms, lm, 1e-12);
    EXPECT_NEAR(s.model_ms, (f + d + w) * 7 + lm, 1e-9);
    if (s.mode == Mode::pre_quantized) {
      EXPECT_EQ(s.quant.total_ms(), 0.0);
    }
  }
}

TEST(Aggregate, SpeedupsAndOverhead) {
  auto rng = fresh_rng();
  BenchResult b = testing::handmade_result(rng);
  auto summaries = summarize(b);
  for (Mode mode : {Mode::pre_quantized, Mode::step}) {
    const RecipeSummary* bf16 = find_summary(summaries, "bf16", mode);
    const RecipeSummary* fp8 = find_summary(summaries, "fp8-delayed", mode);
    const RecipeSummary* q = find_summary(summaries, "quartet", mode);
    ASSERT_TRUE(bf16 && fp8 && q);
    EXPECT_DOUBLE_EQ(bf16->speedup_vs_bf16, 1.0);
    EXPECT_NEAR(q->speedup_vs_bf16, bf16->layer_ms / q->layer_ms, 1e-12);
    EXPECT_NEAR(q->speedup_vs_baseline, fp8->layer_ms / q->layer_ms, 1e-12);
    EXPECT_DOUBLE_EQ(fp8->speedup_vs_baseline, 1.0);
    EXPECT_NEAR(q->forward_speedup_vs_bf16, bf16->ms.fprop_ms / q->ms.fprop_ms, 1e-12);
    EXPECT_NEAR(q->backward_speedup_vs_bf16,
                (bf16->ms.dgrad_ms + bf16->ms.wgrad_ms) / (q->ms.dgrad_ms + q->ms.wgrad_ms), 1e-12);
  }
  const RecipeSummary* pre = find_summary(summaries, "quartet", Mode::pre_quantized);
  const RecipeSummary* step = find_summary(summaries, "quartet", Mode::step);
  EXPECT_TRUE(std::isnan(pre->quant_overhead_ms));
  EXPECT_NEAR(step->quant_overhead_ms, step->layer_ms - pre->layer_ms, 1e-12);
  EXPECT_EQ(step->path, "emulated-exact (fp8)");
  EXPECT_FALSE(step->mixed_paths);
}

TEST(Aggregate, Bf16RunOnceServesEveryMode) {
  auto rng = fresh_rng();
  BenchResult b = testing::handmade_result(rng, {"bf16"}, {Mode::pre_quantized});
  BenchResult fp8 = testing::handmade_result(rng, {"fp8-current"}, {Mode::step});
  b.rows.insert(b.rows.end(), fp8.rows.begin(), fp8.rows.end());
  b.baseline_recipe = "bf16";
  auto summaries = summarize(b);
  const RecipeSummary* bf16 = find_summary(summaries, "bf16", Mode::pre_quantized);
  const RecipeSummary* s = find_summary(summaries, "fp8-current", Mode::step);
  ASSERT_TRUE(bf16 && s);
  EXPECT_NEAR(s->speedup_vs_bf16, bf16->layer_ms / s->layer_ms, 1e-12);
  EXPECT_NEAR(s->speedup_vs_baseline, s->speedup_vs_bf16, 1e-12);
  EXPECT_TRUE(std::isnan(s->quant_overhead_ms));  // no pre-quantized fp8-current run
}

TEST(Aggregate, FailedRowsAreSkippedAndSpeedupsWithheld) {
  auto rng = fresh_rng();
  BenchResult b = testing::handmade_result(rng);
  Row* victim = nullptr;
  for (Row& r : b.rows)
    if (r.recipe == "quartet" && r.mode == Mode::step && r.pass == "wgrad") victim = &r;
  ASSERT_TRUE(victim);
  victim->error = "out of memory: needs 3.1 GiB";
  auto summaries = summarize(b);
  const RecipeSummary* q = find_summary(summaries, "quartet", Mode::step);
  EXPECT_EQ(q->failed_rows, 1);
  EXPECT_TRUE(std::isnan(q->speedup_vs_bf16));
  EXPECT_NEAR(q->ms.wgrad_ms,
              pass_ms(b, "quartet", Mode::step, "wgrad") - victim->total_ms * double(victim->count),
              1e-12);
  EXPECT_FALSE(std::isnan(find_summary(summaries, "fp8-delayed", Mode::step)->speedup_vs_bf16));
}

TEST(Aggregate, MixedPathsPickTheDominantByFlops) {
  auto rng = fresh_rng();
  BenchResult b = testing::handmade_result(rng, {"mxfp4"}, {Mode::pre_quantized});
  for (Row& r : b.rows) r.path = path::emulated_exact_fp8;
  b.rows[0].path = path::emulated_exact_bf16;  // one small GEMM fell back
  auto s = summarize(b).at(0);
  EXPECT_TRUE(s.mixed_paths);
  EXPECT_EQ(s.path, "emulated-exact (fp8)");
}

TEST(Aggregate, FpropDgradAsymmetryAndPerLayer) {
  auto rng = fresh_rng();
  BenchResult b = testing::handmade_result(rng);
  auto asym = fprop_dgrad_asymmetry(b);
  ASSERT_EQ(asym.size(), 2u * 3u * 2u);  // qkv, mlp_up (lm_head has no dgrad here) x recipes x modes
  for (const auto& a : asym) EXPECT_NEAR(a.dgrad_over_fprop, a.dgrad_ms / a.fprop_ms, 1e-12);
  auto layers = per_linear_layer(b);
  for (const auto& l : layers)
    if (l.layer != "lm_head") {
      EXPECT_GT(l.ms.fprop_ms * l.ms.dgrad_ms * l.ms.wgrad_ms, 0);
    }
}

TEST(Aggregate, TrainingSpeedupFormula) {
  EXPECT_DOUBLE_EQ(training_speedup(1, 1), 1.0);
  EXPECT_NEAR(training_speedup(2, 1), 1.0 / (1.0 / 6 + 2.0 / 3), 1e-15);
  EXPECT_TRUE(std::isnan(training_speedup(0, 1)));
}

}  // namespace
}  // namespace nibble::bench

namespace nibble::bench {
namespace {

TEST(RowHelpers, FinishRowAndBounds) {
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  BenchResult b = testing::handmade_result(rng, {"fp8-current"}, {Mode::pre_quantized, Mode::step});
  for (Row& r : b.rows) {
    r.total_ms = -1;  // poison: finish_row must overwrite
    r.tflops = -1;
    finish_row(r, 1979.0);
    EXPECT_DOUBLE_EQ(r.total_ms, r.gemm.median_ms + r.quant_ms);
    EXPECT_NEAR(r.tflops, r.flops / (r.total_ms * 1e-3) / 1e12, 1e-9);
    EXPECT_NEAR(r.pct_of_peak, 100.0 * r.flops / (r.gemm.median_ms * 1e-3) / 1e12 / 1979.0, 1e-9);
    r.bound_ms = -1;
  }
  b.copy_bandwidth_gbs = 4000;
  fill_bounds(b);
  for (const Row& r : b.rows) {
    if (r.mode != Mode::step) {
      EXPECT_DOUBLE_EQ(r.bound_ms, r.gemm.median_ms);
      continue;
    }
    const Row* pre = nullptr;
    for (const Row& p : b.rows)
      if (p.mode == Mode::pre_quantized && p.layer == r.layer && p.pass == r.pass) pre = &p;
    ASSERT_TRUE(pre);
    EXPECT_NEAR(r.bound_ms, pre->gemm.median_ms + r.quant_bytes / 4e12 * 1e3, 1e-12);
  }
  b.copy_bandwidth_gbs = 0;
  EXPECT_THROW(fill_bounds(b), std::invalid_argument);
}

}  // namespace
}  // namespace nibble::bench
