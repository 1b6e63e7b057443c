// Hadamard rotations: the butterfly equals the Sylvester matrix, is orthonormal and self-inverse,
// with and without signs, for every size.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "nibble/quant.hpp"
#include "test_seed.hpp"

using namespace nibble::quant;

namespace {
// Sylvester H_n entry (i, j) = (-1)^popcount(i & j), unnormalised.
double sylvester(int i, int j) { return (__builtin_popcount(i & j) & 1) ? -1.0 : 1.0; }

const Rotation kRotations[] = {
    {16, SignKind::none, 0},  {32, SignKind::none, 0},  {64, SignKind::none, 0},   {128, SignKind::none, 0},
    {16, SignKind::seeded, 7}, {32, SignKind::seeded, 99}, {64, SignKind::seeded, 3}, {128, SignKind::seeded, 1234},
    {16, SignKind::nvfp4_fixed, 0},
};
}  // namespace

TEST(Hadamard, ButterflyMatchesSignedSylvesterMatrix) {
  for (const Rotation& r : kRotations) {
    const int n = r.size;
    for (int i = 0; i < n; ++i) {
      std::vector<float> e(n, 0.0f);
      e[i] = 1.0f;
      rotate_block_forward(e.data(), r);  // row i of diag(s) H / sqrt(n)
      for (int j = 0; j < n; ++j) {
        const double want = rotation_sign(r, i) * sylvester(i, j) / std::sqrt(static_cast<double>(n));
        ASSERT_NEAR(e[j], want, 1e-7) << n << " " << i << " " << j;
      }
    }
  }
}

TEST(Hadamard, OrthonormalAndSelfInverse) {
  const uint64_t seed = testdata::fresh_seed();
  for (const Rotation& r : kRotations) {
    const int64_t rows = 8, cols = 256;
    std::vector<float> x = testdata::gaussian(rows, cols, seed + r.size);
    std::vector<float> y = x;
    hadamard_transform(y.data(), rows, cols, r, false);
    for (int64_t row = 0; row < rows; ++row) {
      for (int64_t b = 0; b < cols; b += r.size) {
        double nx = 0, ny = 0;
        for (int j = 0; j < r.size; ++j) {
          nx += double(x[row * cols + b + j]) * x[row * cols + b + j];
          ny += double(y[row * cols + b + j]) * y[row * cols + b + j];
        }
        EXPECT_NEAR(ny, nx, 1e-5 * nx) << "norm preserved per block, size " << r.size;
      }
    }
    EXPECT_NE(y, x);
    hadamard_transform(y.data(), rows, cols, r, true);
    // Rounding error grows with log2(n) butterfly stages and scales with the row's magnitude.
    for (int64_t row = 0; row < rows; ++row) {
      const float m = amax_of(x.data() + row * cols, cols);
      for (int64_t c = 0; c < cols; ++c) {
        ASSERT_NEAR(y[row * cols + c], x[row * cols + c], 1e-6f * m) << r.size;
      }
    }
  }
}

TEST(Hadamard, SignsDependOnSeedAndAreBalanced) {
  int negatives = 0, differ = 0;
  for (int j = 0; j < 128; ++j) {
    negatives += rotation_sign(Rotation{128, SignKind::seeded, 5}, j) < 0;
    differ += rotation_sign(Rotation{128, SignKind::seeded, 5}, j) != rotation_sign(Rotation{128, SignKind::seeded, 6}, j);
  }
  EXPECT_GT(negatives, 32);
  EXPECT_LT(negatives, 96);
  EXPECT_GT(differ, 32);
  int fixed_neg = 0;
  for (int j = 0; j < 16; ++j) fixed_neg += rotation_sign(Rotation{16, SignKind::nvfp4_fixed, 0}, j) < 0;
  EXPECT_EQ(fixed_neg, 10);
}

TEST(Hadamard, RejectsBadSizes) {
  std::vector<float> x(96, 1.5f);
  EXPECT_THROW(hadamard_transform(x.data(), 1, 96, Rotation{24, SignKind::none, 0}, false), std::invalid_argument);
  EXPECT_THROW(hadamard_transform(x.data(), 1, 96, Rotation{64, SignKind::none, 0}, false), std::invalid_argument);
  EXPECT_THROW(hadamard_transform(nullptr, 1, 96, Rotation{32, SignKind::none, 0}, false), std::invalid_argument);
}
