// Fit results to and from JSON. The field names are a contract (docs/spec.md §7, docs/law.md): A, alpha,
// B, beta, E, gamma, schemes {name: {eff_n, eff_d, intervals}}.
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <set>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "nibble/io/json_file.hpp"
#include "nibble/law/fit.hpp"

namespace nibble::law {
namespace {

nlohmann::json interval_json(Interval i) { return nlohmann::json::array({i.lo, i.hi}); }

Interval interval_field(const nlohmann::json& j, const std::string& key, double fallback) {
  if (j.contains(key) && j[key].is_array() && j[key].size() == 2 && j[key][0].is_number() &&
      j[key][1].is_number())
    return {j[key][0].get<double>(), j[key][1].get<double>()};
  return {fallback, fallback};
}

// What the fitted runs say about themselves, from the columns a loss-study CSV carries (train/plan.py):
// the distinct values of each, and the first and last date a run finished. Empty when no run has them.
nlohmann::json runs_provenance(const std::vector<RunResidual>& residuals) {
  static const char* const kColumns[] = {"corpus", "size", "gpu", "path_kind", "torch", "batch", "seq_len"};
  nlohmann::json out = nlohmann::json::object();
  for (const char* column : kColumns) {
    std::set<std::string> values;
    for (const auto& r : residuals)
      if (auto it = r.run.metadata.find(column); it != r.run.metadata.end() && !it->second.empty())
        values.insert(it->second);
    if (!values.empty()) out[column] = std::vector<std::string>(values.begin(), values.end());
  }
  std::set<std::string> days;
  for (const auto& r : residuals)
    if (auto it = r.run.metadata.find("finished_utc"); it != r.run.metadata.end() && it->second.size() >= 10)
      days.insert(it->second.substr(0, 10));
  if (!days.empty()) out["dates"] = {*days.begin(), *days.rbegin()};
  return out;
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
  j["base_constants"] = fit.base_held ? "held" : "fitted";
  j["solver"] = fit.solver;
  j["huber_delta"] = fit.huber_delta;
  j["starts"] = fit.starts;
  j["converged_starts"] = fit.converged_starts;
  j["bootstrap_samples"] = fit.bootstrap_samples;
  j["confidence"] = fit.confidence;
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
  if (auto runs = runs_provenance(fit.residuals); !runs.empty()) j["runs_data"] = runs;
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
  namespace fields = io::json_fields;
  // A fit JSON is written by `nibble law fit --json`; the messages name the file and the field.
  const std::string top = fmt::format("fit JSON '{}'", origin);
  if (!j.is_object())
    throw std::invalid_argument(fmt::format("{}: expected a JSON object, as `nibble law fit --json` writes", top));
  FitResult fit;
  fit.law.A = fields::number(j, "A", top);
  fit.law.alpha = fields::number(j, "alpha", top);
  fit.law.B = fields::number(j, "B", top);
  fit.law.beta = fields::number(j, "beta", top);
  fit.law.E = fields::number(j, "E", top);
  fit.law.gamma = fields::number(j, "gamma", top);
  fit.law.source = fields::text_or(j, "source", "fit JSON", top) + " [" + origin + "]";
  validate(fit.law);
  fit.base_scheme = fields::text_or(j, "base_scheme", "bf16", top);
  fit.base_held = fields::text_or(j, "base_constants", "fitted", top) == "held";
  if (j.contains("confidence")) {
    fit.confidence = fields::number(j, "confidence", top);
    if (!(fit.confidence > 0 && fit.confidence < 1))
      throw std::invalid_argument(fmt::format("{}: confidence {} must lie strictly between 0 and 1", top,
                                              fit.confidence));
  }
  fit.solver = fields::text_or(j, "solver", "", top);
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
      s.eff = {fields::number(sj, "eff_n", top + "." + where), fields::number(sj, "eff_d", top + "." + where)};
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
  const nlohmann::json j = io::read_json_file(path, "fit JSON", io::OpenError::invalid_argument);
  return fit_from_json(j, path);
}

}  // namespace nibble::law
