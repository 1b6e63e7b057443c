// The optimality map: which forward:backward precision wins over a grid of model sizes N and
// tokens-per-parameter D/N, drawn as a self-contained SVG (no scripts, no network) and as CSV.
#pragma once
#include <array>
#include <string>
#include <vector>

#include "nibble/law/planner.hpp"

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
