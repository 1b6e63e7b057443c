// Fit results to and from JSON. The field names are a contract (docs/spec.md §7, docs/law.md): A, alpha,
// B, beta, E, gamma, schemes {name: {eff_n, eff_d, intervals}}.
#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "nibble/law/fit.hpp"

namespace nibble::law {
namespace {

nlohmann::json interval_json(Interval i) { return nlohmann::json::array({i.lo, i.hi}); }

double number_field(const nlohmann::json& j, const std::string& key, const std::string& where,
                    const std::string& origin) {
  if (!j.contains(key) || !j[key].is_number())
    throw std::invalid_argument(fmt::format("{}: field '{}' missing or not a number in {}; a fit JSON is "
                                            "written by `nibble law fit --json`",
                                            origin, key, where));
  return j[key].get<double>();
}

// An optional text field: the fallback when absent, else it must be a string.
std::string text_field_or(const nlohmann::json& j, const std::string& key, const std::string& fallback,
                          const std::string& where, const std::string& origin) {
  if (!j.contains(key)) return fallback;
  if (!j[key].is_string())
    throw std::invalid_argument(fmt::format("{}: field '{}' in {} must be a string (it is {}); a fit JSON is "
                                            "written by `nibble law fit --json`",
                                            origin, key, where, j[key].type_name()));
  return j[key].get<std::string>();
}

Interval interval_field(const nlohmann::json& j, const std::string& key, double fallback) {
  if (j.contains(key) && j[key].is_array() && j[key].size() == 2 && j[key][0].is_number() &&
      j[key][1].is_number())
    return {j[key][0].get<double>(), j[key][1].get<double>()};
  return {fallback, fallback};
}

}  // namespace

nlohmann::json fit_to_json(const FitResult& fit) {
  nlohmann::json j;
  j["A"] = fit.law.A;
  j["alpha"] = fit.law.alpha;
  j["B"] = fit.law.B;
  j["beta"] = fit.law.beta;
  j["E"] = fit.law.E;
  j["gamma"] = fit.law.gamma;
  j["source"] = fit.law.source;
  j["law"] = "L = (A / (N eff_n)^alpha + B / (D eff_d)^beta)^gamma + E";
  j["base_scheme"] = fit.base_scheme;
  j["solver"] = fit.solver;
  j["huber_delta"] = fit.huber_delta;
  j["starts"] = fit.starts;
  j["converged_starts"] = fit.converged_starts;
  j["bootstrap_samples"] = fit.bootstrap_samples;
  j["rms_log_residual"] = fit.rms_log_residual;
  if (fit.has_intervals) {
    for (const auto& [name, i] : fit.intervals) j["intervals"][name] = interval_json(i);
  } else {
    j["intervals"] = nullptr;
  }
  j["poorly_determined"] = fit.poorly_determined;
  j["schemes"] = nlohmann::json::object();
  for (const auto& [name, s] : fit.schemes) {
    nlohmann::json sj{{"eff_n", s.eff.eff_n}, {"eff_d", s.eff.eff_d}, {"runs", s.runs}};
    if (fit.has_intervals)
      sj["intervals"] = {{"eff_n", interval_json(s.eff_n_interval)}, {"eff_d", interval_json(s.eff_d_interval)}};
    else
      sj["intervals"] = nullptr;
    j["schemes"][name] = sj;
  }
  j["residuals"] = nlohmann::json::array();
  for (const auto& r : fit.residuals) {
    nlohmann::json rj{{"scheme", r.run.scheme},  {"n", r.run.n},
                      {"d", r.run.d},            {"loss", r.run.loss},
                      {"predicted", r.predicted}, {"log_residual", r.log_residual}};
    if (!r.run.metadata.empty()) rj["metadata"] = r.run.metadata;
    j["residuals"].push_back(rj);
  }
  return j;
}

FitResult fit_from_json(const nlohmann::json& j, const std::string& origin) {
  if (!j.is_object()) throw std::invalid_argument(fmt::format("{}: expected a JSON object", origin));
  FitResult fit;
  fit.law.A = number_field(j, "A", "the top level", origin);
  fit.law.alpha = number_field(j, "alpha", "the top level", origin);
  fit.law.B = number_field(j, "B", "the top level", origin);
  fit.law.beta = number_field(j, "beta", "the top level", origin);
  fit.law.E = number_field(j, "E", "the top level", origin);
  fit.law.gamma = number_field(j, "gamma", "the top level", origin);
  fit.law.source = text_field_or(j, "source", "fit JSON", "the top level", origin) + " [" + origin + "]";
  validate(fit.law);
  fit.base_scheme = text_field_or(j, "base_scheme", "bf16", "the top level", origin);
  fit.solver = text_field_or(j, "solver", "", "the top level", origin);
  if (j.contains("intervals") && j["intervals"].is_object()) {
    fit.has_intervals = true;
    const std::pair<const char*, double> constants[] = {{"A", fit.law.A}, {"alpha", fit.law.alpha},
                                                        {"B", fit.law.B}, {"beta", fit.law.beta},
                                                        {"E", fit.law.E}, {"gamma", fit.law.gamma}};
    for (const auto& [name, v] : constants) fit.intervals[name] = interval_field(j["intervals"], name, v);
  }
  if (j.contains("poorly_determined") && j["poorly_determined"].is_array()) {
    for (const auto& name : j["poorly_determined"]) {
      if (!name.is_string())
        throw std::invalid_argument(fmt::format("{}: 'poorly_determined' must list constant names as strings "
                                                "(found {})", origin, name.dump()));
      fit.poorly_determined.push_back(name.get<std::string>());
    }
  }
  if (j.contains("schemes")) {
    if (!j["schemes"].is_object())
      throw std::invalid_argument(fmt::format("{}: 'schemes' must be an object {{name: {{eff_n, eff_d}}}}", origin));
    for (const auto& [name, sj] : j["schemes"].items()) {
      SchemeFit s;
      const std::string where = "schemes." + name;
      s.eff = {number_field(sj, "eff_n", where, origin), number_field(sj, "eff_d", where, origin)};
      if (!(s.eff.eff_n > 0 && s.eff.eff_d > 0 && std::isfinite(s.eff.eff_n) && std::isfinite(s.eff.eff_d)))
        throw std::invalid_argument(fmt::format("{}: {} efficiencies must be positive and finite", origin, where));
      if (sj.contains("runs")) {
        if (!sj["runs"].is_number_integer() || sj["runs"].get<int64_t>() < 0 ||
            sj["runs"].get<int64_t>() > std::numeric_limits<int>::max())
          throw std::invalid_argument(fmt::format("{}: {}.runs must be a count of runs (a non-negative integer), "
                                                  "not {}", origin, where, sj["runs"].dump()));
        s.runs = static_cast<int>(sj["runs"].get<int64_t>());
      }
      const nlohmann::json iv = sj.contains("intervals") && sj["intervals"].is_object() ? sj["intervals"]
                                                                                       : nlohmann::json::object();
      s.eff_n_interval = interval_field(iv, "eff_n", s.eff.eff_n);
      s.eff_d_interval = interval_field(iv, "eff_d", s.eff.eff_d);
      fit.schemes[name] = s;
    }
  }
  return fit;
}

FitResult load_fit(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(fmt::format("cannot open fit JSON '{}': check the path", path));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for a number past double
    throw std::invalid_argument(fmt::format("fit JSON '{}' is not valid JSON: {}", path, e.what()));
  }
  return fit_from_json(j, path);
}

}  // namespace nibble::law
