// Fresh random test data (std::random_device seeds, printed on failure via the returned seed).
#pragma once
#include <cstdint>
#include <random>
#include <vector>

namespace nibble::quant::testdata {

inline uint64_t fresh_seed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) | rd();
}

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
