// bench::PathNotes: the engine's execution-path note lines per (recipe, layer).
#include "nibble/results/path_notes.hpp"

#include <gtest/gtest.h>

namespace nibble::bench {
namespace {

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
