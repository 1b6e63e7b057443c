// Reader of FP4/FP8 pass speedups from a `nibble bench` JSON; see bench_speedups.hpp.
#include "nibble/law/bench_speedups.hpp"

#include "nibble/io/json_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

namespace nibble::law {
namespace {

struct PassSums {
  double fprop = 0, backward = 0;
  int fprop_rows = 0, backward_rows = 0;
};

std::string string_field(const nlohmann::json& row, const char* key) {
  return row.contains(key) && row[key].is_string() ? row[key].get<std::string>() : std::string();
}

// The bench JSON's rows (docs/bench-output.md): `total_ms` is ONE call of the GEMM including the
// quantization its mode attributes to it (gemm_ms + quant_ms), `count` the calls per layer. Rows that
// run once per model (`per_model`, the LM head) are left out, as in the bench summary's layer_ms: the
// recipes differ only in the transformer blocks' linear layers.
bool once_per_model(const nlohmann::json& row) {
  if (row.contains("per_model") && row["per_model"].is_boolean()) return row["per_model"].get<bool>();
  const std::string layer = string_field(row, "layer");
  return layer == "lm_head" || layer == "embedding";
}

PassSums sum_passes(const nlohmann::json& gemms, const std::string& recipe, const std::string& mode,
                    const std::string& origin) {
  PassSums s;
  for (size_t i = 0; i < gemms.size(); ++i) {
    const auto& row = gemms[i];
    if (string_field(row, "recipe") != recipe || string_field(row, "mode") != mode) continue;
    const std::string pass = string_field(row, "pass");
    if (pass != "fprop" && pass != "dgrad" && pass != "wgrad") continue;
    if (once_per_model(row)) continue;
    const std::string what = fmt::format("{}: gemms[{}] ({} {} {} {})", origin, i, recipe, mode,
                                         string_field(row, "layer"), pass);
    const std::string error = string_field(row, "error");
    if (!error.empty())
      throw std::invalid_argument(fmt::format("{} failed in the benchmark ({}); the speedup needs every GEMM of "
                                              "the recipe: rerun `nibble bench` or give --sp-fwd/--sp-bwd",
                                              what, error));
    if (!row.contains("total_ms") || !row["total_ms"].is_number() || !(row["total_ms"].get<double>() > 0))
      throw std::invalid_argument(fmt::format(
          "{} has no positive 'total_ms' (did that GEMM fail or run out of memory?); the speedup needs every "
          "GEMM of the recipe",
          what));
    double count = 1;
    if (row.contains("count")) {
      if (!row["count"].is_number() || !(row["count"].get<double>() >= 1))
        throw std::invalid_argument(fmt::format("{}: 'count' must be a number >= 1 (calls of the GEMM per layer)",
                                                what));
      count = row["count"].get<double>();
    }
    const double ms = row["total_ms"].get<double>() * count;
    if (pass == "fprop") {
      s.fprop += ms;
      ++s.fprop_rows;
    } else {
      s.backward += ms;
      ++s.backward_rows;
    }
  }
  return s;
}

std::string summary_path(const nlohmann::json& bench, const std::string& recipe, const std::string& mode) {
  if (!bench.contains("summary") || !bench["summary"].is_array()) return "";
  for (const auto& e : bench["summary"])
    if (string_field(e, "recipe") == recipe && string_field(e, "mode") == mode) return string_field(e, "path");
  return "";
}

}  // namespace

BenchSpeedups speedups_from_bench_json(const nlohmann::json& bench, const BenchSpeedupOptions& o,
                                       const std::string& origin) {
  if (!bench.is_object() || !bench.contains("gemms") || !bench["gemms"].is_array() || bench["gemms"].empty())
    throw std::invalid_argument(fmt::format("{}: no 'gemms' rows; pass a JSON written by `nibble bench --json`",
                                            origin));
  const auto& gemms = bench["gemms"];
  std::set<std::string> recipes, modes;
  std::set<std::pair<std::string, std::string>> recipe_modes;
  for (const auto& row : gemms) {
    recipes.insert(string_field(row, "recipe"));
    modes.insert(string_field(row, "mode"));
    recipe_modes.insert({string_field(row, "recipe"), string_field(row, "mode")});
  }
  auto pick_recipe = [&](const std::string& wanted, std::initializer_list<const char*> defaults, const char* what,
                         const char* flag) {
    if (!wanted.empty()) {
      if (!recipes.count(wanted))
        throw std::invalid_argument(fmt::format("{}: {} recipe '{}' is not in the benchmark (recipes present: {}); "
                                                "rerun `nibble bench` with it or pick one with {}",
                                                origin, what, wanted, fmt::join(recipes, ", "), flag));
      return wanted;
    }
    for (const char* d : defaults)
      if (recipes.count(d)) return std::string(d);
    throw std::invalid_argument(fmt::format("{}: no {} baseline recipe ({}) in the benchmark (recipes present: "
                                            "{}); pick one with {}",
                                            origin, what, fmt::join(defaults, " or "), fmt::join(recipes, ", "), flag));
  };
  BenchSpeedups out;
  out.fp8_recipe = pick_recipe(o.fp8_recipe, {"fp8-current", "fp8-delayed"}, "FP8", "--fp8-recipe");
  out.fp4_recipe = pick_recipe(o.fp4_recipe, {"quartet"}, "FP4", "--fp4-recipe");
  auto both_in = [&](const std::string& m) {
    return recipe_modes.count({out.fp8_recipe, m}) && recipe_modes.count({out.fp4_recipe, m});
  };
  if (!o.mode.empty()) {
    if (!both_in(o.mode))
      throw std::invalid_argument(fmt::format("{}: mode '{}' does not hold both {} and {} (modes present: {}); "
                                              "pick another with --bench-mode",
                                              origin, o.mode, out.fp8_recipe, out.fp4_recipe, fmt::join(modes, ", ")));
    out.mode = o.mode;
  } else {
    // What training pays (step-faithful autocast) is what the compute-normalized comparison needs.
    for (const char* m : {"step", "per-gemm", "pre-quantized"})
      if (both_in(m)) {
        out.mode = m;
        break;
      }
    if (out.mode.empty())
      throw std::invalid_argument(fmt::format("{}: no mode holds both {} and {} (modes present: {})", origin,
                                              out.fp8_recipe, out.fp4_recipe, fmt::join(modes, ", ")));
  }
  const PassSums fp8 = sum_passes(gemms, out.fp8_recipe, out.mode, origin);
  const PassSums fp4 = sum_passes(gemms, out.fp4_recipe, out.mode, origin);
  if (fp8.fprop_rows == 0 || fp8.backward_rows == 0 || fp8.fprop_rows != fp4.fprop_rows ||
      fp8.backward_rows != fp4.backward_rows)
    throw std::invalid_argument(fmt::format(
        "{}: mode {} has {} fprop and {} dgrad/wgrad GEMMs for {} but {} and {} for {}; both recipes need the "
        "same, non-empty set of GEMMs",
        origin, out.mode, fp8.fprop_rows, fp8.backward_rows, out.fp8_recipe, fp4.fprop_rows, fp4.backward_rows,
        out.fp4_recipe));
  out.fp8_fprop_ms = fp8.fprop;
  out.fp8_backward_ms = fp8.backward;
  out.fp4_fprop_ms = fp4.fprop;
  out.fp4_backward_ms = fp4.backward;
  out.fp8_path = summary_path(bench, out.fp8_recipe, out.mode);
  out.fp4_path = summary_path(bench, out.fp4_recipe, out.mode);
  out.gpu = bench.contains("gpu") && bench["gpu"].is_string() ? bench["gpu"].get<std::string>() : "unknown GPU";
  out.predicted = io::json_fields::flag_or(bench, "predicted", false, fmt::format("bench JSON '{}'", origin));
  out.speedups.fwd = fp8.fprop / fp4.fprop;
  out.speedups.bwd = fp8.backward / fp4.backward;
  auto path_note = [](const std::string& p) { return p.empty() ? std::string() : " [" + p + "]"; };
  const std::string workload = bench_workload_text(bench);
  out.speedups.source = fmt::format("{} from {} ({}{}, mode {}): {}{} over {}{}, forward {:.3f}x, backward {:.3f}x",
                                    out.predicted ? "PREDICTED by the performance model" : "measured", origin,
                                    out.gpu, workload.empty() ? "" : ", " + workload, out.mode, out.fp4_recipe, path_note(out.fp4_path), out.fp8_recipe,
                                    path_note(out.fp8_path), out.speedups.fwd, out.speedups.bwd);
  return out;
}

std::string bench_workload_text(const nlohmann::json& bench) {
  if (!bench.is_object() || !bench.contains("model") || !bench["model"].is_object()) return "";
  const nlohmann::json& m = bench["model"];
  std::string name;
  if (m.contains("model") && m["model"].is_object() && m["model"].contains("name") && m["model"]["name"].is_string())
    name = m["model"]["name"].get<std::string>();
  const bool has_tokens = m.contains("tokens") && m["tokens"].is_number_integer();
  if (name.empty() && !has_tokens) return "";
  if (!has_tokens) return name;
  return fmt::format("{}{}{} tokens", name, name.empty() ? "" : ", ", m["tokens"].get<int64_t>());
}

BenchSpeedups read_bench_speedups(const std::string& path, const BenchSpeedupOptions& o) {
  const nlohmann::json j = io::read_json_file(path, "bench JSON", io::OpenError::invalid_argument);
  return speedups_from_bench_json(j, o, path);
}

}  // namespace nibble::law
