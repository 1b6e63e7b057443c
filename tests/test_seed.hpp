// Fresh random test data that a failure can replay. Every test that draws random inputs takes its
// seeds from here: each test gets one master seed (fresh from std::random_device, or NIBBLE_TEST_SEED
// when set), and its k-th draw is a fixed mix of (master, k). When a test that drew seeds fails, a
// GoogleTest listener prints the master seed and the command that replays the same inputs:
//   NIBBLE_TEST_SEED=<master> <test binary> --gtest_filter=<Suite.Name>
// (Temporary-directory names keep std::random_device: they must differ between concurrent runs, not
// repeat.)
#pragma once
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
