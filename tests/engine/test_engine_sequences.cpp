// The engine's sequence timing on the GPU (skips without one): every linear layer whose rows all ran
// is also timed as one sequence, matched to its rows by name and shape (an MoE block has two layers
// named mlp_up), and the summary sums them. Times are only checked for plausibility of what ran (a
// sequence that skipped its GEMMs would be a small fraction of its parts), never against a target.
#include <gtest/gtest.h>

#include <cmath>

#include "gpu_test_support.hpp"
#include "nibble/bench/aggregate.hpp"
#include "nibble/engine.hpp"
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
  for (const auto& s : bench::summarize(r)) {
    EXPECT_TRUE(std::isfinite(s.sequence_layer_ms)) << s.recipe << " " << bench::to_string(s.mode);
    EXPECT_TRUE(std::isfinite(s.sequence_speedup_vs_bf16)) << s.recipe;
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

}  // namespace
}  // namespace nibble::engine
