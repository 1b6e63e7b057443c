// Blackwell predictions from public measurements: the data file's points, the fit, the leave-one-out interval
// and the held-back check (which prints its errors: docs/predict.md quotes them).
#include "nibble/predict.hpp"
#include "nibble/results/aggregate.hpp"
#include "nibble/workload/model_config.hpp"
#include "test_seed.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

namespace nibble::predict {
namespace {

using bench::Mode;

double h100_fp8() { return efficiency_of(calibration_for("H100 SXM"), "fp8-tensor"); }

TEST(PublicCalibration, DataFileNamesItsSourcesAndKnownGpus) {
  const PublicData d = load_public_data();
  const auto gpus = load_gpu_database();
  ASSERT_GE(d.sources.size(), 2u);
  ASSERT_GE(d.points.size(), 10u);
  for (const auto& s : d.sources) {
    EXPECT_EQ(s.url.rfind("https://", 0), 0u) << s.id;
    EXPECT_FALSE(s.where.empty()) << s.id;
  }
  for (const auto& p : d.points) {
    EXPECT_NO_THROW(find_gpu(gpus, p.database_gpu)) << p.database_gpu;
    EXPECT_NO_THROW(execution_for(p.recipe, find_gpu(gpus, p.database_gpu))) << p.recipe;
    // A whole training step cannot run above the tensor cores' dense peak.
    if (p.model_tflops > 0)
      EXPECT_LT(p.model_tflops, execution_for(p.recipe, find_gpu(gpus, p.database_gpu)).peak_tflops) << p.gpu;
  }
}

TEST(PublicCalibration, FitIsTheGeometricMeanTimesTheHopperTransfer) {
  const PublicData d = load_public_data();
  const auto gpus = load_gpu_database();
  const double e_h100 = h100_fp8();
  const PublicFit f = fit_public(d, gpus, e_h100);
  // Recompute the fp8-tensor family the long way.
  double log_h = 0, log_b = 0;
  int nh = 0, nb = 0;
  for (const auto& p : d.points) {
    if (!(p.model_tflops > 0) || blackwell_family(p.recipe) != "fp8-tensor") continue;
    const GpuSpec& g = find_gpu(gpus, p.database_gpu);
    const double u = p.model_tflops / g.fp8_tflops;
    if (g.compute_capability >= 100) log_b += std::log(u), ++nb;
    else log_h += std::log(u), ++nh;
  }
  ASSERT_GT(nh, 0);
  ASSERT_GT(nb, 0);
  const double transfer = e_h100 / std::exp(log_h / nh);
  EXPECT_NEAR(f.transfer, transfer, 1e-12);
  EXPECT_NEAR(f.efficiency.at("fp8-tensor"), transfer * std::exp(log_b / nb), 1e-12);
  for (const auto& [family, e] : f.efficiency) {
    EXPECT_GT(e, 0.2) << family;
    EXPECT_LT(e, 1.0) << family;
  }
  EXPECT_LE(f.low, 1.0);
  EXPECT_GE(f.high, 1.0);
  EXPECT_LT(f.low, f.high);
  EXPECT_GT(f.left_out_points, 5);
}

TEST(PublicCalibration, IntervalWidensWithAScatteredPointAndNeedsAHopperAnchor) {
  auto rng = nibble::testing::fresh_rng();
  const auto gpus = load_gpu_database();
  PublicData d = load_public_data();
  const PublicFit base = fit_public(d, gpus, h100_fp8());
  // Quarter one Blackwell point's throughput: it now runs four times as long as before. Left out of the fit,
  // its family predicts it within the base interval (each point's ratio is at least base.low, 0.69), so its
  // ratio becomes at least 4 * 0.69 = 2.76.
  std::vector<size_t> blackwell;
  for (size_t i = 0; i < d.points.size(); ++i)
    if (d.points[i].model_tflops > 0 && find_gpu(gpus, d.points[i].database_gpu).compute_capability >= 100)
      blackwell.push_back(i);
  ASSERT_FALSE(blackwell.empty());
  d.points[blackwell[rng() % blackwell.size()]].model_tflops *= 0.25;
  const PublicFit wide = fit_public(d, gpus, h100_fp8());
  EXPECT_GT(wide.high, base.high);
  EXPECT_GE(wide.high, 4 * base.low * (1 - 1e-12));  // equal when the quartered point set base.low
  PublicData no_hopper = load_public_data();
  std::erase_if(no_hopper.points, [&](const PublicPoint& p) { return p.database_gpu == "H100 SXM"; });
  EXPECT_THROW(fit_public(no_hopper, gpus, h100_fp8()), std::invalid_argument);
}

TEST(PublicCalibration, HeldBackSourcesArePredictedAndTheErrorsPrinted) {
  const auto errors = held_back_check(load_public_data(), load_gpu_database(), h100_fp8());
  ASSERT_FALSE(errors.empty());
  std::printf("held-back check (fit without the source, predict its Blackwell points):\n");
  double worst = 0;
  for (const auto& e : errors) {
    std::printf("  %-26s %-10s %-12s %-14s published %6.0f  predicted %6.0f  error %+5.1f%%\n", e.source.c_str(),
                e.gpu.c_str(), e.recipe.c_str(), e.model.c_str(), e.published_tflops, e.predicted_tflops,
                100 * e.relative_error);
    EXPECT_NEAR(e.relative_error, e.predicted_tflops / e.published_tflops - 1, 1e-12);
    worst = std::max(worst, std::abs(e.relative_error));
  }
  // Not a target, a tripwire: a data entry off by an order of magnitude would exceed it.
  EXPECT_LT(worst, 0.6);
}

TEST(PublicCalibration, BlackwellPredictionsCarryTheIntervalAndHopperOnesDoNot) {
  const auto w = workload::derive_workload(workload::load_preset("llama-3-8b"));
  for (const char* gpu : {"B200", "GB200", "B300", "RTX 5090"}) {
    const auto r = predict_bench(w, {"bf16", "fp8-current", "mxfp8", "nvfp4"}, {Mode::pre_quantized, Mode::step}, gpu);
    ASSERT_TRUE(r.interval.present()) << gpu;
    for (const auto& s : bench::summarize(r)) {
      EXPECT_LE(s.layer_ms_low, s.layer_ms) << gpu;
      EXPECT_GE(s.layer_ms_high, s.layer_ms) << gpu;
      EXPECT_NEAR(s.layer_ms_high / s.layer_ms, r.interval.high, 1e-12);
    }
    const auto j = bench::to_json(r);
    EXPECT_TRUE(j["summary"][0]["layer_ms_low"].is_number());
    EXPECT_TRUE(j["prediction_interval"].is_object());
  }
  const auto h = predict_bench(w, {"bf16", "fp8-current"}, {Mode::pre_quantized}, "H100 SXM");
  EXPECT_FALSE(h.interval.present());
  EXPECT_TRUE(bench::to_json(h)["prediction_interval"].is_null());
}

}  // namespace
}  // namespace nibble::predict
