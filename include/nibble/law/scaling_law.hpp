// The precision-aware scaling law of docs/spec.md §7 (Quartet's form):
//   L(N, D, P_fwd, P_bwd) = (A / (N effN)^alpha + B / (D effD)^beta)^gamma + E
// N = non-embedding parameters, D = training tokens; effN / effD are the parameter / data efficiencies
// of the forward / backward precision (1 for the baseline precision).
#pragma once
#include <string>

namespace nibble::law {

struct LawConstants {
  double A = 0, alpha = 0, B = 0, beta = 0, E = 0, gamma = 0;
  std::string source;  // where the numbers come from: "published (Quartet, ...)" or "fitted on FILE"
};

struct Efficiency {
  double eff_n = 1.0;  // parameter efficiency of the forward precision, in (0, 1] for a lossy format
  double eff_d = 1.0;  // data efficiency of the backward precision
};

// Published fit: Llama-style models, 30M-200M parameters, 25-800 tokens/parameter, C4.
LawConstants published_constants();
// Published Quartet (MXFP4 forward and backward) efficiencies: effN 0.65, effD 0.95.
Efficiency published_quartet_efficiency();

// Predicted loss. Throws std::invalid_argument naming the field when n, d or an efficiency is not
// positive and finite, or when the constants are not a valid law.
double predict_loss(const LawConstants& law, double n, double d, Efficiency eff = {});

// The bracketed sum A/(N effN)^alpha + B/(D effD)^beta: loss is monotone in it (gamma > 0), so
// comparisons between schemes can be made on it without the gamma power and E.
double reducible_term(const LawConstants& law, double n, double d, Efficiency eff = {});

// Throws std::invalid_argument when any constant is non-positive or non-finite (E may be zero).
void validate(const LawConstants& law);

}  // namespace nibble::law
