// GEMM derivation pinned against shapes computed by hand (docs/spec.md §5), plus properties that must
// hold for any valid model; then the MoE token distribution (`--token-imbalance`) and the two MoE GEMM
// lists (per-expert, grouped).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "workload_test_support.hpp"
#include "test_seed.hpp"

namespace nibble::workload {
namespace {
using testing::codonfm_by_hand;
using testing::expect_linear;
using testing::expect_shape;
using testing::find_gemm;

TEST(DeriveGemms, MultiHeadCodonFmMatchesSpecReference) {
  const Workload w = derive_workload(codonfm_by_hand());
  EXPECT_EQ(w.tokens, 15872);
  EXPECT_EQ(w.layers, 24);
  ASSERT_EQ(w.gemms.size(), 12u);  // 4 linear layers x 3 passes
  expect_linear(w, "qkv", 15872, 4096, 12288);
  expect_linear(w, "attn_out", 15872, 4096, 4096);
  expect_linear(w, "mlp_up", 15872, 4096, 16384);
  expect_linear(w, "mlp_down", 15872, 16384, 4096);
  // docs/spec.md §5: one layer is 19.17 TFLOP; exactly 6 * T * (parameters of the four linear layers).
  EXPECT_EQ(w.layer_totals().total(), int64_t{19172734009344});
  EXPECT_NEAR(static_cast<double>(w.layer_totals().total()) * 1e-12, 19.17, 0.005);
  EXPECT_EQ(w.layer_totals().fprop, w.layer_totals().dgrad);
  EXPECT_EQ(w.layer_totals().fprop, w.layer_totals().wgrad);
  EXPECT_EQ(w.model_totals().total(), 24 * int64_t{19172734009344});
  EXPECT_DOUBLE_EQ(find_gemm(w, "qkv", "fprop").flops(), 2.0 * 15872 * 4096 * 12288);
}

TEST(DeriveGemms, GroupedQueryAttentionNarrowsQkv) {
  ModelConfig m = codonfm_by_hand();
  m.kv_heads = 8;  // head_dim 128: O = 4096 + 2 * 8 * 128
  const Workload w = derive_workload(m);
  expect_linear(w, "qkv", 15872, 4096, 6144);
  expect_linear(w, "attn_out", 15872, 4096, 4096);
  m.kv_heads = 1;  // multi-query
  expect_linear(derive_workload(m), "qkv", 15872, 4096, 4096 + 256);
}

TEST(DeriveGemms, ExplicitHeadDimDecouplesAttentionWidthFromHidden) {
  ModelConfig m = codonfm_by_hand();  // Gemma-7B-like: 3072 hidden, 16 heads of 256
  m.hidden = 3072;
  m.heads = 16;
  m.head_dim = 256;
  m.ffn = 24576;
  const Workload w = derive_workload(m);
  expect_linear(w, "qkv", 15872, 3072, 16 * 256 * 3);
  expect_linear(w, "attn_out", 15872, 4096, 3072);
}

TEST(DeriveGemms, GatedMlpFusesGateAndUp) {
  ModelConfig m = codonfm_by_hand();
  m.gated = true;
  m.ffn = 14336;
  const Workload w = derive_workload(m);
  expect_linear(w, "mlp_up", 15872, 4096, 2 * 14336);
  expect_linear(w, "mlp_down", 15872, 14336, 4096);
}

TEST(DeriveGemms, MixtureOfExpertsUsesAverageTokensPerExpert) {
  ModelConfig m = codonfm_by_hand();  // T = 15872, 8 experts top-2: 3968 tokens per expert
  m.gated = true;
  m.ffn = 14336;
  m.experts = 8;
  m.top_k = 2;
  Workload w = derive_workload(m);
  expect_linear(w, "qkv", 15872, 4096, 12288);
  expect_linear(w, "mlp_up", 3968, 4096, 2 * 14336, 8, "expert");
  expect_linear(w, "mlp_down", 3968, 14336, 4096, 8, "expert");
  ASSERT_FALSE(w.notes.empty());
  EXPECT_NE(w.notes[0].find("experts: 3968 x8; max/mean 1.00"), std::string::npos) << w.notes[0];

  // Not divisible by the experts: 15872 * 3 = 47616 = 372 units of 128 over 7 = 53 r 1: one expert 54 units
  // (6912), six 53 (6784); the total stays the routed 47616 and the note gives the realised max / mean.
  m.experts = 7;
  m.top_k = 3;
  m.moe_ffn = 1408;
  w = derive_workload(m);
  expect_linear(w, "mlp_up", 6912, 4096, 2 * 1408, 1, "expert");
  int64_t rows = 0;
  for (const Gemm& g : w.gemms)
    if (g.layer == "mlp_up" && g.pass == "fprop" && g.role == "expert") rows += g.m * g.count;
  EXPECT_EQ(rows, 15872 * 3);
  EXPECT_NE(w.notes[0].find("experts: 6912, 6784 x6; max/mean 1.02"), std::string::npos) << w.notes[0];

  // Shared experts see every token, as dense MLPs of their own width.
  m.shared_experts = 2;
  m.shared_ffn = 5632;
  w = derive_workload(m);
  expect_linear(w, "mlp_up", 15872, 4096, 2 * 5632, 2, "shared_expert");
  expect_linear(w, "mlp_down", 15872, 5632, 4096, 2, "shared_expert");
}

TEST(DeriveGemms, TensorParallelSplitsColumnAndRowParallelLayers) {
  ModelConfig m = codonfm_by_hand();  // Llama-3-8B shapes at tp 4
  m.kv_heads = 8;
  m.gated = true;
  m.ffn = 14336;
  m.vocab = 128256;
  m.tp = 4;
  const Workload w = derive_workload(m, {.lm_head = true});
  expect_linear(w, "qkv", 15872, 4096, 6144 / 4);        // column-parallel: O / tp
  expect_linear(w, "attn_out", 15872, 4096 / 4, 4096);   // row-parallel: I / tp
  expect_linear(w, "mlp_up", 15872, 4096, 2 * 14336 / 4);
  expect_linear(w, "mlp_down", 15872, 14336 / 4, 4096);
  expect_linear(w, "lm_head", 15872, 4096, 128256 / 4);
}

TEST(DeriveGemms, LmHeadRunsOncePerModelAndPadsVocabForTp) {
  ModelConfig m = codonfm_by_hand();
  Workload w = derive_workload(m, {.lm_head = true});
  expect_linear(w, "lm_head", 15872, 4096, 69);
  EXPECT_TRUE(find_gemm(w, "lm_head", "fprop").per_model);
  const int64_t head = 3 * 2 * int64_t{15872} * 4096 * 69;
  EXPECT_EQ(w.layer_totals().total(), int64_t{19172734009344});
  EXPECT_EQ(w.model_totals().total(), 24 * int64_t{19172734009344} + head);
  m.tp = 2;  // 69 is odd: padded to 70, 35 per rank
  w = derive_workload(m, {.lm_head = true});
  expect_linear(w, "lm_head", 15872, 4096, 35);
}

TEST(DeriveGemms, AttentionScoreAndValueGemmsPerSequenceAndHead) {
  ModelConfig m = codonfm_by_hand();
  m.tp = 2;
  const Workload w = derive_workload(m, {.attention = true});
  // Q K^T per (sequence, head): 512 x 128 x 512, 31 * 32 / 2 of them on one rank.
  expect_linear(w, "attn_scores", 512, 128, 512, 31 * 16);
  expect_linear(w, "attn_values", 512, 512, 128, 31 * 16);
  EXPECT_FALSE(is_block_linear("attn_scores"));
  EXPECT_TRUE(is_block_linear("mlp_down"));
}

TEST(DeriveGemms, OverflowingFlopCountsAreRejected) {
  ModelConfig m = codonfm_by_hand();
  m.hidden = int64_t{1} << 31;
  m.heads = 1;
  m.ffn = int64_t{1} << 31;
  EXPECT_THROW(derive_workload(m), std::overflow_error);
  m = codonfm_by_hand();
  m.layers = int64_t{1} << 50;  // one layer fits, the model total does not
  EXPECT_THROW(derive_workload(m), std::overflow_error);
  m = codonfm_by_hand();
  m.micro_batch = int64_t{1} << 40;
  m.seq_len = int64_t{1} << 40;
  EXPECT_THROW(derive_workload(m), std::invalid_argument);
  // An expert count no table can hold is refused before any per-expert allocation (found by the preset fuzzer).
  m = codonfm_by_hand();
  m.experts = 666666666666662;
  m.top_k = 2;
  try {
    derive_workload(m);
    FAIL() << "a model with 6.7e14 experts was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--experts"), std::string::npos) << e.what();
  }
}

