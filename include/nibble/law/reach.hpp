// Time to reach a target loss, per recipe: the tokens each recipe needs at N parameters under the fitted
// law (its eff_n, eff_d), divided by its measured (or predicted) step speedup. Answers "which recipe
// reaches loss L soonest, and by how much", with intervals from the fit's efficiency intervals.
#pragma once
#include <nlohmann/json_fwd.hpp>

#include <map>
#include <string>
#include <vector>

#include "nibble/law/fit.hpp"

namespace nibble::law {

// Tokens D with law(N, D, eff) == loss: D = (B / X)^(1/beta) / eff_d, X = (loss - E)^(1/gamma) - A / (N eff_n)^alpha.
// +infinity when the target is at or below what infinite data gives at this N (X <= 0).
double tokens_to_reach(const LawConstants& law, Efficiency eff, double n, double loss);

// Per-recipe step speedups over bf16 read from a `nibble bench --json` summary (model_speedup_vs_bf16 of
// `mode`; empty mode: step, else pre-quantized). Throws std::invalid_argument naming what is missing.
struct RecipeSpeedups {
  std::map<std::string, double> speedup;  // recipe -> x bf16
  std::map<std::string, std::string> path;
  std::string mode, gpu, source;
  std::string workload;  // the model and tokens the bench timed (bench_workload_text)
  bool predicted = false;
};
RecipeSpeedups recipe_speedups_from_bench_json(const nlohmann::json& bench, const std::string& mode = "",
                                               const std::string& origin = "bench JSON");
RecipeSpeedups read_recipe_speedups(const std::string& path, const std::string& mode = "");

struct ReachRow {
  std::string scheme, recipe;  // recipe: the bench recipe whose speedup the scheme uses
  SchemeFit fit;
  double speedup = 1;
  double tokens = 0, tokens_lo = 0, tokens_hi = 0;  // lo/hi from the efficiency intervals (lo: both at their highs)
  double time = 0, time_lo = 0, time_hi = 0;        // relative to the base scheme's time (tokens / speedup)
  bool reachable = true;
};
struct ReachPlan {
  double n = 0, loss = 0;
  std::string base_scheme, law_source, speedup_source;
  std::vector<ReachRow> rows;        // every fitted scheme that has a speedup, soonest first
  std::vector<std::string> skipped;  // fitted schemes without a speedup (named with the reason)
};

// The scheme's bench recipe: the same name, else the longest recipe name that starts the scheme's name
// followed by '-' (quartet-sr -> quartet: a rounding option does not change the kernels' speed).
std::string recipe_for_scheme(const std::string& scheme, const std::map<std::string, double>& speedups);

// Throws std::invalid_argument when the base scheme has no speedup or cannot reach the loss at N.
ReachPlan reach_plan(const FitResult& fit, const RecipeSpeedups& speedups, double n, double loss);
nlohmann::json reach_to_json(const ReachPlan& plan);

}  // namespace nibble::law
