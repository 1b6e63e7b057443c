// The optimality map: every cell is the planner's answer; the SVG and CSV say what was drawn.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "nibble/law/optimality_map.hpp"
#include "test_seed.hpp"

namespace nibble::law {
namespace {

size_t count(const std::string& s, const std::string& what) {
  size_t c = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++c;
  return c;
}

TEST(OptimalityMap, CellsAreThePlannersAnswer) {
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  std::uniform_real_distribution<double> sp(1.0, 2.5), eff(0.5, 1.0);
  const Speedups s{sp(rng), sp(rng), "random <test> & co"};
  const Efficiency e{eff(rng), eff(rng)};
  MapGridSpec g;
  g.n_steps = 7;
  g.ratio_steps = 5;
  const OptimalityMap m = compute_optimality_map(published_constants(), e, "random", s, g);
  ASSERT_EQ(m.cells.size(), 35u);
  EXPECT_DOUBLE_EQ(m.cells.front().n, 1e8);
  EXPECT_DOUBLE_EQ(m.cells.front().tokens_per_param, 10);
  EXPECT_NEAR(m.cells.back().n, 1e11, 1e-3);
  EXPECT_NEAR(m.cells.back().tokens_per_param, 2000, 1e-9);
  for (const auto& c : m.cells) {
    const Plan p = plan_precision(published_constants(), e, s, c.n, c.n * c.tokens_per_param);
    EXPECT_EQ(c.best, p.best);
    EXPECT_EQ(c.loss[3], p.schemes[3].loss);
  }
  const std::string csv = optimality_map_csv(m);
  EXPECT_EQ(count(csv, "\n"), 36u);
  EXPECT_EQ(csv.rfind("n,tokens_per_param,d,loss_fp8:fp8,loss_fp4:fp8,loss_fp8:fp4,loss_fp4:fp4,best\n", 0), 0u);
  const std::string svg = optimality_map_svg(m);
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_EQ(count(svg, "<title>"), 35u);
  EXPECT_NE(svg.find("A=1.52e+05"), std::string::npos);
  EXPECT_NE(svg.find("random &lt;test&gt; &amp; co"), std::string::npos);  // escaped, so the SVG stays valid
  EXPECT_EQ(svg.find("<test>"), std::string::npos);
  EXPECT_EQ(svg.find("http://", 60), std::string::npos);  // nothing to fetch
}

TEST(OptimalityMap, PublishedDefaultsNeverPickFp8Fp8InTheMappedRange) {
  // With 2x/2x, effN 0.65, effD 0.95 the FP4:FP4 threshold is a few tokens/param: above D/N = 10
  // some FP4 scheme always beats FP8:FP8.
  const OptimalityMap m =
      compute_optimality_map(published_constants(), published_quartet_efficiency(), "published", Speedups{});
  EXPECT_EQ(m.cells.size(), 31u * 31u);
  EXPECT_TRUE(std::none_of(m.cells.begin(), m.cells.end(), [](const MapCell& c) { return c.best == 0; }));
  for (const auto& c : m.cells) EXPECT_LT(c.loss[3], c.loss[0]);
}

TEST(OptimalityMap, RejectsBadGrids) {
  const auto law = published_constants();
  MapGridSpec g;
  g.n_min = 1e11;
  g.n_max = 1e8;
  EXPECT_THROW(compute_optimality_map(law, {1, 1}, "", Speedups{}, g), std::invalid_argument);
  g = {};
  g.ratio_min = 0;
  EXPECT_THROW(compute_optimality_map(law, {1, 1}, "", Speedups{}, g), std::invalid_argument);
  g = {};
  g.n_steps = 0;
  EXPECT_THROW(compute_optimality_map(law, {1, 1}, "", Speedups{}, g), std::invalid_argument);
}

}  // namespace
}  // namespace nibble::law