// Any valid model: the three passes of a layer have the same FLOPs and transposed shapes, and the
// step's linear work is 6 * T * (parameters per rank).
TEST(DeriveGemms, RandomModelsSatisfyPassAndParameterIdentities) {
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  auto pick = [&rng](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int trial = 0; trial < 200; ++trial) {
    ModelConfig m;
    m.tp = int64_t{1} << pick(0, 3);
    const int64_t kv = m.tp * pick(1, 4);
    m.kv_heads = kv;
    m.heads = kv * pick(1, 4);
    m.head_dim = 16 * pick(1, 16);
    m.hidden = 64 * pick(1, 64);
    m.ffn = m.tp * 32 * pick(1, 64);
    m.gated = pick(0, 1) == 1;
    m.layers = pick(1, 100);
    m.vocab = pick(1, 200000);
    m.micro_batch = pick(1, 16);
    m.seq_len = pick(1, 4096);
    const Workload w = derive_workload(m, {.lm_head = pick(0, 1) == 1, .attention = false});
    const int64_t T = m.tokens();
    const int64_t width = m.heads * m.head_dim;
    const int64_t params = m.hidden * (width + 2 * kv * m.head_dim) / m.tp + width / m.tp * m.hidden +
                           m.hidden * (m.gated ? 2 : 1) * m.ffn / m.tp + m.ffn / m.tp * m.hidden;
    EXPECT_EQ(w.layer_totals().total(), 6 * T * params) << describe(m);
    for (const char* layer : {"qkv", "attn_out", "mlp_up", "mlp_down"}) {
      const Gemm& f = find_gemm(w, layer, "fprop");
      const Gemm& d = find_gemm(w, layer, "dgrad");
      const Gemm& g = find_gemm(w, layer, "wgrad");
      EXPECT_EQ(f.flops_exact(), d.flops_exact());
      EXPECT_EQ(f.flops_exact(), g.flops_exact());
      EXPECT_EQ(d.k, f.n);
      EXPECT_EQ(d.n, f.k);
      EXPECT_EQ(g.m, f.k);
      EXPECT_EQ(g.k, f.m);
      EXPECT_EQ(f.m, T);
    }
  }
}

