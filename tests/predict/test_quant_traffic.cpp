// The quantization traffic account (predict/quant_traffic.hpp) that the engine's rows and the
// predictions share: equal to what the engine reported in a real H200 run, and consistent with itself;
// with gradient accumulation, the weight's part of it, counted once per N micro-batches in step mode.
#include "nibble/predict.hpp"
#include "nibble/predict/quant_traffic.hpp"
#include "nibble/quant/recipe_list.hpp"
#include "nibble/results/aggregate.hpp"
#include "nibble/results/result.hpp"
#include "nibble/workload/model_config.hpp"
#include "test_seed.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace nibble::predict {
namespace {

using bench::Mode;

// Every autocast row of the H200 calibration measurement (the byte counts its engine wrote) has the
// bytes the account gives for its GEMM, with one known difference: that file counts NVFP4 weight
// scales as 1x16 blocks (n / 16 bytes per copy) although W has 16x16 blocks (n / 256); the account
// has n / 256, so the step's fprop rows (W quantized with both copies, each written and read back by
// the decode) are 4 (1/16 - 1/256) O I bytes lower, and no other row differs.
TEST(QuantTraffic, EqualsTheEngineCountsOfAMeasuredRun) {
  const auto measured = bench::read_result_file(
      (workload::data_dir() / "calibration" / kMeasuredCalibrationFile).string());
  const auto gpus = load_gpu_database();
  const GpuSpec& h200 = find_gpu(gpus, "H200 SXM");
  int compared = 0;
  for (const auto& r : measured.rows) {
    if (!r.ok() || !bench::is_autocast(r.mode)) continue;
    double want = r.quant_bytes;
    if (r.recipe == "nvfp4" && r.pass == "fprop") {
      const bench::LinearShape l = bench::linear_shape(r);
      want -= 4.0 * (1.0 / 16 - 1.0 / 256) * double(l.o) * double(l.i);
    }
    const double got = quant_bytes(r.recipe, r.pass, r.mode, Shape{r.m, r.k, r.n, 1}, h200);
    EXPECT_NEAR(got, want, 1e-9 * want + 1e-6) << r.recipe << " " << r.layer << " " << r.pass << " "
                                               << bench::to_string(r.mode);
    ++compared;
  }
  EXPECT_EQ(compared, 8 * 12);  // every recipe, every GEMM of the layer, step mode
}

// Step and per-gemm quantize the same tensors differently: step writes both copies of X, W (fprop) and
// dY (dgrad) once; per-gemm writes one copy per GEMM operand, re-reading the BF16 source each time.
// Blackwell (native formats, FP8 GEMMs in any layout) moves less, except fp8-block (the same copies).
TEST(QuantTraffic, ModesAndArchitecturesAgreeWithTheTensorCalls) {
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  std::uniform_int_distribution<int64_t> dim(1, 64);
  for (int trial = 0; trial < 20; ++trial) {
    const bench::LinearShape l{128 * dim(rng), 128 * dim(rng), 128 * dim(rng)};
    for (const std::string& r : quant::recipe_names()) {
      double step = 0, per_gemm = 0, step_bw = 0;
      for (const char* pass : {"fprop", "dgrad", "wgrad"}) {
        EXPECT_EQ(pass_quant_bytes(r, pass, Mode::pre_quantized, l), 0.0);
        step += pass_quant_bytes(r, pass, Mode::step, l);
        per_gemm += pass_quant_bytes(r, pass, Mode::per_gemm, l);
        step_bw += pass_quant_bytes(r, pass, Mode::step, l, TrafficOptions{.hopper = false});
      }
      if (r != "quartet") {
        EXPECT_EQ(pass_quant_bytes(r, "wgrad", Mode::step, l), 0.0) << r;  // reuses the copies
      }
      if (r == "bf16") {
        EXPECT_EQ(step + per_gemm, 0.0);
        continue;
      }
      EXPECT_GT(per_gemm, step) << r;  // three BF16 reads per tensor instead of one
      if (r == "quartet") continue;
      const double t = double(l.t), i = double(l.i), o = double(l.o);
      auto both = [&](TensorRole role, double rows, double cols, TrafficOptions opt) {
        return tensor_quant_bytes(r, role, int64_t(rows), int64_t(cols), true, true, opt);
      };
      EXPECT_DOUBLE_EQ(step, both(TensorRole::activation, t, i, {}) + both(TensorRole::weight, o, i, {}) +
                                 both(TensorRole::gradient, t, o, {})) << r;
      // Blackwell: no decode or re-encoding, and one per-tensor FP8 copy instead of two.
      const bool less_on_blackwell = r != "fp8-block";
      if (less_on_blackwell) {
        EXPECT_LT(step_bw, step) << r;
      } else {
        EXPECT_EQ(step_bw, step) << r;
      }
    }
  }
}

TEST(QuantTraffic, PerTensorFormulas) {
  const double n = 4096.0 * 1024;
  auto one = [&](const char* r, TensorRole role, bool row, bool col, bool hopper = true) {
    return tensor_quant_bytes(r, role, 4096, 1024, row, col, TrafficOptions{.hopper = hopper});
  };
  EXPECT_EQ(one("fp8-delayed", TensorRole::activation, true, true), 4 * n);   // read 2, write 1 + 1
  EXPECT_EQ(one("fp8-current", TensorRole::activation, true, false), 5 * n);  // read twice, write 1
  EXPECT_EQ(one("fp8-current", TensorRole::activation, true, true, false), 5 * n);  // Blackwell: one copy for all
  EXPECT_EQ(one("fp8-block", TensorRole::activation, true, false), 3 * n + n / 32);
  EXPECT_EQ(one("fp8-block", TensorRole::weight, true, false), 3 * n + n / 4096);
  EXPECT_EQ(one("mxfp8", TensorRole::activation, true, false, false), 3 * n + n / 32);
  EXPECT_EQ(one("mxfp8", TensorRole::activation, true, false), 3 * n + n / 32 + (n + n / 32) + 2 * n);
  EXPECT_EQ(one("nvfp4", TensorRole::weight, true, false, false), 4 * n + n / 2 + n / 256);
  EXPECT_EQ(one("mxfp4", TensorRole::gradient, false, true), 2 * n + (n / 2 + n / 32) + (n / 2 + n / 32 + n));
  EXPECT_EQ(one("bf16", TensorRole::activation, true, true), 0.0);
  EXPECT_EQ(one("mxfp4", TensorRole::activation, false, false), 0.0);
  EXPECT_THROW(one("quartet", TensorRole::activation, true, false), std::invalid_argument);
  EXPECT_THROW(one("fp6", TensorRole::activation, true, false), std::invalid_argument);
  EXPECT_THROW(pass_quant_bytes("fp8-block", "backward", Mode::step, {128, 128, 128}), std::invalid_argument);
}

}  // namespace
}  // namespace nibble::predict

// Gradient accumulation in the performance model: the weight's part of the quantization traffic, and
// predictions whose step-mode weight quantization is counted once per N micro-batches.
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
            if (mode != Mode::step || std::string(pass) != "fprop" || recipe == "bf16") {
              EXPECT_EQ(w, 0) << recipe << pass;
            }
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
      if (s.mode == Mode::step && s.recipe != "bf16") {
        EXPECT_GT(s.weight_quant_ms, 0) << s.recipe;
      }
    }
  }
  PredictOptions bad;
  bad.grad_accum = 0;
  EXPECT_THROW(predict_bench(w, recipes, modes, "H100 SXM", bad), std::invalid_argument);
}

}  // namespace
}  // namespace nibble::predict
