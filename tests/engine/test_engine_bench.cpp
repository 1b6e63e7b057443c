// The engine on the GPU (skips without one), on a small MoE block. Sequence timing: every linear layer
// whose rows all ran is also timed as one sequence, matched to its rows by name and shape (an MoE
// block has two layers named mlp_up), and the summary sums them; times are only checked for
// plausibility of what ran (a sequence that skipped its GEMMs would be a small fraction of its parts),
// never against a target. Memory: what the device held for a layer brackets the modelled operands.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "gpu_test_support.hpp"
#include "nibble/results/aggregate.hpp"
#include "nibble/engine.hpp"
#include "nibble/predict.hpp"
#include "nibble/workload.hpp"

namespace nibble::engine {
namespace {

using bench::Mode;

workload::Workload small_moe_block() {
  workload::ModelConfig m;
  m.name = "sequence-test-moe";
  m.hidden = 1024;
  m.ffn = 2048;
  m.heads = 8;
  m.layers = 2;
  m.vocab = 128;  // required by the workload's validation (no LM head is derived here)
  m.experts = 4;
  m.top_k = 2;
  m.shared_experts = 1;
  m.micro_batch = 2;
  m.seq_len = 1024;
  return workload::derive_workload(m);
}

EngineOptions options(bool sequences) {
  EngineOptions o;
  o.recipes = {"bf16", "fp8-delayed", "fp8-current", "fp8-block", "mxfp8", "nvfp4", "mxfp4", "quartet"};
  o.modes = {Mode::pre_quantized, Mode::step, Mode::per_gemm};
  o.iters = 3;
  o.warmup = 1;
  o.time_sequences = sequences;
  return o;
}

TEST(EngineSequences, EveryLayerTimedAsOneSequenceAndSummed) {
  NIBBLE_REQUIRE_GPU();
  const auto w = small_moe_block();
  const bench::BenchResult r = run_bench(w, options(true));
  size_t layers_with_rows = 0;
  for (const bench::Row& row : r.rows) {
    ASSERT_TRUE(row.ok()) << row.layer << " " << row.pass << " " << row.recipe << ": " << row.error;
    if (row.pass != "fprop") continue;
    ++layers_with_rows;
    int found = 0;
    for (const bench::SequenceTiming& q : r.sequences)
      if (q.layer == row.layer && q.recipe == row.recipe && q.mode == row.mode &&
          bench::linear_shape(row) == bench::LinearShape{q.t, q.i, q.o}) {
        ++found;
        EXPECT_EQ(q.count, row.count);
        EXPECT_EQ(q.timing.n_runs, 3);
        EXPECT_GT(q.timing.median_ms, 0);
        const double parts = bench::sequence_parts_ms(r, q);
        EXPECT_GT(q.timing.median_ms, 0.3 * parts) << q.layer << " " << q.recipe;
        EXPECT_LT(q.timing.median_ms, 3.0 * parts) << q.layer << " " << q.recipe;
      }
    EXPECT_EQ(found, 1) << row.layer << " " << row.recipe << " " << bench::to_string(row.mode);
  }
  EXPECT_EQ(r.sequences.size(), layers_with_rows);
  // Path notes: one per (recipe, layer) when every mode ran the same path, else one per path, each naming
  // its modes ("[step, per-gemm] ...").
  // (Layers that share a name, the MoE block's two mlp_up, may run different paths: not checked.)
  std::map<std::string, std::set<std::tuple<int64_t, int64_t, int64_t>>> shapes_of_name;
  for (const bench::Row& row : r.rows)
    if (row.pass == "fprop") shapes_of_name[row.layer].insert({row.m, row.n, row.k});
  for (const bench::Row& row : r.rows) {
    if (row.pass != "fprop" || row.mode != Mode::step || shapes_of_name[row.layer].size() > 1) continue;
    const std::string head = row.recipe + " " + row.layer + ": ";
    std::vector<std::string> texts;
    for (const std::string& n : r.notes)
      if (n.compare(0, head.size(), head) == 0) texts.push_back(n.substr(head.size()));
    if (texts.size() > 1) {
      for (const std::string& t : texts) EXPECT_EQ(t.front(), '[') << head << t;
    }
  }
  // The clock monitor sampled the GPU through NVML while the sweep ran (the driver installs NVML).
  EXPECT_TRUE(r.clocks.available) << r.clocks.source;
  EXPECT_GT(r.clocks.samples, 0);
  EXPECT_GT(r.clocks.sm_clock_mhz_min, 0);
  EXPECT_LE(r.clocks.sm_clock_mhz_max, 5000);
  // With NVML, the NVIDIA driver's own version ("580.159.04"), not the CUDA driver API's ("13.0").
  EXPECT_EQ(r.gpu.driver_version.find("CUDA driver API"), std::string::npos) << r.gpu.driver_version;
  EXPECT_GE(std::count(r.gpu.driver_version.begin(), r.gpu.driver_version.end(), '.'), 1) << r.gpu.driver_version;
  // Peak HBM bandwidth from the memory clock and bus width: within 1.0-10 TB/s on any data-centre GPU,
  // and above the copy bandwidth the run measured.
  EXPECT_GT(r.gpu.memory_bandwidth_gbs, 1000.0);
  EXPECT_LT(r.gpu.memory_bandwidth_gbs, 10000.0);
  EXPECT_GT(r.gpu.memory_bandwidth_gbs, r.copy_bandwidth_gbs);
  // The runtime's device name finds the GPU database entry (device_names), so every timed row has its
  // share of the datasheet peak (device_names lists each runtime spelling: "NVIDIA H100 80GB HBM3").
  bool in_database = true;
  try {
    (void)predict::find_gpu(predict::load_gpu_database(), r.gpu.name);
  } catch (const std::invalid_argument&) {
    in_database = false;
  }
  if (in_database) {
    for (const auto& row : r.rows) {
      if (row.ok()) {
        EXPECT_TRUE(std::isfinite(row.pct_of_peak) && row.pct_of_peak > 0) << row.layer << " " << row.recipe;
      }
    }
  }
  for (const auto& s : bench::summarize(r)) {
    EXPECT_TRUE(std::isfinite(s.sequence_layer_ms)) << s.recipe << " " << bench::to_string(s.mode);
    EXPECT_TRUE(std::isfinite(s.sequence_speedup_vs_bf16)) << s.recipe;
  }
}

TEST(EngineMemory, MeasuredBracketsTheModelledOperands) {
  NIBBLE_REQUIRE_GPU();
  const auto w = small_moe_block();
  auto o = options(false);
  o.modes = {Mode::step};
  const bench::BenchResult r = run_bench(w, o);
  // The measurement adds the BF16 sources X, W, dY and the GEMM output buffers (at most two of the
  // largest of T x O, T x I, I x O in BF16) to the modelled operands, plus allocation rounding.
  int64_t extra = 0;
  for (const auto& g : w.gemms) {
    if (g.pass != "fprop" || g.per_model) continue;
    const int64_t t = g.m, i = g.k, n = g.n;
    extra = std::max(extra, 2 * (t * i + n * i + t * n) + 2 * 2 * std::max({t * n, t * i, i * n}));
  }
  const int64_t slack = int64_t{48} * (2 << 20);  // up to 2 MiB of rounding for each of at most 48 buffers
  ASSERT_EQ(r.memory.size(), o.recipes.size());
  for (const auto& m : r.memory) {
    EXPECT_GT(m.operand_bytes, 0) << m.recipe;
    EXPECT_GE(m.measured_bytes, m.operand_bytes) << m.recipe << ": the model counts buffers the runner does not hold";
    EXPECT_LE(m.measured_bytes, m.operand_bytes + extra + slack) << m.recipe << ": the model misses buffers";
  }
}

TEST(EngineSequences, OffMeansNone) {
  NIBBLE_REQUIRE_GPU();
  auto o = options(false);
  o.recipes = {"bf16", "mxfp4"};
  const bench::BenchResult r = run_bench(small_moe_block(), o);
  EXPECT_FALSE(r.rows.empty());
  EXPECT_TRUE(r.sequences.empty());
  for (const auto& s : bench::summarize(r)) EXPECT_TRUE(std::isnan(s.sequence_layer_ms));
}

// Repeated sweeps (`nibble bench --repeat`): every recipe ran in each sweep, the rows are medians over them,
// and each sweep's per-layer result is kept.
TEST(EngineSweeps, TwoSweepsInRotatedOrderMergeIntoOne) {
  NIBBLE_REQUIRE_GPU();
  auto o = options(false);
  o.recipes = {"bf16", "fp8-current", "mxfp4"};
  o.modes = {Mode::pre_quantized, Mode::step};
  std::vector<double> progress;
  o.progress = [&progress](double f, const std::string&) { progress.push_back(f); };
  const bench::BenchResult r = run_bench_sweeps(small_moe_block(), o, 2);
  EXPECT_EQ(r.sweeps, 2);
  ASSERT_FALSE(r.rows.empty());
  EXPECT_EQ(r.rows.front().recipe, "bf16");  // sweep 0's order
  for (const bench::Row& row : r.rows) {
    ASSERT_TRUE(row.ok()) << row.layer << " " << row.recipe << ": " << row.error;
    EXPECT_EQ(row.gemm.n_runs, 2 * 3) << row.layer << " " << row.recipe;
    EXPECT_GT(row.gemm.median_ms, 0);
  }
  ASSERT_EQ(r.sweep_summaries.size(), 3u * 2u);
  for (const auto& s : r.sweep_summaries) {
    ASSERT_EQ(s.layer_ms.size(), 2u);
    for (double ms : s.layer_ms) EXPECT_GT(ms, 0) << s.recipe;
  }
  ASSERT_FALSE(progress.empty());
  EXPECT_TRUE(std::is_sorted(progress.begin(), progress.end()));
  EXPECT_GT(progress.back(), 0.99);
  EXPECT_LT(progress.front(), 0.5);  // the first sweep reports the first half
  EXPECT_THROW(run_bench_sweeps(small_moe_block(), o, 0), std::invalid_argument);
}

}  // namespace
}  // namespace nibble::engine
