// Aggregation arithmetic on hand-made results with fresh random times: every sum, speedup and
// overhead recomputed here the long way.
#include "handmade_result.hpp"
#include "nibble/results/aggregate.hpp"
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

// The quantization's bandwidth against the copy: computed here row by row, straight from the definition.
TEST(Aggregate, QuantizationBandwidthAgainstCopy) {
  auto rng = fresh_rng();
  const BenchResult b = testing::handmade_result(rng);
  const auto summaries = summarize(b);
  for (const RecipeSummary& s : summaries) {
    double bytes = 0, ms = 0;
    for (const Row& r : b.rows)
      if (r.recipe == s.recipe && r.mode == s.mode && !r.per_model && r.ok()) {
        bytes += r.quant_bytes * static_cast<double>(r.count);
        ms += r.quant_ms * static_cast<double>(r.count);
      }
    EXPECT_NEAR(s.quant_bytes, bytes, 1e-6 * bytes) << s.recipe;
    if (ms > 0) {
      const double want = (bytes / (b.copy_bandwidth_gbs * 1e9)) / (ms * 1e-3);
      EXPECT_NEAR(s.quant_vs_copy, want, 1e-9 * want) << s.recipe << " " << to_string(s.mode);
      EXPECT_TRUE(is_autocast(s.mode));
    } else {
      EXPECT_TRUE(std::isnan(s.quant_vs_copy)) << s.recipe << " " << to_string(s.mode);
    }
  }
  BenchResult no_copy = b;
  no_copy.copy_bandwidth_gbs = 0;
  for (const RecipeSummary& s : summarize(no_copy)) EXPECT_TRUE(std::isnan(s.quant_vs_copy)) << s.recipe;
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

TEST(Aggregate, LinearShapeFromEachPass) {
  Row r;
  r.m = 1024, r.k = 512, r.n = 1536;  // fprop: T=1024, I=512, O=1536
  r.pass = "fprop";
  EXPECT_EQ(linear_shape(r), (LinearShape{1024, 512, 1536}));
  r.pass = "dgrad";
  r.m = 1024, r.k = 1536, r.n = 512;
  EXPECT_EQ(linear_shape(r), (LinearShape{1024, 512, 1536}));
  r.pass = "wgrad";
  r.m = 512, r.k = 1024, r.n = 1536;
  EXPECT_EQ(linear_shape(r), (LinearShape{1024, 512, 1536}));
}

// The long way: a (recipe, mode)'s block layers timed as sequences, times count.
double sequence_ms(const BenchResult& b, const std::string& recipe, Mode mode) {
  double sum = 0;
  for (const SequenceTiming& q : b.sequences)
    if (q.recipe == recipe && q.mode == mode && q.layer != "lm_head") sum += q.timing.median_ms * double(q.count);
  return sum;
}

TEST(Aggregate, SequencesSumPerLayerWithCountsAndGiveSpeedups) {
  auto rng = fresh_rng();
  BenchResult b = testing::handmade_result(rng);
  const auto summaries = summarize(b);
  for (const RecipeSummary& s : summaries) {
    const double want = sequence_ms(b, s.recipe, s.mode);
    ASSERT_GT(want, 0);
    EXPECT_NEAR(s.sequence_layer_ms, want, 1e-12) << s.recipe;
    const RecipeSummary* bf16 = find_summary(summaries, "bf16", s.mode);
    EXPECT_NEAR(s.sequence_speedup_vs_bf16, sequence_ms(b, "bf16", s.mode) / want, 1e-12);
    EXPECT_NEAR(bf16->sequence_speedup_vs_bf16, 1.0, 1e-15);
  }
  for (const SequenceTiming& q : b.sequences) {
    double parts = 0;
    for (const Row& r : b.rows)
      if (r.layer == q.layer && r.recipe == q.recipe && r.mode == q.mode) parts += r.total_ms;
    EXPECT_NEAR(sequence_parts_ms(b, q), parts, 1e-12) << q.layer;
  }
}

TEST(Aggregate, SequenceSumNeedsEveryLayerAndNoFailedRow) {
  auto rng = fresh_rng();
  BenchResult b = testing::handmade_result(rng);
  // Drop qkv's fp8-delayed step sequence: that summary has no sequence total, the others keep theirs.
  std::erase_if(b.sequences, [](const SequenceTiming& q) {
    return q.layer == "qkv" && q.recipe == "fp8-delayed" && q.mode == Mode::step;
  });
  auto summaries = summarize(b);
  EXPECT_TRUE(std::isnan(find_summary(summaries, "fp8-delayed", Mode::step)->sequence_layer_ms));
  EXPECT_TRUE(std::isnan(find_summary(summaries, "fp8-delayed", Mode::step)->sequence_speedup_vs_bf16));
  EXPECT_TRUE(std::isfinite(find_summary(summaries, "quartet", Mode::step)->sequence_layer_ms));
  // The lm_head (once per model) is not part of the block's sum: without its sequence nothing changes.
  BenchResult c = testing::handmade_result(rng);
  const double with_lm = find_summary(summarize(c), "quartet", Mode::step)->sequence_layer_ms;
  std::erase_if(c.sequences, [](const SequenceTiming& q) { return q.layer == "lm_head"; });
  EXPECT_DOUBLE_EQ(find_summary(summarize(c), "quartet", Mode::step)->sequence_layer_ms, with_lm);
  // A failed row withholds the sequence total and makes its parts unknown.
  for (Row& r : c.rows)
    if (r.layer == "mlp_up" && r.pass == "dgrad" && r.recipe == "quartet" && r.mode == Mode::step) r.error = "oom";
  EXPECT_TRUE(std::isnan(find_summary(summarize(c), "quartet", Mode::step)->sequence_layer_ms));
  for (const SequenceTiming& q : c.sequences) {
    if (q.layer == "mlp_up" && q.recipe == "quartet" && q.mode == Mode::step) {
      EXPECT_TRUE(std::isnan(sequence_parts_ms(c, q)));
    }
  }
}

TEST(Aggregate, LayersOfOneNameAreToldApartByShape) {
  // An MoE block: routed experts and a shared expert are both "mlp_up", with different token counts.
  auto rng = fresh_rng();
  BenchResult b;
  b.layers = 2;
  b.copy_bandwidth_gbs = 4000;
  const std::vector<testing::Shape> shapes = {
      {"mlp_up", "fprop", 256, 512, 1024, 8},  {"mlp_up", "dgrad", 256, 1024, 512, 8},
      {"mlp_up", "wgrad", 512, 256, 1024, 8},  {"mlp_up", "fprop", 2048, 512, 1024, 1},
      {"mlp_up", "dgrad", 2048, 1024, 512, 1}, {"mlp_up", "wgrad", 512, 2048, 1024, 1}};
  for (const auto& recipe : {"bf16", "mxfp4"})
    for (const auto& s : shapes) b.rows.push_back(testing::make_row(s, recipe, Mode::step, rng));
  testing::add_sequences(b, rng);
  ASSERT_EQ(b.sequences.size(), 4u);
  for (const SequenceTiming& q : b.sequences) {
    double parts = 0;
    for (const Row& r : b.rows)
      if (r.recipe == q.recipe && linear_shape(r) == LinearShape{q.t, q.i, q.o}) parts += r.total_ms;
    EXPECT_NEAR(sequence_parts_ms(b, q), parts, 1e-12);
  }
  const auto summaries = summarize(b);
  const RecipeSummary* s = find_summary(summaries, "mxfp4", Mode::step);
  EXPECT_NEAR(s->sequence_layer_ms, sequence_ms(b, "mxfp4", Mode::step), 1e-12);
  // fprop / dgrad pairs stay within one linear layer.
  const auto asym = fprop_dgrad_asymmetry(b);
  ASSERT_EQ(asym.size(), 4u);
  for (const Asymmetry& a : asym) {
    bool found = false;
    for (const Row& f : b.rows)
      for (const Row& d : b.rows)
        if (f.pass == "fprop" && d.pass == "dgrad" && f.recipe == a.recipe && d.recipe == a.recipe &&
            f.total_ms == a.fprop_ms && d.total_ms == a.dgrad_ms)
          found = found || linear_shape(f) == linear_shape(d);
    EXPECT_TRUE(found) << a.recipe;
  }
  EXPECT_EQ(per_linear_layer(b).size(), 4u);
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
  BenchResult b =
      testing::handmade_result(rng, {"fp8-current"}, {Mode::pre_quantized, Mode::step, Mode::per_gemm});
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
  int per_gemm_rows = 0;
  for (const Row& r : b.rows) {
    if (r.mode == Mode::pre_quantized) {
      EXPECT_DOUBLE_EQ(r.bound_ms, r.gemm.median_ms);
      continue;
    }
    if (r.mode == Mode::per_gemm) {
      // Its GEMMs run with Transformer Engine's settings, not the pre-quantized rows': its own GEMM time.
      ++per_gemm_rows;
      EXPECT_NEAR(r.bound_ms, r.gemm.median_ms + r.quant_bytes / 4e12 * 1e3, 1e-12);
      continue;
    }
    const Row* pre = nullptr;
    for (const Row& p : b.rows)
      if (p.mode == Mode::pre_quantized && p.layer == r.layer && p.pass == r.pass) pre = &p;
    ASSERT_TRUE(pre);
    EXPECT_NEAR(r.bound_ms, pre->gemm.median_ms + r.quant_bytes / 4e12 * 1e3, 1e-12);
  }
  EXPECT_GT(per_gemm_rows, 0);
  b.copy_bandwidth_gbs = 0;
  EXPECT_THROW(fill_bounds(b), std::invalid_argument);
}

}  // namespace
}  // namespace nibble::bench
