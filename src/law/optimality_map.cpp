// Grid evaluation of the planner and its CSV; the SVG lives in optimality_map_svg.cpp.
#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

#include "nibble/law/optimality_map.hpp"

namespace nibble::law {
namespace {
double log_step(double lo, double hi, int steps, int i) {
  // Endpoints exact, so the map's corners are the N and D/N the user asked for.
  if (i == 0 || steps == 1) return lo;
  if (i == steps - 1) return hi;
  return std::exp(std::log(lo) + (std::log(hi) - std::log(lo)) * i / (steps - 1));
}
}  // namespace

OptimalityMap compute_optimality_map(const LawConstants& law, Efficiency fp4_eff, const std::string& eff_source,
                                     const Speedups& sp, const MapGridSpec& g) {
  if (!(g.n_min > 0 && g.n_max >= g.n_min && g.ratio_min > 0 && g.ratio_max >= g.ratio_min))
    throw std::invalid_argument(fmt::format("map grid N [{}, {}], D/N [{}, {}] must be positive and ordered "
                                            "(min <= max)", g.n_min, g.n_max, g.ratio_min, g.ratio_max));
  if (g.n_steps < 1 || g.ratio_steps < 1 || g.n_steps > 1000 || g.ratio_steps > 1000)
    throw std::invalid_argument("map grid steps must be between 1 and 1000 per axis");
  OptimalityMap m{g, law, fp4_eff, eff_source, sp, {}};
  for (int r = 0; r < g.ratio_steps; ++r)
    for (int i = 0; i < g.n_steps; ++i) {
      MapCell c;
      c.n = log_step(g.n_min, g.n_max, g.n_steps, i);
      c.tokens_per_param = log_step(g.ratio_min, g.ratio_max, g.ratio_steps, r);
      const Plan p = plan_precision(law, fp4_eff, sp, c.n, c.n * c.tokens_per_param);
      for (int s = 0; s < 4; ++s) c.loss[s] = p.schemes[s].loss;
      c.best = p.best;
      m.cells.push_back(c);
    }
  return m;
}

std::string optimality_map_csv(const OptimalityMap& m) {
  std::string out = "n,tokens_per_param,d";
  for (const char* s : kSchemeNames) out += fmt::format(",loss_{}", s);
  out += ",best\n";
  for (const auto& c : m.cells) {
    out += fmt::format("{:.6g},{:.6g},{:.6g}", c.n, c.tokens_per_param, c.n * c.tokens_per_param);
    for (double l : c.loss) out += fmt::format(",{:.6f}", l);
    out += fmt::format(",{}\n", kSchemeNames[c.best]);
  }
  return out;
}

}  // namespace nibble::law
