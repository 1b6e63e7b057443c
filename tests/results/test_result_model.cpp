// The small helpers of the result model: bench::row_from_gemm (the row of a workload GEMM) and
// bench::PathNotes (the engine's execution-path note lines per (recipe, layer)).
#include "nibble/results/path_notes.hpp"
#include "nibble/results/row_from_gemm.hpp"
#include "test_seed.hpp"

#include <gtest/gtest.h>

#include <random>

namespace nibble::bench {
namespace {

TEST(RowFromGemm, CopiesShapeAndCountsFlopsPerCall) {
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  std::uniform_int_distribution<int64_t> dim(1, 20000);
  workload::Gemm g;
  g.layer = "mlp_up";
  g.pass = "wgrad";
  g.m = dim(rng);
  g.k = dim(rng);
  g.n = dim(rng);
  g.count = 8;
  g.per_model = true;
  Row r = row_from_gemm(g, "nvfp4", Mode::per_gemm);
  EXPECT_EQ(r.layer, "mlp_up");
  EXPECT_EQ(r.pass, "wgrad");
  EXPECT_EQ(r.m, g.m);
  EXPECT_EQ(r.k, g.k);
  EXPECT_EQ(r.n, g.n);
  EXPECT_EQ(r.count, 8);
  EXPECT_TRUE(r.per_model);
  EXPECT_EQ(r.recipe, "nvfp4");
  EXPECT_EQ(r.mode, Mode::per_gemm);
  EXPECT_DOUBLE_EQ(r.flops * 8, g.flops());
}

TEST(PathNotes, OneUnlabelledLineWhenEveryModeRanTheSamePath) {
  PathNotes n;
  n.add(Mode::pre_quantized, "X: re-encoded per row, exact");
  n.add(Mode::step, "X: re-encoded per row, exact");
  n.add(Mode::per_gemm, "X: re-encoded per row, exact");
  EXPECT_EQ(n.lines("quartet", "qkv"), std::vector<std::string>{"quartet qkv: X: re-encoded per row, exact"});
}

TEST(PathNotes, ModesNamedWhenTheyRanDifferentPaths) {
  PathNotes n;
  n.add(Mode::pre_quantized, "row+col tile");
  n.add(Mode::step, "row+col tile");
  n.add(Mode::per_gemm, "column-wise tile");
  n.add(Mode::step, "row+col tile");  // a mode reported twice is named once
  n.add(Mode::step, "");              // a runner without a note adds nothing
  const std::vector<std::string> want = {"mxfp4 mlp_up: [pre-quantized, step] row+col tile",
                                         "mxfp4 mlp_up: [per-gemm] column-wise tile"};
  EXPECT_EQ(n.lines("mxfp4", "mlp_up"), want);
}

TEST(PathNotes, NoPathNoLine) {
  PathNotes n;
  n.add(Mode::step, "");
  EXPECT_TRUE(n.lines("bf16", "qkv").empty());
}

}  // namespace
}  // namespace nibble::bench