TEST(DeriveGemms, OutputsListEveryGemm) {
  ModelConfig m = codonfm_by_hand();
  m.experts = 4;
  m.top_k = 1;
  m.micro_batch = 3;  // odd token count, so no shape is a round number by accident
  const Workload w = derive_workload(m, {.lm_head = true, .attention = true});
  const nlohmann::json j = to_json(w);
  EXPECT_EQ(j["tokens"], 3 * 512);
  EXPECT_EQ(j["layers"], 24);
  ASSERT_EQ(j["gemms"].size(), w.gemms.size());
  for (size_t i = 0; i < w.gemms.size(); ++i) {
    EXPECT_EQ(j["gemms"][i]["m"], w.gemms[i].m);
    EXPECT_EQ(j["gemms"][i]["flops"], w.gemms[i].flops_exact());
    EXPECT_EQ(j["gemms"][i]["layer"], w.gemms[i].layer);
  }
  EXPECT_EQ(j["totals"]["per_layer"]["total"], w.layer_totals().total());
  EXPECT_EQ(j["totals"]["per_model"]["total"], w.model_totals().total());
  const ModelConfig back = model_from_json(j["model"], "round trip");
  EXPECT_EQ(back, resolved(m));
  EXPECT_EQ(back.moe_ffn, m.effective_moe_ffn());
  EXPECT_EQ(to_json(derive_workload(back, {.lm_head = true, .attention = true}))["gemms"], j["gemms"]);
  const std::string csv = to_csv(w);
  EXPECT_EQ(static_cast<size_t>(std::count(csv.begin(), csv.end(), '\n')), w.gemms.size() + 1);
  const std::string table = to_table(w);
  EXPECT_NE(table.find("per model (24 layers + lm_head)"), std::string::npos);
  EXPECT_NE(table.find("MoE routed tokens, experts: "), std::string::npos);
}

// The MoE token distribution (`--token-imbalance`) and the two MoE GEMM lists (per-expert, grouped).
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
