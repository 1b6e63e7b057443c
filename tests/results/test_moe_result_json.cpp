// MoE fields of the result schema: a row's moe_path and group_tokens, the result's moe_comparison, and the
// grouped / per-expert comparison computed from two results.
#include <gtest/gtest.h>

#include <cmath>

#include "handmade_result.hpp"
#include "nibble/results/aggregate.hpp"
#include "nibble/results/result.hpp"
#include "test_seed.hpp"

namespace nibble::bench {
namespace {

// A routed-expert layer's three passes under `path`: grouped (one row, count 1, the experts' tokens) or
// per-expert (one expert's row, count = experts).
BenchResult expert_result(bool grouped, std::mt19937_64& rng) {
  const std::vector<int64_t> tokens = {256, 128, 128, 128};
  const int64_t t = grouped ? 640 : 128, count = grouped ? 1 : 4;
  BenchResult b;
  b.layers = 2;
  b.tokens = 320;
  for (const char* recipe : {"bf16", "fp8-delayed"})
    for (const testing::Shape& s : std::vector<testing::Shape>{{"mlp_up", "fprop", t, 512, 1024, count},
                                                               {"mlp_up", "dgrad", t, 1024, 512, count},
                                                               {"mlp_up", "wgrad", 512, t, 1024, count}}) {
      Row r = testing::make_row(s, recipe, Mode::pre_quantized, rng);
      r.moe_path = grouped ? moe_path::grouped(moe_path::one_quantize_launch) : std::string(moe_path::per_expert);
      if (grouped) r.group_tokens = tokens;
      b.rows.push_back(r);
    }
  return b;
}

TEST(MoeResult, RowsAndComparisonRoundTrip) {
  auto rng = nibble::testing::fresh_rng();
  BenchResult g = expert_result(true, rng);
  const BenchResult p = expert_result(false, rng);
  g.moe_comparison = compare_moe_paths(g, p);
  ASSERT_EQ(g.moe_comparison.size(), 2u);
  for (const MoeComparison& c : g.moe_comparison) {
    double grouped = 0, per = 0;
    for (const Row& r : g.rows)
      if (r.recipe == c.recipe) grouped += r.total_ms;
    for (const Row& r : p.rows)
      if (r.recipe == c.recipe) per += r.total_ms * 4;
    EXPECT_NEAR(c.grouped_ms, grouped, 1e-12);
    EXPECT_NEAR(c.per_expert_ms, per, 1e-12);
    EXPECT_NEAR(c.ratio, grouped / per, 1e-12);
  }
  const BenchResult back = result_from_json(to_json(g));
  ASSERT_EQ(back.rows.size(), g.rows.size());
  for (size_t i = 0; i < g.rows.size(); ++i) {
    EXPECT_EQ(back.rows[i].moe_path, g.rows[i].moe_path);
    EXPECT_EQ(back.rows[i].group_tokens, g.rows[i].group_tokens);
  }
  ASSERT_EQ(back.moe_comparison.size(), 2u);
  EXPECT_DOUBLE_EQ(back.moe_comparison[1].ratio, g.moe_comparison[1].ratio);
  EXPECT_EQ(back.moe_comparison[1].recipe, "fp8-delayed");
  // A failed expert row leaves its comparison NaN (null in the file), not a partial sum.
  g.rows[4].error = "out of memory";
  const auto failed = compare_moe_paths(g, p);
  EXPECT_TRUE(std::isnan(failed[1].grouped_ms));
  EXPECT_TRUE(std::isnan(failed[1].ratio));
  EXPECT_FALSE(std::isnan(failed[0].ratio));
}

TEST(MoeResult, GroupTokensMustSumToTheTokenDimension) {
  auto rng = nibble::testing::fresh_rng();
  nlohmann::json j = to_json(expert_result(true, rng));
  j["gemms"][2]["group_tokens"] = {256, 128, 128};  // wgrad row: k = 640
  try {
    result_from_json(j);
    ADD_FAILURE() << "accepted group_tokens that do not sum to k";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("group_tokens"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("(k)"), std::string::npos) << e.what();
  }
  j["gemms"][2]["group_tokens"] = {256, -1, 128, 257};
  EXPECT_THROW(result_from_json(j), std::invalid_argument);
}

}  // namespace
}  // namespace nibble::bench
