// Fitting the precision-aware law to training runs (docs/spec.md §7): the runs CSV it reads, then the
// base constants A, alpha, B, beta, E, gamma on the base-scheme runs (Huber loss on log loss, many
// initialisations, best kept), then effN and effD per other scheme with the base constants fixed;
// bootstrap intervals for all.
#pragma once
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <istream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "nibble/law/scaling_law.hpp"

// Training runs to fit the law on: one row per run, read from a CSV with a header and at least the
// columns scheme, n (non-embedding parameters), d (tokens) and loss (final validation loss). Other
// columns are kept as metadata so a fit report can show them next to each run's residual.
namespace nibble::law {

struct Run {
  std::string scheme;
  double n = 0, d = 0, loss = 0;
  std::map<std::string, std::string> metadata;  // every other column, by header name
  int line = 0;                                 // 1-based line in the CSV, for messages
};

// Parses CSV text (comma separated; fields may be double-quoted; '#' lines and blank lines are
// skipped). `origin` names the source in error messages. Throws std::invalid_argument on missing
// columns, unparsable or non-positive n/d/loss, or no data rows.
std::vector<Run> parse_runs_csv(std::istream& in, const std::string& origin = "runs CSV");
std::vector<Run> read_runs_csv(const std::string& path);

}  // namespace nibble::law

namespace nibble::law {

enum class FitSolver { automatic, ceres, eigen_lm };

struct FitOptions {
  std::string base_scheme = "bf16";
  int n_starts = 64;           // random initialisations of the base fit (plus the published constants)
  int bootstrap = 100;         // resamples for the confidence intervals; 0 disables them
  double huber_delta = 1e-4;   // on the residual log(predicted) - log(observed)
  std::uint64_t seed = 20250;  // initialisations and resampling; fixed so a fit is reproducible
  FitSolver solver = FitSolver::automatic;
  double confidence = 0.95;    // level of the bootstrap percentile intervals, in (0, 1)
  // Base constants held instead of fitted (e.g. the published ones, or a fit of a larger bf16 study): only the
  // schemes' efficiencies are fitted, base-scheme runs become optional (their residuals show how well the
  // held law describes them), and every run must lie above the held E. `source` says where they come from.
  std::optional<LawConstants> held_base;
};

struct Interval {
  double lo = 0, hi = 0;  // bootstrap percentile interval at FitResult::confidence (default 95%)
};

struct SchemeFit {
  Efficiency eff;
  Interval eff_n_interval, eff_d_interval;
  int runs = 0;
};

struct RunResidual {
  Run run;
  double predicted = 0;
  double log_residual = 0;  // log(predicted) - log(observed)
};

struct FitResult {
  LawConstants law;
  std::map<std::string, Interval> intervals;  // "A", "alpha", "B", "beta", "E", "gamma"
  bool has_intervals = false;                 // false when no bootstrap ran (or a fit was loaded without)
  std::vector<std::string> poorly_determined;  // constants/efficiencies whose interval is wide
  std::map<std::string, SchemeFit> schemes;    // every scheme, the base one with eff 1
  std::vector<RunResidual> residuals;
  std::string base_scheme;
  bool base_held = false;  // the base constants were given (FitOptions::held_base), not fitted: no intervals
  std::string solver;  // which back end produced the fit
  int starts = 0, converged_starts = 0, bootstrap_samples = 0;
  double confidence = 0.95;  // level of every interval above
  double huber_delta = 0, rms_log_residual = 0;
};

// Minimum numbers of runs: the base fit has 6 parameters, each scheme's efficiencies 2.
inline constexpr int kMinBaseRuns = 7;
inline constexpr int kMinSchemeRuns = 3;

// Throws std::invalid_argument for unusable input (no base runs, too few runs: says how many are
// needed; with held base constants, a run at or below their E) and std::runtime_error when the fit does
// not converge to a law (never returns garbage).
FitResult fit_scaling_law(const std::vector<Run>& runs, const FitOptions& options = {});

// JSON contract: A, alpha, B, beta, E, gamma, schemes {name: {eff_n, eff_d, intervals}}, plus
// intervals, residuals, solver, base_scheme, source and the fit quality.
nlohmann::json fit_to_json(const FitResult& fit);
// Reads what predict/plan/map need back (constants and schemes). Throws std::invalid_argument
// naming the missing or bad field.
FitResult fit_from_json(const nlohmann::json& j, const std::string& origin = "fit JSON");
FitResult load_fit(const std::string& path);

// Efficiency of a scheme from a fit; throws std::invalid_argument listing the fitted schemes.
Efficiency scheme_efficiency(const FitResult& fit, const std::string& scheme);

}  // namespace nibble::law
