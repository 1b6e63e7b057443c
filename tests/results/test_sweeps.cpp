// Repeated sweeps: rotation order and the merge of several results of one benchmark into one.
#include "handmade_result.hpp"
#include "nibble/results/aggregate.hpp"
#include "nibble/results/sweeps.hpp"
#include "test_seed.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace nibble::bench {
namespace {

const std::vector<std::string> kRecipes = {"bf16", "fp8-delayed", "quartet"};
const std::vector<Mode> kModes = {Mode::pre_quantized, Mode::step, Mode::per_gemm};

double median3(double a, double b, double c) { return std::max(std::min(a, b), std::min(std::max(a, b), c)); }

// Three sweeps of the same benchmark (fresh random timings each), sweep s in sweep_order(kRecipes, s).
std::vector<BenchResult> three_sweeps(std::mt19937_64& rng) {
  std::vector<BenchResult> s;
  for (int k = 0; k < 3; ++k) {
    BenchResult b = testing::handmade_result(rng, sweep_order(kRecipes, k), kModes);
    b.copy_bandwidth_gbs = 4000.0 + 100.0 * k;
    b.clocks.available = true;
    b.clocks.samples = 100 * (k + 1);
    b.clocks.sm_clock_mhz_min = 1100.0 + 10 * k;
    b.clocks.sm_clock_mhz_median = 1400.0 + 50 * k;
    b.clocks.sm_clock_mhz_max = 1980.0 - k;
    b.clocks.power_capped_fraction = 0.5 * k;
    for (MemoryUsage& u : b.memory)
      if (u.recipe == "bf16") u.measured_bytes = 1000 * (k + 1);
    s.push_back(std::move(b));
  }
  return s;
}

const Row& find(const BenchResult& r, const Row& like) {
  for (const Row& x : r.rows)
    if (x.layer == like.layer && x.pass == like.pass && x.recipe == like.recipe && x.mode == like.mode &&
        x.m == like.m && x.k == like.k && x.n == like.n)
      return x;
  throw std::logic_error("row not found");
}

TEST(Sweeps, OrderRotatesEveryRecipeThroughEveryPosition) {
  EXPECT_EQ(sweep_order(kRecipes, 0), kRecipes);
  EXPECT_EQ(sweep_order(kRecipes, 1), (std::vector<std::string>{"fp8-delayed", "quartet", "bf16"}));
  EXPECT_EQ(sweep_order(kRecipes, 2), (std::vector<std::string>{"quartet", "bf16", "fp8-delayed"}));
  EXPECT_EQ(sweep_order(kRecipes, 3), kRecipes);
  EXPECT_TRUE(sweep_order({}, 2).empty());
}

TEST(Sweeps, EveryRowIsTheMedianOverTheSweeps) {
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  const auto s = three_sweeps(rng);
  const BenchResult m = merge_sweeps(s);
  ASSERT_EQ(m.rows.size(), s[0].rows.size());
  EXPECT_EQ(m.sweeps, 3);
  for (size_t i = 0; i < m.rows.size(); ++i) {
    const Row& r = m.rows[i];
    // Sweep 0's order is kept (the tables' column order).
    EXPECT_EQ(r.recipe, s[0].rows[i].recipe);
    const Row &a = find(s[0], r), &b = find(s[1], r), &c = find(s[2], r);
    EXPECT_DOUBLE_EQ(r.gemm.median_ms, median3(a.gemm.median_ms, b.gemm.median_ms, c.gemm.median_ms));
    EXPECT_DOUBLE_EQ(r.gemm.p90_ms, median3(a.gemm.p90_ms, b.gemm.p90_ms, c.gemm.p90_ms));
    EXPECT_DOUBLE_EQ(r.gemm.min_ms, std::min({a.gemm.min_ms, b.gemm.min_ms, c.gemm.min_ms}));
    EXPECT_DOUBLE_EQ(r.gemm.max_ms, std::max({a.gemm.max_ms, b.gemm.max_ms, c.gemm.max_ms}));
    EXPECT_EQ(r.gemm.n_runs, a.gemm.n_runs + b.gemm.n_runs + c.gemm.n_runs);
    EXPECT_DOUBLE_EQ(r.quant_ms, median3(a.quant_ms, b.quant_ms, c.quant_ms));
    EXPECT_DOUBLE_EQ(r.total_ms, r.gemm.median_ms + r.quant_ms);
    EXPECT_NEAR(r.tflops, r.flops / (r.total_ms * 1e-3) / 1e12, 1e-9 * r.tflops);
    EXPECT_NEAR(r.pct_of_peak, 42.5 * a.gemm.median_ms / r.gemm.median_ms, 1e-9);
  }
  // Bounds recomputed from the merged GEMM times and the median copy bandwidth (4100).
  EXPECT_DOUBLE_EQ(m.copy_bandwidth_gbs, 4100.0);
  for (const Row& r : m.rows)
    if (r.mode == Mode::per_gemm) {
      EXPECT_NEAR(r.bound_ms, r.gemm.median_ms + r.quant_bytes / 4.1e12 * 1e3, 1e-12);
    }
  // Sequences likewise.
  ASSERT_EQ(m.sequences.size(), s[0].sequences.size());
  for (size_t i = 0; i < m.sequences.size(); ++i) {
    std::vector<double> v;
    for (const auto& sw : s)
      for (const auto& q : sw.sequences)
        if (q.layer == m.sequences[i].layer && q.recipe == m.sequences[i].recipe && q.mode == m.sequences[i].mode)
          v.push_back(q.timing.median_ms);
    ASSERT_EQ(v.size(), 3u);
    EXPECT_DOUBLE_EQ(m.sequences[i].timing.median_ms, median3(v[0], v[1], v[2]));
  }
  // Memory: the most any sweep measured; clocks pooled.
  ASSERT_EQ(m.memory[0].recipe, "bf16");
  EXPECT_EQ(m.memory[0].measured_bytes, 3000);
  EXPECT_EQ(m.clocks.samples, 600);
  EXPECT_DOUBLE_EQ(m.clocks.sm_clock_mhz_min, 1100.0);
  EXPECT_DOUBLE_EQ(m.clocks.sm_clock_mhz_max, 1980.0);
  EXPECT_DOUBLE_EQ(m.clocks.sm_clock_mhz_median, 1450.0);
  EXPECT_NEAR(m.clocks.power_capped_fraction, (0 * 100 + 0.5 * 200 + 1.0 * 300) / 600.0, 1e-12);
}

TEST(Sweeps, EachSweepsSummaryIsKept) {
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  const auto s = three_sweeps(rng);
  const BenchResult m = merge_sweeps(s);
  ASSERT_EQ(m.sweep_summaries.size(), summarize(m).size());
  for (const SweepSummary& w : m.sweep_summaries) {
    ASSERT_EQ(w.layer_ms.size(), 3u);
    for (int k = 0; k < 3; ++k) {
      const auto sums = summarize(s[k]);
      const RecipeSummary* x = find_summary(sums, w.recipe, w.mode);
      ASSERT_TRUE(x);
      EXPECT_DOUBLE_EQ(w.layer_ms[k], x->layer_ms);
      EXPECT_DOUBLE_EQ(w.speedup_vs_bf16[k], x->speedup_vs_bf16);
    }
  }
  // They survive the JSON round trip, and the merged result says how it was made.
  const BenchResult back = result_from_json(to_json(m));
  EXPECT_EQ(back.sweeps, 3);
  ASSERT_EQ(back.sweep_summaries.size(), m.sweep_summaries.size());
  for (size_t i = 0; i < back.sweep_summaries.size(); ++i) {
    EXPECT_EQ(back.sweep_summaries[i].recipe, m.sweep_summaries[i].recipe);
    EXPECT_EQ(back.sweep_summaries[i].layer_ms, m.sweep_summaries[i].layer_ms);
  }
  EXPECT_TRUE(std::any_of(m.notes.begin(), m.notes.end(), [](const std::string& n) {
    return n.find("3 sweeps") != std::string::npos &&
           n.find("copy bandwidth per sweep 4000, 4100, 4200 GB/s (the bounds use their median, 4100 GB/s") !=
               std::string::npos;
  }));
}

// Two rows measuring the same GEMM (an MoE's routed and shared experts at one shape) keep their own medians:
// they are matched by their order among such rows.
TEST(Sweeps, RowsOfTheSameShapeMatchInOrder) {
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  auto s = three_sweeps(rng);
  const Row original = s[0].rows.front();
  for (size_t k = 0; k < s.size(); ++k) {
    Row twin = find(s[k], original);  // the same GEMM in sweep k (its rows come in another recipe order)
    twin.count = 7;
    twin.gemm.median_ms = 100.0 + static_cast<double>(k);  // far from every other row's 0.05 .. 2 ms
    s[k].rows.push_back(twin);
  }
  const BenchResult m = merge_sweeps(s);
  const Row& a = m.rows.front();
  const Row& b = m.rows.back();
  ASSERT_EQ(b.count, 7);
  EXPECT_DOUBLE_EQ(b.gemm.median_ms, 101.0);
  std::vector<double> v;
  for (const auto& sw : s) v.push_back(find(sw, a).gemm.median_ms);  // find: the first occurrence
  EXPECT_DOUBLE_EQ(a.gemm.median_ms, median3(v[0], v[1], v[2]));
  EXPECT_LT(a.gemm.median_ms, 50.0);
}

TEST(Sweeps, AFailureInAnySweepMarksTheRow) {
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  auto s = three_sweeps(rng);
  Row& bad = s[2].rows[4];
  bad.error = "out of memory: 9 GiB needed";
  const BenchResult m = merge_sweeps(s);
  const Row& r = find(m, bad);
  EXPECT_EQ(r.error, "sweep 2: out of memory: 9 GiB needed");
  EXPECT_EQ(std::count_if(m.rows.begin(), m.rows.end(), [](const Row& x) { return !x.ok(); }), 1);
}

TEST(Sweeps, OneSweepIsReturnedAsItIsAndMismatchesAreRefused) {
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  auto s = three_sweeps(rng);
  const BenchResult one = merge_sweeps({s[0]});
  EXPECT_EQ(one.sweeps, 1);
  EXPECT_TRUE(one.sweep_summaries.empty());
  EXPECT_EQ(one.rows.size(), s[0].rows.size());
  EXPECT_THROW(merge_sweeps({}), std::invalid_argument);
  s[1].rows.pop_back();
  EXPECT_THROW(merge_sweeps(s), std::invalid_argument);
  s[1].rows.push_back(s[1].rows.back());
  s[1].rows.back().m += 1;  // same count, another shape
  EXPECT_THROW(merge_sweeps(s), std::invalid_argument);
}

TEST(Sweeps, JsonRefusesMalformedSweepFields) {
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  const BenchResult m = merge_sweeps(three_sweeps(rng));
  auto j = to_json(m);
  j["sweeps"] = 0;
  EXPECT_THROW(result_from_json(j), std::invalid_argument);
  j = to_json(m);
  j["sweep_summaries"][0]["layer_ms"].erase(0);
  EXPECT_THROW(result_from_json(j), std::invalid_argument);
  j = to_json(m);
  j["sweep_summaries"][0]["mode"] = "sideways";
  EXPECT_THROW(result_from_json(j), std::invalid_argument);
  j = to_json(m);
  j.erase("sweeps");
  j.erase("sweep_summaries");
  const BenchResult old = result_from_json(j);  // a file from before --repeat
  EXPECT_EQ(old.sweeps, 1);
  EXPECT_TRUE(old.sweep_summaries.empty());
}

}  // namespace
}  // namespace nibble::bench
