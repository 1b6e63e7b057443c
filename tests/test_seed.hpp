// Fresh random test data that a failure can replay. Every test that draws random inputs takes its
// seeds from here: each test gets one master seed (fresh from std::random_device, or NIBBLE_TEST_SEED
// when set), and its k-th draw is a fixed mix of (master, k). When a test that drew seeds fails, a
// GoogleTest listener prints the master seed and the command that replays the same inputs:
//   NIBBLE_TEST_SEED=<master> <test binary> --gtest_filter=<Suite.Name>
// (Temporary-directory names keep std::random_device: they must differ between concurrent runs, not
// repeat.)
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace nibble::testing {

// The running test's next seed (outside any test: the process's, drawn the same way).
uint64_t fresh_seed();

// A generator seeded by fresh_seed(); 32-bit engines take its low half.
template <class Engine = std::mt19937_64>
Engine fresh_engine() {
  return Engine(static_cast<typename Engine::result_type>(fresh_seed()));
}
inline std::mt19937_64 fresh_rng() { return fresh_engine<std::mt19937_64>(); }

// n fresh values from N(0, sigma^2).
inline std::vector<float> fresh_normal_floats(size_t n, float sigma = 1.0f) {
  std::mt19937_64 rng = fresh_rng();
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

}  // namespace nibble::testing

// Random tensors for the quantizer tests, drawn from seeds of fresh_seed().
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
