// Fresh random test data from replayable seeds (test_seed.hpp).
#pragma once
#include <cstdint>
#include <random>
#include <vector>
#include "test_seed.hpp"

namespace nibble::quant::testdata {

using nibble::testing::fresh_seed;

// Gaussian values times a per-row log-uniform magnitude, so scales differ across blocks.
inline std::vector<float> gaussian(int64_t rows, int64_t cols, uint64_t seed, float log2_spread = 6.0f) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::uniform_real_distribution<float> u(-log2_spread, log2_spread);
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    const float mag = std::exp2(u(g));
    for (int64_t c = 0; c < cols; ++c) v[static_cast<size_t>(r * cols + c)] = n(g) * mag;
  }
  return v;
}

// Heavy tails: occasional outliers up to 2^10 larger.
inline std::vector<float> with_outliers(int64_t rows, int64_t cols, uint64_t seed) {
  std::vector<float> v = gaussian(rows, cols, seed);
  std::mt19937_64 g(seed ^ 0x9e3779b97f4a7c15ull);
  std::uniform_int_distribution<int64_t> pick(0, rows * cols - 1);
  std::uniform_real_distribution<float> e(3.0f, 10.0f);
  for (int i = 0; i < rows * cols / 50 + 1; ++i) v[static_cast<size_t>(pick(g))] *= std::exp2(e(g));
  return v;
}

}  // namespace nibble::quant::testdata
