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

}  // namespace
}  // namespace nibble::bench
