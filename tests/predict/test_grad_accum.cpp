// Gradient accumulation in the performance model: the weight's part of the quantization traffic, and
// predictions whose step-mode weight quantization is counted once per N micro-batches.
#include "nibble/predict.hpp"
#include "nibble/predict/quant_traffic.hpp"
#include "nibble/quant/recipe_list.hpp"
#include "nibble/results/aggregate.hpp"
#include "nibble/workload/model_sources.hpp"
#include "test_seed.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace nibble::predict {
namespace {

using bench::Mode;

TEST(WeightQuantTraffic, IsTheWeightCopiesOfTheStepFpropAndNothingElse) {
  auto rng = nibble::testing::fresh_rng();
  std::uniform_int_distribution<int64_t> dim(1, 64);
  for (int trial = 0; trial < 20; ++trial) {
    const bench::LinearShape l{128 * dim(rng), 128 * dim(rng), 128 * dim(rng)};
    for (bool hopper : {true, false}) {
      TrafficOptions o;
      o.hopper = hopper;
      for (const std::string& recipe : quant::recipe_names()) {
        for (Mode mode : {Mode::pre_quantized, Mode::step, Mode::per_gemm})
          for (const char* pass : {"fprop", "dgrad", "wgrad"}) {
            const double w = pass_weight_quant_bytes(recipe, pass, mode, l, o);
            const double all = pass_quant_bytes(recipe, pass, mode, l, o);
            EXPECT_GE(w, 0);
            EXPECT_LE(w, all) << recipe << " " << pass;
            if (mode != Mode::step || std::string(pass) != "fprop" || recipe == "bf16") EXPECT_EQ(w, 0) << recipe << pass;
          }
        const double w = pass_weight_quant_bytes(recipe, "fprop", Mode::step, l, o);
        const double all = pass_quant_bytes(recipe, "fprop", Mode::step, l, o);
        if (recipe == "bf16") continue;
        EXPECT_GT(w, 0) << recipe;
        EXPECT_LT(w, all) << recipe;  // X is quantized too
        if (recipe != "quartet") {
          EXPECT_DOUBLE_EQ(w, tensor_quant_bytes(recipe, TensorRole::weight, l.o, l.i, true, true, o));
          // The rest is X with both copies: the step fprop splits exactly into the two tensors.
          EXPECT_NEAR(all - w, tensor_quant_bytes(recipe, TensorRole::activation, l.t, l.i, true, true, o), 1e-6 * all);
        } else {
          // Quartet's forward quantizer costs the same per element for X and W.
          EXPECT_NEAR(w / all, double(l.o) / double(l.o + l.t), 1e-12);
        }
      }
    }
  }
  EXPECT_THROW(pass_weight_quant_bytes("fp9", "fprop", Mode::step, {128, 128, 128}), std::invalid_argument);
  EXPECT_THROW(pass_weight_quant_bytes("mxfp8", "forward", Mode::step, {128, 128, 128}), std::invalid_argument);
}

TEST(PredictGradAccum, StepFpropQuantizationLosesAllButOneNthOfTheWeight) {
  auto rng = nibble::testing::fresh_rng();
  const int n = 2 + static_cast<int>(rng() % 15);
  const auto w = workload::derive_workload(workload::load_preset("mixtral-8x7b"));
  const std::vector<std::string> recipes = {"bf16", "fp8-delayed", "mxfp8", "quartet"};
  const std::vector<Mode> modes = {Mode::pre_quantized, Mode::step, Mode::per_gemm};
  PredictOptions accum;
  accum.grad_accum = n;
  for (const char* gpu : {"H100 SXM", "B200"}) {
    const auto one = predict_bench(w, recipes, modes, gpu);
    const auto many = predict_bench(w, recipes, modes, gpu, accum);
    EXPECT_EQ(one.grad_accum, 1);
    EXPECT_EQ(many.grad_accum, n);
    ASSERT_EQ(one.rows.size(), many.rows.size());
    for (size_t i = 0; i < one.rows.size(); ++i) {
      const bench::Row& a = one.rows[i];
      const bench::Row& b = many.rows[i];
      if (!a.ok()) continue;
      EXPECT_DOUBLE_EQ(a.gemm.median_ms, b.gemm.median_ms);
      EXPECT_DOUBLE_EQ(a.weight_quant_ms, b.weight_quant_ms);  // the full share is reported either way
      const bool amortised = a.mode == Mode::step && a.pass == "fprop" && a.recipe != "bf16" && !a.per_model &&
                             workload::is_block_linear(a.layer);
      if (!amortised) {
        EXPECT_EQ(b.weight_quant_ms, 0.0) << a.layer << " " << a.pass << " " << a.recipe;
        EXPECT_DOUBLE_EQ(a.quant_ms, b.quant_ms);
        continue;
      }
      EXPECT_GT(a.weight_quant_ms, 0);
      EXPECT_NEAR(b.quant_ms, a.quant_ms - a.weight_quant_ms * (1 - 1.0 / n), 1e-9);
      EXPECT_NEAR(b.quant_bytes, a.quant_bytes - a.weight_quant_bytes * (1 - 1.0 / n), 1e-3);
      EXPECT_NEAR(b.total_ms, b.gemm.median_ms + b.quant_ms, 1e-12);
      EXPECT_LT(b.bound_ms, a.bound_ms);
    }
    // The summary: only step-mode quantized recipes get faster, and by exactly their amortised weight share.
    const auto s1 = bench::summarize(one);
    const auto sn = bench::summarize(many);
    for (const auto& s : sn) {
      const auto* base = bench::find_summary(s1, s.recipe, s.mode);
      ASSERT_NE(base, nullptr);
      EXPECT_NEAR(s.weight_quant_share_ms, s.weight_quant_ms / n, 1e-12);
      EXPECT_NEAR(base->layer_ms - s.layer_ms, s.weight_quant_ms * (1 - 1.0 / n), 1e-9) << s.recipe;
      if (s.mode == Mode::step && s.recipe != "bf16") EXPECT_GT(s.weight_quant_ms, 0) << s.recipe;
    }
  }
  PredictOptions bad;
  bad.grad_accum = 0;
  EXPECT_THROW(predict_bench(w, recipes, modes, "H100 SXM", bad), std::invalid_argument);
}

}  // namespace
}  // namespace nibble::predict
