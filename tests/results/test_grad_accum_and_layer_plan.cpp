// Gradient accumulation (weight quantization amortised over micro-batches), the BF16 layer plan, tokens/s
// and prediction intervals in the aggregation, on hand-made results with fresh random times.
#include "handmade_result.hpp"
#include "nibble/results/aggregate.hpp"
#include "test_seed.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

namespace nibble::bench {
namespace {

using nibble::testing::fresh_rng;

TEST(GradAccum, AmortiseKeepsOneNthOfTheWeightShare) {
  auto rng = fresh_rng();
  std::uniform_real_distribution<double> u(0.01, 1.0);
  for (int trial = 0; trial < 50; ++trial) {
    Row r;
    r.layer = "qkv";
    r.pass = "fprop";
    r.recipe = "fp8-delayed";
    r.mode = Mode::step;
    r.weight_quant_ms = u(rng);
    r.quant_ms = r.weight_quant_ms + u(rng);  // + activation share
    r.weight_quant_bytes = 1e6 * u(rng);
    r.quant_bytes = r.weight_quant_bytes + 1e6 * u(rng);
    const double activation_ms = r.quant_ms - r.weight_quant_ms;
    const double activation_bytes = r.quant_bytes - r.weight_quant_bytes;
    const int n = 1 + static_cast<int>(rng() % 64);
    Row one = r;
    amortise_weight_quant(one, 1);
    EXPECT_DOUBLE_EQ(one.quant_ms, r.quant_ms);
    EXPECT_DOUBLE_EQ(one.quant_bytes, r.quant_bytes);
    amortise_weight_quant(r, n);
    EXPECT_NEAR(r.quant_ms, activation_ms + r.weight_quant_ms / n, 1e-12);
    EXPECT_NEAR(r.quant_bytes, activation_bytes + r.weight_quant_bytes / n, 1e-3);
    EXPECT_GT(r.weight_quant_ms, 0);  // the full share stays on the row for the report
  }
}

TEST(GradAccum, RejectsBadCountsAndAWeightShareLargerThanTheRow) {
  Row r;
  r.quant_ms = 1.0;
  r.quant_bytes = 100;
  r.weight_quant_ms = 0.5;
  r.weight_quant_bytes = 50;
  EXPECT_THROW(amortise_weight_quant(r, 0), std::invalid_argument);
  EXPECT_THROW(amortise_weight_quant(r, -3), std::invalid_argument);
  Row big = r;
  big.weight_quant_bytes = 500;
  try {
    amortise_weight_quant(big, 4);
    FAIL() << "a weight share above the row's quantization was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("weight quantization"), std::string::npos) << e.what();
  }
  Row nan = r;
  nan.weight_quant_ms = std::nan("");
  EXPECT_THROW(amortise_weight_quant(nan, 2), std::invalid_argument);
}

TEST(GradAccum, SummaryCarriesTheWeightShare) {
  auto rng = fresh_rng();
  BenchResult b = testing::handmade_result(rng);
  b.grad_accum = 1 + static_cast<int>(rng() % 16);
  double expect_full = 0;
  for (Row& r : b.rows)
    if (r.recipe == "fp8-delayed" && r.mode == Mode::step && r.pass == "fprop" && !r.per_model) {
      r.weight_quant_ms = r.quant_ms * 0.4;
      expect_full += r.weight_quant_ms * double(r.count);
    }
  const auto sums = summarize(b);
  const RecipeSummary* s = find_summary(sums, "fp8-delayed", Mode::step);
  ASSERT_NE(s, nullptr);
  EXPECT_NEAR(s->weight_quant_ms, expect_full, 1e-12);
  EXPECT_NEAR(s->weight_quant_share_ms, expect_full / b.grad_accum, 1e-12);
  EXPECT_EQ(find_summary(sums, "bf16", Mode::step)->weight_quant_ms, 0.0);
}

TEST(LayerPlan, ParsesKeysInAnyOrder) {
  auto rng = fresh_rng();
  const int64_t layers = 4 + static_cast<int64_t>(rng() % 60);
  const int64_t first = static_cast<int64_t>(rng() % (layers / 2 + 1));
  const int64_t last = static_cast<int64_t>(rng() % (layers - first + 1));
  const LayerPlan a = parse_layer_plan("first:" + std::to_string(first) + ",last:" + std::to_string(last), layers);
  EXPECT_EQ(a.bf16_first, first);
  EXPECT_EQ(a.bf16_last, last);
  EXPECT_FALSE(a.bf16_lm_head);
  const LayerPlan b =
      parse_layer_plan("lm_head,last:" + std::to_string(last) + ",first:" + std::to_string(first), layers);
  EXPECT_EQ(b.bf16_first, first);
  EXPECT_EQ(b.bf16_last, last);
  EXPECT_TRUE(b.bf16_lm_head);
  EXPECT_EQ(parse_layer_plan(to_string(b), layers), b);  // round trip
  EXPECT_EQ(parse_layer_plan("last:1", layers).bf16_first, 0);
}

TEST(LayerPlan, BadSpecsNameTheFieldAndTheFix) {
  const struct {
    const char* spec;
    const char* says;
  } cases[] = {
      {"first:3,last:3", "model has 5 layers"},
      {"first:6", "model has 5 layers"},
      {"middle:2", "unknown key 'middle'"},
      {"first:two", "whole number"},
      {"first:-1", "whole number"},
      {"first:1.5", "whole number"},
      {"first:", "whole number"},
      {"first", "needs a count"},
      {"first:1,first:2", "given twice"},
      {"lm_head:1", "takes no count"},
      {"", "empty"},
      {"first:1,", "unknown key ''"},
  };
  for (const auto& c : cases) {
    try {
      parse_layer_plan(c.spec, 5);
      ADD_FAILURE() << "'" << c.spec << "' was accepted";
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind("--keep-bf16:", 0), 0u) << what;
      EXPECT_NE(what.find(c.says), std::string::npos) << c.spec << ": " << what;
    }
  }
}

TEST(LayerPlan, ModelTotalsMixBf16BlocksWithTheRecipe) {
  auto rng = fresh_rng();
  BenchResult b = testing::handmade_result(rng);
  const auto plain = summarize(b);
  b.layer_plan.bf16_first = 1 + static_cast<int64_t>(rng() % 3);
  b.layer_plan.bf16_last = static_cast<int64_t>(rng() % 3);
  const int64_t kept = b.layer_plan.bf16_blocks();
  ASSERT_LE(kept, b.layers);
  const auto mixed = summarize(b);
  ASSERT_EQ(mixed.size(), plain.size());
  for (size_t i = 0; i < mixed.size(); ++i) {
    const RecipeSummary& s = mixed[i];
    const RecipeSummary* bf16 = find_summary(mixed, "bf16", s.mode);
    ASSERT_NE(bf16, nullptr);
    EXPECT_NEAR(plain[i].blocks_ms, plain[i].layer_ms * double(b.layers), 1e-9);
    const double blocks = s.layer_ms * double(b.layers - kept) + bf16->layer_ms * double(kept);
    EXPECT_NEAR(s.blocks_ms, blocks, 1e-9);
    EXPECT_NEAR(s.model_ms, blocks + s.once_per_model_ms, 1e-9);
    EXPECT_EQ(s.bf16_blocks, kept);
    EXPECT_DOUBLE_EQ(s.layer_ms, plain[i].layer_ms);  // one block under the recipe is unchanged
    EXPECT_NEAR(s.tokens_per_s, double(b.tokens) / (blocks * 1e-3), 1e-6 * s.tokens_per_s);
    EXPECT_NEAR(s.model_speedup_vs_bf16, bf16->blocks_ms / blocks, 1e-12);
    // The mixed plan sits between all-bf16 and all-recipe.
    const double lo = std::min(s.layer_ms, bf16->layer_ms) * double(b.layers);
    const double hi = std::max(s.layer_ms, bf16->layer_ms) * double(b.layers);
    EXPECT_GE(s.blocks_ms, lo - 1e-9);
    EXPECT_LE(s.blocks_ms, hi + 1e-9);
  }
  // Without a bf16 run a plan that keeps blocks cannot be summed: NaN, not a silent all-recipe total.
  BenchResult no_bf16 = testing::handmade_result(rng, {"fp8-delayed"});
  no_bf16.layer_plan.bf16_first = 2;
  for (const auto& s : summarize(no_bf16)) {
    EXPECT_TRUE(std::isnan(s.blocks_ms));
    EXPECT_TRUE(std::isnan(s.tokens_per_s));
  }
}

TEST(PredictionInterval, ScalesTimesAndInvertsThroughput) {
  auto rng = fresh_rng();
  BenchResult b = testing::handmade_result(rng);
  for (const auto& s : summarize(b)) EXPECT_TRUE(std::isnan(s.layer_ms_low));
  std::uniform_real_distribution<double> u(0.6, 0.95), v(1.05, 1.6);
  b.interval = {u(rng), v(rng), "hand-made"};
  for (const auto& s : summarize(b)) {
    EXPECT_NEAR(s.layer_ms_low, s.layer_ms * b.interval.low, 1e-12);
    EXPECT_NEAR(s.layer_ms_high, s.layer_ms * b.interval.high, 1e-12);
    EXPECT_NEAR(s.model_ms_high, s.model_ms * b.interval.high, 1e-9);
    EXPECT_LT(s.tokens_per_s_low, s.tokens_per_s);
    EXPECT_GT(s.tokens_per_s_high, s.tokens_per_s);
    EXPECT_NEAR(s.tokens_per_s_low * s.model_ms_high, s.tokens_per_s * s.model_ms, 1e-6 * s.tokens_per_s * s.model_ms);
  }
}

TEST(GradAccumJson, NewFieldsRoundTripAndOldFilesReadWithDefaults) {
  auto rng = fresh_rng();
  BenchResult b = testing::handmade_result(rng);
  b.grad_accum = 2 + static_cast<int>(rng() % 30);
  b.layer_plan = {2, 1, true};
  b.interval = {0.8, 1.3, "leave-one-out"};
  for (Row& r : b.rows) {
    r.weight_quant_ms = r.quant_ms * 0.25;
    r.weight_quant_bytes = r.quant_bytes * 0.25;
  }
  const nlohmann::json j = to_json(b);
  const BenchResult back = result_from_json(j);
  EXPECT_EQ(back.grad_accum, b.grad_accum);
  EXPECT_EQ(back.layer_plan, b.layer_plan);
  EXPECT_DOUBLE_EQ(back.interval.low, 0.8);
  EXPECT_DOUBLE_EQ(back.interval.high, 1.3);
  ASSERT_EQ(back.rows.size(), b.rows.size());
  for (size_t i = 0; i < b.rows.size(); ++i) {
    EXPECT_DOUBLE_EQ(back.rows[i].weight_quant_ms, b.rows[i].weight_quant_ms);
    EXPECT_DOUBLE_EQ(back.rows[i].weight_quant_bytes, b.rows[i].weight_quant_bytes);
  }
  const auto& s0 = j["summary"][0];
  for (const char* k : {"tokens_per_s", "blocks_ms", "layer_ms_low", "layer_ms_high", "weight_quant_ms",
                        "weight_quant_share_ms", "model_speedup_vs_bf16"})
    EXPECT_TRUE(s0.contains(k)) << k;
  EXPECT_TRUE(s0["layer_ms_low"].is_number());

  nlohmann::json old = j;
  old.erase("grad_accum");
  old.erase("layer_plan");
  old.erase("prediction_interval");
  for (auto& r : old["gemms"]) {
    r.erase("weight_quant_ms");
    r.erase("weight_quant_bytes");
  }
  const BenchResult legacy = result_from_json(old);
  EXPECT_EQ(legacy.grad_accum, 1);
  EXPECT_EQ(legacy.layer_plan, LayerPlan{});
  EXPECT_FALSE(legacy.interval.present());

  nlohmann::json bad = j;
  bad["grad_accum"] = 0;
  EXPECT_THROW(result_from_json(bad), std::invalid_argument);
  bad = j;
  bad["layer_plan"]["bf16_first"] = b.layers;  // + bf16_last 1 > layers
  EXPECT_THROW(result_from_json(bad), std::invalid_argument);
  bad = j;
  bad["prediction_interval"]["low"] = 2.0;  // above high
  EXPECT_THROW(result_from_json(bad), std::invalid_argument);
}

}  // namespace
}  // namespace nibble::bench
