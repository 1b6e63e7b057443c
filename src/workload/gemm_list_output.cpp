// The three renderings of a GEMM list: JSON (read by later tools), CSV, and a terminal table.
#include <fmt/format.h>

#include <sstream>

#include "nibble/workload/gemm_list.hpp"

namespace nibble::workload {
namespace {

nlohmann::json totals_json(const FlopTotals& t) {
  return {{"fprop", t.fprop}, {"dgrad", t.dgrad}, {"wgrad", t.wgrad}, {"total", t.total()}};
}

std::string tflop(int64_t flops) { return fmt::format("{:.2f}", static_cast<double>(flops) * 1e-12); }

}  // namespace

nlohmann::json to_json(const Workload& w) {
  nlohmann::json gemms = nlohmann::json::array();
  for (const Gemm& g : w.gemms)
    gemms.push_back({{"layer", g.layer}, {"pass", g.pass}, {"m", g.m}, {"k", g.k}, {"n", g.n},
                     {"count", g.count}, {"flops", g.flops_exact()}, {"role", g.role},
                     {"per_model", g.per_model}, {"block_linear", is_block_linear(g.layer)}});
  const FlopTotals layer = w.layer_totals();
  FlopTotals per_model_only;
  for (const Gemm& g : w.gemms) {
    if (!g.per_model) continue;
    int64_t& slot = g.pass == "fprop" ? per_model_only.fprop : (g.pass == "dgrad" ? per_model_only.dgrad : per_model_only.wgrad);
    slot += g.flops_exact();  // bounded by model_totals(), which derive_workload checked
  }
  return {{"tokens", w.tokens},
          {"layers", w.layers},
          {"model", to_json(resolved(w.model))},
          {"gemms", gemms},
          {"totals", {{"per_layer", totals_json(layer)},
                      {"once_per_model", totals_json(per_model_only)},
                      {"per_model", totals_json(w.model_totals())}}},
          {"notes", w.notes}};
}

std::string to_csv(const Workload& w) {
  std::string out = "layer,pass,m,k,n,count,flops,role,per_model\n";
  for (const Gemm& g : w.gemms)
    out += fmt::format("{},{},{},{},{},{},{},{},{}\n", g.layer, g.pass, g.m, g.k, g.n, g.count, g.flops_exact(), g.role,
                       g.per_model ? 1 : 0);
  return out;
}

std::string to_table(const Workload& w) {
  const FlopTotals layer = w.layer_totals();
  const FlopTotals model = w.model_totals();
  std::string out = describe(w.model) + "\n";
  if (!w.model.source.empty()) out += "source: " + w.model.source + "\n";
  out += "\n";
  out += fmt::format("{:<12} {:<14} {:<6} {:>8} {:>8} {:>8} {:>6} {:>10} {:>7}\n", "layer", "role", "pass", "M", "K",
                     "N", "count", "GFLOP", "share");
  const double layer_total = static_cast<double>(layer.total());
  for (const Gemm& g : w.gemms) {
    const std::string share =
        g.per_model ? "model" : fmt::format("{:.1f}%", 100.0 * g.flops() / (layer_total > 0 ? layer_total : 1.0));
    out += fmt::format("{:<12} {:<14} {:<6} {:>8} {:>8} {:>8} {:>6} {:>10.1f} {:>7}\n", g.layer, g.role, g.pass, g.m,
                       g.k, g.n, g.count, g.flops() * 1e-9, share);
  }
  out += "\n";
  out += fmt::format("{:<34} {:>10} {:>10} {:>10} {:>10}\n", "TFLOP", "fprop", "dgrad", "wgrad", "total");
  out += fmt::format("{:<34} {:>10} {:>10} {:>10} {:>10}\n", "per layer", tflop(layer.fprop), tflop(layer.dgrad),
                     tflop(layer.wgrad), tflop(layer.total()));
  out += fmt::format("{:<34} {:>10} {:>10} {:>10} {:>10}\n",
                     fmt::format("per model ({} layers{})", w.layers,
                                 std::any_of(w.gemms.begin(), w.gemms.end(), [](const Gemm& g) { return g.per_model; })
                                     ? " + lm_head" : ""),
                     tflop(model.fprop), tflop(model.dgrad), tflop(model.wgrad), tflop(model.total()));
  if (!w.notes.empty()) out += "\n";
  for (const std::string& note : w.notes) out += "note: " + note + "\n";
  return out;
}

}  // namespace nibble::workload
