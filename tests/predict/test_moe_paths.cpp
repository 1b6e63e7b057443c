// The predicted MoE paths: grouped (one quantizer launch per operand, the experts' GEMMs issued back to back)
// against per-expert launches, and the token imbalance's per-expert GEMM shapes.
#include <gtest/gtest.h>

#include <cmath>

#include "nibble/predict.hpp"
#include "nibble/results/aggregate.hpp"
#include "nibble/workload.hpp"

namespace nibble::predict {
namespace {

using bench::Mode;

workload::Workload mixtral(double imbalance, workload::MoePath path) {
  const auto m = workload::load_hf_config("tests/workload/fixtures/mixtral-8x7b.config.json",
                                          [] {
                                            workload::ModelConfig base;
                                            base.micro_batch = 1;
                                            base.seq_len = 4096;
                                            return base;
                                          }());
  return workload::derive_workload(m, {.token_imbalance = imbalance, .moe_path = path});
}

const std::vector<std::string> kRecipes = {"bf16", "fp8-delayed", "mxfp8", "nvfp4"};
const std::vector<Mode> kModes = {Mode::pre_quantized, Mode::step, Mode::per_gemm};

TEST(PredictMoe, GroupedSavesExactlyTheSharedLaunches) {
  for (double r : {1.0, 2.0}) {
    const auto g = predict_bench(mixtral(r, workload::MoePath::grouped), kRecipes, kModes, "H100 SXM");
    const auto p = predict_bench(mixtral(r, workload::MoePath::per_expert), kRecipes, kModes, "H100 SXM");
    for (const auto& c : bench::compare_moe_paths(g, p)) {
      SCOPED_TRACE(c.recipe + " " + std::string(bench::to_string(c.mode)) + " R=" + std::to_string(r));
      ASSERT_TRUE(std::isfinite(c.ratio));
      // Grouped is faster, never by more than the launches it shares: 8 experts x 6 GEMMs (3 passes of
      // mlp_up and mlp_down) share 7 launches each, and the quantizers share theirs.
      int quant_launches_saved = 0;
      for (const char* pass : {"fprop", "dgrad", "wgrad"}) quant_launches_saved += 2 * 7 * quant_launches(c.recipe, pass, c.mode);
      const double expected = (6 * 7 + quant_launches_saved) * kernel_launch_ms();
      EXPECT_LT(c.grouped_ms, c.per_expert_ms);
      EXPECT_NEAR(c.per_expert_ms - c.grouped_ms, expected, 1e-9 + 1e-6 * c.per_expert_ms);
      // Launches are a few percent of an expert layer this large, not more.
      EXPECT_GT(c.ratio, 0.9);
    }
    // The same bytes: a grouped row's quantization moves what its per-expert rows move together.
    const auto sg = bench::summarize(g), sp = bench::summarize(p);
    for (const auto& s : sg) {
      const auto* q = bench::find_summary(sp, s.recipe, s.mode);
      ASSERT_NE(q, nullptr);
      EXPECT_NEAR(s.quant_bytes, q->quant_bytes, 1e-9 * (1 + q->quant_bytes)) << s.recipe;
      EXPECT_DOUBLE_EQ(s.layer_flops, q->layer_flops) << s.recipe;
    }
  }
}

TEST(PredictMoe, ImbalanceKeepsTheWorkAndMovesItToTheHotExpert) {
  const auto even = predict_bench(mixtral(1.0, workload::MoePath::grouped), {"bf16"}, {Mode::pre_quantized}, "H100 SXM");
  const auto hot = predict_bench(mixtral(2.0, workload::MoePath::grouped), {"bf16"}, {Mode::pre_quantized}, "H100 SXM");
  const double e = bench::moe_expert_ms(even, "bf16", Mode::pre_quantized);
  const double h = bench::moe_expert_ms(hot, "bf16", Mode::pre_quantized);
  // R = 2 deals the same 8192 tokens in whole 128-token units (2048, 896 x6, 768): the same FLOPs, so about the
  // same time (the GEMMs are compute bound; the uneven experts' partial waves cost a few percent), not the factor 2
  // of the hot expert alone.
  EXPECT_DOUBLE_EQ(bench::summarize(hot)[0].layer_flops, bench::summarize(even)[0].layer_flops);
  EXPECT_GT(h, e);
  EXPECT_LT(h / e, 1.05);
  // Every grouped row carries the per-expert token counts and the path label.
  for (const auto& row : hot.rows)
    if (!row.moe_path.empty()) {
      EXPECT_EQ(row.group_tokens, (std::vector<int64_t>{2048, 896, 896, 896, 896, 896, 896, 768}));
      EXPECT_EQ(row.moe_path, bench::moe_path::grouped(bench::moe_path::one_quantize_launch));
    }
}

}  // namespace
}  // namespace nibble::predict
