// The MoE token distribution (`--token-imbalance`) and the two MoE GEMM lists (per-expert, grouped).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "nibble/workload.hpp"
#include "test_seed.hpp"
#include "workload_test_support.hpp"

namespace nibble::workload {
namespace {

using testing::codonfm_by_hand;
using testing::expect_linear;

ModelConfig mixtral_like(int64_t tokens) {
  ModelConfig m = codonfm_by_hand();
  m.micro_batch = 1;
  m.seq_len = tokens;
  m.ffn = 14336;
  m.gated = true;
  m.experts = 8;
  m.top_k = 2;
  return m;
}

int64_t sum(const std::vector<int64_t>& v) { return std::accumulate(v.begin(), v.end(), int64_t{0}); }

TEST(ExpertTokens, WholeUnitsKeepTheRoutedTotal) {
  // Mixtral at 4096 tokens: 8192 routed = 64 units of 128, mean 1024.
  const ExpertTokens even = distribute_expert_tokens(4096, 2, 8, 1.0);
  EXPECT_EQ(even.tokens, std::vector<int64_t>(8, 1024));
  EXPECT_EQ(even.padded, even.tokens);
  EXPECT_EQ(even.partial_expert, -1);
  // R = 2: the hot expert 16 units (2048); 48 units over 7 = 6 r 6: six experts 7 units (896), one 6 (768).
  const ExpertTokens two = distribute_expert_tokens(4096, 2, 8, 2.0);
  EXPECT_EQ(two.tokens, (std::vector<int64_t>{2048, 896, 896, 896, 896, 896, 896, 768}));
  EXPECT_EQ(two.padded, two.tokens);
  EXPECT_EQ(sum(two.tokens), 8192);
  EXPECT_DOUBLE_EQ(two.achieved_imbalance(), 2.0);
  EXPECT_EQ(two.padded_total(), 8192);
  EXPECT_NE(describe(two).find("experts: 2048, 896 x6, 768; max/mean 2.00"), std::string::npos) << describe(two);
  // The most one expert can take is all T tokens: R = E / top_k = 4, the others share the rest (32 units over 7).
  const ExpertTokens most = distribute_expert_tokens(4096, 2, 8, 4.0);
  EXPECT_EQ(most.tokens, (std::vector<int64_t>{4096, 640, 640, 640, 640, 512, 512, 512}));
  // Qwen1.5-MoE, 60 experts top-4 at 4096 tokens: 128 units, 8 experts 3 units and 52 experts 2; the mean
  // (273.07) is exact in the total, the realised max / mean is 384 / 273.07.
  const ExpertTokens qwen = distribute_expert_tokens(4096, 4, 60, 1.0);
  std::vector<int64_t> want(8, 384);
  want.resize(60, 256);
  EXPECT_EQ(qwen.tokens, want);
  EXPECT_EQ(qwen.padded, want);
  EXPECT_NEAR(qwen.achieved_imbalance(), 384.0 / (16384.0 / 60.0), 1e-12);
  EXPECT_NE(describe(qwen).find("experts: 384 x8, 256 x52; max/mean 1.41"), std::string::npos) << describe(qwen);
  const nlohmann::json j = to_json(qwen);
  EXPECT_TRUE(j["partial_expert"].is_null());
  EXPECT_EQ(j["distribution"], describe(qwen));
}

TEST(ExpertTokens, APartialUnitIsPaddedOnOneExpertAlone) {
  // 4095 x 2 = 8190 = 63 units + 126: R = 1 gives 8 units to seven experts, 7 to the last, which takes the 126.
  const ExpertTokens d = distribute_expert_tokens(4095, 2, 8, 1.0);
  EXPECT_EQ(d.tokens, (std::vector<int64_t>{1024, 1024, 1024, 1024, 1024, 1024, 1024, 1022}));
  EXPECT_EQ(d.padded, std::vector<int64_t>(8, 1024));
  EXPECT_EQ(d.partial_expert, 7);
  EXPECT_NE(describe(d).find("the last 126 tokens go to expert 7, padded alone from 1022 to 1024 rows (+2 rows"),
            std::string::npos)
      << describe(d);
  // top-1 with R = E: every token on one expert (7 units + 104, nearer R x mean on the hot expert), the others idle.
  const ExpertTokens all = distribute_expert_tokens(1000, 1, 4, 4.0);
  EXPECT_EQ(all.tokens, (std::vector<int64_t>{1000, 0, 0, 0}));
  EXPECT_EQ(all.padded, (std::vector<int64_t>{1024, 0, 0, 0}));
  EXPECT_EQ(all.partial_expert, 0);
  EXPECT_EQ(to_json(all)["partial_expert"], 0);
  // Fewer routed tokens than one unit: one expert holds them all, padded to one unit.
  const ExpertTokens tiny = distribute_expert_tokens(40, 2, 8, 1.0);
  EXPECT_EQ(tiny.tokens[0], 80);
  EXPECT_EQ(tiny.padded_total(), 128);
}

TEST(ExpertTokens, RandomDistributionsKeepTheirInvariants) {
  auto rng = nibble::testing::fresh_rng();
  for (int trial = 0; trial < 2000; ++trial) {
    const int64_t experts = std::uniform_int_distribution<int64_t>(1, 160)(rng);
    const int64_t top_k = std::uniform_int_distribution<int64_t>(1, std::min<int64_t>(experts, 8))(rng);
    const int64_t tokens = std::uniform_int_distribution<int64_t>(1, 70000)(rng);
    const double max_r = static_cast<double>(experts) / static_cast<double>(top_k);
    const double r = trial % 4 == 0 ? 1.0 : 1.0 + std::uniform_real_distribution<double>(0.0, 1.0)(rng) * (max_r - 1.0);
    const int64_t align = trial % 2 == 0 ? kExpertTokenAlign : std::uniform_int_distribution<int64_t>(1, 128)(rng);
    const ExpertTokens d = distribute_expert_tokens(tokens, top_k, experts, r, align);
    SCOPED_TRACE(describe(d));
    ASSERT_EQ(static_cast<int64_t>(d.tokens.size()), experts);
    const int64_t routed = tokens * top_k, units = routed / align, partial = routed % align;
    EXPECT_EQ(sum(d.tokens), routed);
    // Whole units everywhere but on the one expert holding the partial unit, which alone is padded.
    EXPECT_EQ(d.partial_expert >= 0, partial > 0);
    for (int64_t e = 0; e < experts; ++e) {
      const auto i = static_cast<size_t>(e);
      EXPECT_EQ(d.padded[i] % align, 0);
      if (e == d.partial_expert) {
        EXPECT_EQ(d.padded[i] - d.tokens[i], align - partial);
      } else {
        EXPECT_EQ(d.tokens[i] % align, 0);
        EXPECT_EQ(d.padded[i], d.tokens[i]);
      }
    }
    EXPECT_EQ(d.padded_total(), (units + (partial > 0 ? 1 : 0)) * align);
    // Hot expert first and the maximum; non-increasing; the others differ by at most one unit (plus the partial).
    EXPECT_EQ(d.max(), d.tokens[0]);
    EXPECT_TRUE(std::is_sorted(d.tokens.begin(), d.tokens.end(), std::greater<>()));
    if (experts > 1) {
      EXPECT_LE(d.tokens[1] - d.tokens.back(), align + partial);
    }
    // The hot expert holds R x mean to within one unit (a unit's rounding, or the T cap), never more than T
    // unless the even split itself needs whole units above T.
    const int64_t even_max = (units + experts - 1) / experts;
    EXPECT_LE(d.tokens[0], std::max(tokens, even_max * align + partial));
    EXPECT_LT(static_cast<double>(d.tokens[0]), std::max(r * d.mean(), static_cast<double>(even_max * align)) + align);
    if (r * d.mean() <= static_cast<double>(tokens - align)) {
      EXPECT_GT(static_cast<double>(d.tokens[0]) + align / 2.0 + 1e-6, r * d.mean());
    }
    // R = 1 is the even split in units.
    if (r == 1.0) {
      for (int64_t e = 0; e < experts; ++e) {
        const int64_t want = units / experts + (e < units % experts ? 1 : 0);
        const auto i = static_cast<size_t>(e);
        EXPECT_EQ(d.tokens[i] - (e == d.partial_expert ? partial : 0), want * align) << e;
      }
    }
  }
}

TEST(ExpertTokens, BadImbalanceNamesTheOption) {
  for (double bad : {0.999, 0.0, -1.0, std::nan(""), double(INFINITY), 4.01, 9.0}) {
    try {
      distribute_expert_tokens(4096, 2, 8, bad);
      ADD_FAILURE() << "accepted --token-imbalance " << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("--token-imbalance"), std::string::npos) << e.what();
    }
  }
  try {
    check_token_imbalance(5, 8, 2);
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("at most experts / top_k = 8 / 2 = 4"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(check_token_imbalance(4, 8, 2));
  // A dense model has no experts to unbalance.
  ModelConfig dense = codonfm_by_hand();
  EXPECT_THROW(derive_workload(dense, {.token_imbalance = 2}), std::invalid_argument);
  EXPECT_NO_THROW(derive_workload(dense, {.token_imbalance = 1}));
  EXPECT_THROW(moe_path_from_string("grouped-ish"), std::invalid_argument);
  EXPECT_EQ(moe_path_from_string("per-expert"), MoePath::per_expert);
}

TEST(ExpertTokens, PerExpertListHasOneEntryPerTokenCount) {
  const Workload w = derive_workload(mixtral_like(4096), {.token_imbalance = 2});
  expect_linear(w, "mlp_up", 2048, 4096, 2 * 14336, 1, "expert");
  int64_t experts = 0, flops = 0;
  for (const Gemm& g : w.gemms)
    if (g.role == "expert" && g.layer == "mlp_up" && g.pass == "fprop") {
      EXPECT_TRUE(g.group_tokens.empty());
      experts += g.count;
      flops += g.flops_exact();
    }
  EXPECT_EQ(experts, 8);
  EXPECT_EQ(flops, 2 * int64_t{8192} * 4096 * 2 * 14336);  // the routed tokens, exactly: no padding
}

TEST(ExpertTokens, GroupedListHasOneEntryWithTheSameWork) {
  for (double r : {1.0, 1.5, 2.0, 3.0}) {
    const Workload per = derive_workload(mixtral_like(4096), {.token_imbalance = r, .moe_path = MoePath::per_expert});
    const Workload grouped = derive_workload(mixtral_like(4096), {.token_imbalance = r, .moe_path = MoePath::grouped});
    EXPECT_EQ(per.layer_totals().total(), grouped.layer_totals().total()) << r;
    const Gemm& up = testing::find_gemm(grouped, "mlp_up", "wgrad", "expert");
    EXPECT_EQ(up.count, 1);
    EXPECT_EQ(up.group_tokens, grouped.expert_tokens.padded);
    EXPECT_EQ(up.k, grouped.expert_tokens.padded_total());  // wgrad's K is the tokens
    const nlohmann::json j = to_json(grouped);
    EXPECT_EQ(j["moe"]["path"], "grouped");
    EXPECT_EQ(j["moe"]["tokens"].get<std::vector<int64_t>>(), grouped.expert_tokens.tokens);
    EXPECT_DOUBLE_EQ(j["moe"]["imbalance"].get<double>(), r);
    EXPECT_EQ(to_json(per)["moe"]["path"], "per-expert");
  }
}

}  // namespace
}  // namespace nibble::workload
