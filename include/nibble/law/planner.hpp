// The compute-normalized precision planner of docs/spec.md §7. Four forward:backward schemes are
// compared against the FP8:FP8 baseline at equal inference cost (N) and equal training compute
// (N D): a scheme with forward speedup sp_fw and backward speedup sp_bw (relative to FP8) trains for
// sp_tr = 1 / (1/(3 sp_fw) + 2/(3 sp_bw)) times the baseline's work and reaches
//   L(N sp_fw, D sp_tr / sp_fw, P_fwd, P_bwd).
// FP8 is the baseline precision (eff 1, speedup 1); FP4 has its fitted or published efficiencies.
#pragma once
#include <nlohmann/json_fwd.hpp>

#include <array>
#include <string>
#include <vector>

#include "nibble/law/scaling_law.hpp"

namespace nibble::law {

// FP4 speedups over the FP8 baseline, per pass.
struct Speedups {
  double fwd = 2.0, bwd = 2.0;
  std::string source = "assumed ideal FP4 over FP8 (2x forward, 2x backward): no measurement given";
};

// Throws std::invalid_argument unless both speedups are positive and finite.
void validate(const Speedups& sp);

// sp_tr = 1 / (1/(3 sp_fw) + 2/(3 sp_bw)): the backward pass is two GEMMs per forward GEMM.
double training_speedup(double sp_fw, double sp_bw);

struct SchemeOutcome {
  std::string name;        // "fp8:fp8", "fp4:fp8", "fp8:fp4", "fp4:fp4" (forward:backward)
  double sp_fw = 1, sp_bw = 1, sp_tr = 1;
  double n_effective = 0;  // N sp_fw: the model size the same inference cost buys
  double d_effective = 0;  // D sp_tr / sp_fw: the tokens the same training compute buys at that size
  Efficiency eff;
  double loss = 0;
};

struct Plan {
  double n = 0, d = 0;
  LawConstants law;
  Efficiency fp4_eff;
  std::string fp4_eff_source;
  Speedups speedups;
  std::array<SchemeOutcome, 4> schemes;  // in the order fp8:fp8, fp4:fp8, fp8:fp4, fp4:fp4
  int best = 0;                          // index into schemes of the lowest loss
  double margin = 0;                     // runner-up loss minus best loss (>= 0)
};

inline constexpr std::array<const char*, 4> kSchemeNames = {"fp8:fp8", "fp4:fp8", "fp8:fp4", "fp4:fp4"};

Plan plan_precision(const LawConstants& law, Efficiency fp4_eff, const Speedups& sp, double n, double d);

// Where FP4:FP4 beats FP8:FP8 at model size n, in tokens per parameter D/N. The loss difference is
// a + b (D/N)^-beta in the reducible term, so there is at most one crossing.
struct Fp4Threshold {
  enum Kind { wins_above, wins_below, always, never } kind = never;
  double tokens_per_param = 0;  // the crossing, for wins_above / wins_below
};
Fp4Threshold fp4_fp4_threshold(const LawConstants& law, Efficiency fp4_eff, const Speedups& sp, double n);

// One paragraph a user can read: the winner, its margin, and why (capacity vs data trade).
std::string explain_plan(const Plan& plan);
nlohmann::json plan_to_json(const Plan& plan);

}  // namespace nibble::law

// The optimality map: which forward:backward precision wins over a grid of model sizes N and
// tokens-per-parameter D/N, drawn as a self-contained SVG (no scripts, no network) and as CSV.
namespace nibble::law {

struct MapGridSpec {
  double n_min = 1e8, n_max = 1e11;
  double ratio_min = 10, ratio_max = 2000;  // tokens per parameter
  int n_steps = 31, ratio_steps = 31;       // log-spaced, endpoints included
};

struct MapCell {
  double n = 0, tokens_per_param = 0;
  std::array<double, 4> loss{};  // in kSchemeNames order
  int best = 0;
};

struct OptimalityMap {
  MapGridSpec grid;
  LawConstants law;
  Efficiency fp4_eff;
  std::string fp4_eff_source;
  Speedups speedups;
  std::vector<MapCell> cells;  // ratio-major: cells[r * n_steps + i]
};

// Throws std::invalid_argument for an empty or inverted grid.
OptimalityMap compute_optimality_map(const LawConstants& law, Efficiency fp4_eff, const std::string& eff_source,
                                     const Speedups& sp, const MapGridSpec& grid = {});
std::string optimality_map_svg(const OptimalityMap& map);
std::string optimality_map_csv(const OptimalityMap& map);

}  // namespace nibble::law
