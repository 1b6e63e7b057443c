#include "nibble/law/reach.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "nibble/io/json_file.hpp"
#include "nibble/law/bench_speedups.hpp"

namespace nibble::law {

double tokens_to_reach(const LawConstants& law, Efficiency eff, double n, double loss) {
  if (!(loss > law.E)) return std::numeric_limits<double>::infinity();
  const double x = std::pow(loss - law.E, 1.0 / law.gamma) - law.A / std::pow(n * eff.eff_n, law.alpha);
  if (!(x > 0)) return std::numeric_limits<double>::infinity();
  return std::pow(law.B / x, 1.0 / law.beta) / eff.eff_d;
}

RecipeSpeedups recipe_speedups_from_bench_json(const nlohmann::json& bench, const std::string& mode,
                                               const std::string& origin) {
  if (!bench.is_object() || !bench.contains("summary") || !bench["summary"].is_array()) {
    throw std::invalid_argument(origin + ": no `summary` array; pass a result of `nibble bench --json`");
  }
  RecipeSpeedups out;
  out.source = origin;
  if (bench.contains("gpu") && bench["gpu"].is_string()) out.gpu = bench["gpu"].get<std::string>();
  out.workload = bench_workload_text(bench);
  if (bench.contains("predicted") && bench["predicted"].is_boolean()) out.predicted = bench["predicted"].get<bool>();
  std::vector<std::string> modes;
  for (const auto& s : bench["summary"])
    if (s.is_object() && s.contains("mode") && s["mode"].is_string()) modes.push_back(s["mode"].get<std::string>());
  const auto has = [&](const std::string& m) { return std::find(modes.begin(), modes.end(), m) != modes.end(); };
  out.mode = !mode.empty() ? mode : has("step") ? "step" : "pre-quantized";
  if (!has(out.mode)) {
    throw std::invalid_argument(fmt::format("{}: no summary rows of mode '{}'; pass --bench-mode with a mode the file "
                                            "has", origin, out.mode));
  }
  for (const auto& s : bench["summary"]) {
    if (!s.is_object() || s.value("mode", std::string()) != out.mode || !s.contains("recipe")) continue;
    const auto recipe = s["recipe"].get<std::string>();
    const auto& sp = s.contains("model_speedup_vs_bf16") ? s["model_speedup_vs_bf16"] : nlohmann::json();
    if (!sp.is_number() || !(sp.get<double>() > 0)) continue;  // a failed row has no speedup
    out.speedup[recipe] = sp.get<double>();
    if (s.contains("path") && s["path"].is_string()) out.path[recipe] = s["path"].get<std::string>();
  }
  if (out.speedup.empty()) {
    throw std::invalid_argument(origin + ": no summary row of mode '" + out.mode + "' has model_speedup_vs_bf16");
  }
  return out;
}

RecipeSpeedups read_recipe_speedups(const std::string& path, const std::string& mode) {
  return recipe_speedups_from_bench_json(io::read_json_file(path, "bench JSON"), mode, path);
}

std::string recipe_for_scheme(const std::string& scheme, const std::map<std::string, double>& speedups) {
  if (speedups.count(scheme)) return scheme;
  std::string best;
  for (const auto& [recipe, sp] : speedups) {
    if (scheme.size() > recipe.size() && scheme.compare(0, recipe.size(), recipe) == 0 && scheme[recipe.size()] == '-' &&
        recipe.size() > best.size())
      best = recipe;
  }
  return best;
}

ReachPlan reach_plan(const FitResult& fit, const RecipeSpeedups& speedups, double n, double loss) {
  if (!(n > 0)) throw std::invalid_argument(fmt::format("--n {} must be a positive parameter count", n));
  ReachPlan plan;
  plan.n = n;
  plan.loss = loss;
  plan.base_scheme = fit.base_scheme.empty() ? "bf16" : fit.base_scheme;
  plan.law_source = fit.law.source;
  plan.speedup_source = fmt::format("{} ({}{}{}, mode {})", speedups.source, speedups.gpu,
                                    speedups.predicted ? ", PREDICTED" : "",
                                    speedups.workload.empty() ? "" : ", " + speedups.workload, speedups.mode);
  const std::string base_recipe = recipe_for_scheme(plan.base_scheme, speedups.speedup);
  if (base_recipe.empty()) {
    throw std::invalid_argument(fmt::format("{}: no speedup for the base scheme '{}'; the bench file needs its recipe",
                                            speedups.source, plan.base_scheme));
  }
  const auto base_it = fit.schemes.find(plan.base_scheme);
  const Efficiency base_eff = base_it == fit.schemes.end() ? Efficiency{} : base_it->second.eff;
  const double base_time = tokens_to_reach(fit.law, base_eff, n, loss) / speedups.speedup.at(base_recipe);
  if (!std::isfinite(base_time)) {
    throw std::invalid_argument(fmt::format(
        "loss {} is not reachable by '{}' at N = {:.3g} under this law (the infinite-data limit is {:.4g}); pick a "
        "higher --loss or a larger --n", loss, plan.base_scheme, n,
        fit.law.E + std::pow(fit.law.A / std::pow(n * base_eff.eff_n, fit.law.alpha), fit.law.gamma)));
  }
  for (const auto& [scheme, sf] : fit.schemes) {
    const std::string recipe = recipe_for_scheme(scheme, speedups.speedup);
    if (recipe.empty()) {
      plan.skipped.push_back(scheme + " (no bench recipe of that name)");
      continue;
    }
    ReachRow r;
    r.scheme = scheme;
    r.recipe = recipe;
    r.fit = sf;
    r.speedup = speedups.speedup.at(recipe);
    const bool has_iv = sf.eff_n_interval.hi > 0 && sf.eff_d_interval.hi > 0;
    const Efficiency lo_eff = has_iv ? Efficiency{sf.eff_n_interval.lo, sf.eff_d_interval.lo} : sf.eff;
    const Efficiency hi_eff = has_iv ? Efficiency{sf.eff_n_interval.hi, sf.eff_d_interval.hi} : sf.eff;
    r.tokens = tokens_to_reach(fit.law, sf.eff, n, loss);
    r.tokens_lo = tokens_to_reach(fit.law, hi_eff, n, loss);  // higher efficiencies need fewer tokens
    r.tokens_hi = tokens_to_reach(fit.law, lo_eff, n, loss);
    r.reachable = std::isfinite(r.tokens);
    r.time = r.tokens / r.speedup / base_time;
    r.time_lo = r.tokens_lo / r.speedup / base_time;
    r.time_hi = r.tokens_hi / r.speedup / base_time;
    plan.rows.push_back(r);
  }
  std::stable_sort(plan.rows.begin(), plan.rows.end(), [](const ReachRow& a, const ReachRow& b) { return a.time < b.time; });
  return plan;
}

nlohmann::json reach_to_json(const ReachPlan& plan) {
  nlohmann::json rows = nlohmann::json::array();
  const auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  for (const auto& r : plan.rows) {
    rows.push_back({{"scheme", r.scheme}, {"recipe", r.recipe}, {"eff_n", r.fit.eff.eff_n}, {"eff_d", r.fit.eff.eff_d},
                    {"eff_n_interval", {r.fit.eff_n_interval.lo, r.fit.eff_n_interval.hi}},
                    {"eff_d_interval", {r.fit.eff_d_interval.lo, r.fit.eff_d_interval.hi}},
                    {"speedup_vs_bf16", r.speedup}, {"tokens", num(r.tokens)},
                    {"tokens_interval", {num(r.tokens_lo), num(r.tokens_hi)}}, {"time_vs_base", num(r.time)},
                    {"time_vs_base_interval", {num(r.time_lo), num(r.time_hi)}}, {"reachable", r.reachable}});
  }
  return {{"n", plan.n}, {"loss", plan.loss}, {"base_scheme", plan.base_scheme}, {"law_source", plan.law_source},
          {"speedup_source", plan.speedup_source}, {"rows", rows}, {"skipped", plan.skipped},
          {"best", plan.rows.empty() || !plan.rows.front().reachable ? nlohmann::json(nullptr)
                                                                    : nlohmann::json(plan.rows.front().scheme)}};
}

}  // namespace nibble::law
