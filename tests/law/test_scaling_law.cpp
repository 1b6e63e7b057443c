// The law itself: published constants, the formula by hand, what the efficiencies mean, bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "nibble/law/scaling_law.hpp"
#include "test_seed.hpp"

namespace nibble::law {
namespace {

TEST(ScalingLaw, PublishedConstantsAreSpecSection7) {
  const LawConstants c = published_constants();
  EXPECT_EQ(c.A, 1.52e5);
  EXPECT_EQ(c.alpha, 0.589);
  EXPECT_EQ(c.B, 5.25e5);
  EXPECT_EQ(c.beta, 0.544);
  EXPECT_EQ(c.E, 1.35);
  EXPECT_EQ(c.gamma, 0.274);
  EXPECT_NE(c.source.find("published"), std::string::npos);
  EXPECT_EQ(published_quartet_efficiency().eff_n, 0.65);
  EXPECT_EQ(published_quartet_efficiency().eff_d, 0.95);
}

TEST(ScalingLaw, MatchesTheFormulaOnRandomPoints) {
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  std::uniform_real_distribution<double> log_n(std::log(1e7), std::log(1e12)), ratio(1, 3000), eff(0.3, 1.0);
  const LawConstants c = published_constants();
  for (int i = 0; i < 200; ++i) {
    const double n = std::exp(log_n(rng)), d = n * ratio(rng);
    const Efficiency e{eff(rng), eff(rng)};
    const double by_hand = std::pow(c.A / std::pow(n * e.eff_n, c.alpha) + c.B / std::pow(d * e.eff_d, c.beta), c.gamma) + c.E;
    EXPECT_NEAR(predict_loss(c, n, d, e), by_hand, 1e-12 * by_hand);
    // An efficiency is exactly a rescaling of N or D.
    EXPECT_NEAR(predict_loss(c, n, d, e), predict_loss(c, n * e.eff_n, d * e.eff_d), 1e-12 * by_hand);
    EXPECT_GT(predict_loss(c, n, d, e), c.E);
    // More parameters or more tokens never hurt.
    EXPECT_LT(predict_loss(c, 2 * n, d, e), predict_loss(c, n, d, e));
    EXPECT_LT(predict_loss(c, n, 2 * d, e), predict_loss(c, n, d, e));
    EXPECT_NEAR(reducible_term(c, n, d, e), std::pow(by_hand - c.E, 1 / c.gamma), 1e-9 * reducible_term(c, n, d, e));
  }
}

TEST(ScalingLaw, RejectsBadInputNamingTheField) {
  const LawConstants c = published_constants();
  for (double bad : {0.0, -1.0, double(NAN), double(INFINITY)}) {
    EXPECT_THROW(predict_loss(c, bad, 1e9), std::invalid_argument);
    EXPECT_THROW(predict_loss(c, 1e8, bad), std::invalid_argument);
    EXPECT_THROW(predict_loss(c, 1e8, 1e9, {bad, 1}), std::invalid_argument);
    EXPECT_THROW(predict_loss(c, 1e8, 1e9, {1, bad}), std::invalid_argument);
  }
  try {
    predict_loss(c, -5, 1e9);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("N (non-embedding parameters)"), std::string::npos) << e.what();
  }
  LawConstants bad = c;
  bad.alpha = -0.5;
  EXPECT_THROW(predict_loss(bad, 1e8, 1e9), std::invalid_argument);
  bad = c;
  bad.E = -1;
  EXPECT_THROW(validate(bad), std::invalid_argument);
}

}  // namespace
}  // namespace nibble::law
