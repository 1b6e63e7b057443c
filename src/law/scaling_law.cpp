// Evaluation of the precision-aware scaling law; see include/nibble/law/scaling_law.hpp.
#include "nibble/law/scaling_law.hpp"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

namespace nibble::law {

LawConstants published_constants() {
  return {1.52e5, 0.589, 5.25e5, 0.544, 1.35, 0.274,
          "published (Quartet: Llama-style 30M-200M params, 25-800 tokens/param, C4)"};
}

Efficiency published_quartet_efficiency() { return {0.65, 0.95}; }

namespace {
void require_positive(double v, const char* field, const char* fix) {
  if (!(std::isfinite(v) && v > 0))
    throw std::invalid_argument(fmt::format("{} = {} must be positive and finite: {}", field, v, fix));
}
}  // namespace

void validate(const LawConstants& law) {
  require_positive(law.A, "A", "check the fit JSON");
  require_positive(law.alpha, "alpha", "check the fit JSON");
  require_positive(law.B, "B", "check the fit JSON");
  require_positive(law.beta, "beta", "check the fit JSON");
  require_positive(law.gamma, "gamma", "check the fit JSON");
  if (!(std::isfinite(law.E) && law.E >= 0))
    throw std::invalid_argument(fmt::format("E = {} must be finite and >= 0: check the fit JSON", law.E));
}

double reducible_term(const LawConstants& law, double n, double d, Efficiency eff) {
  require_positive(n, "N (non-embedding parameters)", "pass e.g. --n 1e9");
  require_positive(d, "D (training tokens)", "pass e.g. --d 2e10");
  require_positive(eff.eff_n, "eff_n", "an efficiency is in (0, 1], e.g. 0.65");
  require_positive(eff.eff_d, "eff_d", "an efficiency is in (0, 1], e.g. 0.95");
  // Computed in logs: A ~ 1e5 and N^alpha ~ 1e6 overflow nothing, but (N effN)^alpha for N ~ 1e12
  // and a fitted alpha > 1 could; exp(log A - alpha log N) cannot.
  return std::exp(std::log(law.A) - law.alpha * std::log(n * eff.eff_n)) +
         std::exp(std::log(law.B) - law.beta * std::log(d * eff.eff_d));
}

double predict_loss(const LawConstants& law, double n, double d, Efficiency eff) {
  validate(law);
  return std::pow(reducible_term(law, n, d, eff), law.gamma) + law.E;
}

}  // namespace nibble::law
