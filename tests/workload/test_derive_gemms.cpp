// GEMM derivation pinned against shapes computed by hand (docs/spec.md §5), plus properties that must
// hold for any valid model.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace nibble::workload
