// Synthetic training runs drawn from a known law with multiplicative noise, for the fit tests.
#pragma once
#include <random>
#include <vector>

#include "nibble/law/runs.hpp"
#include "nibble/law/scaling_law.hpp"

namespace nibble::law::test {

// A grid like the published study's: 30M-200M parameters, 25-800 tokens per parameter.
inline std::vector<Run> synthetic_runs(const LawConstants& law, const std::string& scheme, Efficiency eff,
                                       double noise, std::mt19937_64& rng) {
  std::normal_distribution<double> jitter(0.0, noise);
  std::vector<Run> runs;
  for (double n : {30e6, 50e6, 100e6, 200e6})
    for (double ratio : {25.0, 50.0, 100.0, 200.0, 400.0, 800.0}) {
      Run r;
      r.scheme = scheme;
      r.n = n;
      r.d = n * ratio;
      r.loss = predict_loss(law, r.n, r.d, eff) * std::exp(jitter(rng));
      runs.push_back(r);
    }
  return runs;
}

}  // namespace nibble::law::test
