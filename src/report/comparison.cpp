// Two results side by side: the co-design loop (two GPUs, two model configs, before/after a change).
#include "nibble/results/aggregate.hpp"
#include "nibble/report.hpp"
#include "number_text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace nibble::report {

namespace {
std::string label(const bench::BenchResult& r) {
  return r.predicted ? r.gpu.name + " (PREDICTED)" : r.gpu.name;
}
// The model's name when `model` is the usual object, else the whole value (a file may hold anything
// there; json::value() throws on non-objects: found by fuzz_bench_result).
// Where the config came from (`source`: a preset's citation, a file path) is not part of the model's
// identity: the same dimensions from a preset and from a config.json are the same workload.
nlohmann::json model_identity(const nlohmann::json& m) {
  if (!m.is_object()) return m;
  nlohmann::json id = m.value("model", nlohmann::json());
  if (id.is_object()) id.erase("source");
  return id;
}
}  // namespace

std::string render_comparison(const bench::BenchResult& a, const bench::BenchResult& b) {
  const auto sa = bench::summarize(a);
  const auto sb = bench::summarize(b);
  auto sweeps = [](const bench::BenchResult& r) { return r.sweeps > 1 ? fmt::format(" sweeps={}", r.sweeps) : ""; };
  std::string out =
      wrap_text(fmt::format("A: {}  T={} layers={}{}  {}", label(a), a.tokens, a.layers, sweeps(a), a.command_line),
                "", "   ") +
      wrap_text(fmt::format("B: {}  T={} layers={}{}  {}", label(b), b.tokens, b.layers, sweeps(b), b.command_line),
                "", "   ");
  if (a.sweeps != b.sweeps)
    out += wrap_text(fmt::format("note: A's rows are medians over {} sweep(s), B's over {} (nibble bench --repeat): a "
                                 "side with one sweep carries more of its run's order and clock effects "
                                 "(docs/timing-noise.md)",
                                 a.sweeps, b.sweeps),
                     "", "  ");
  if (a.predicted || b.predicted)
    out += "!!! at least one side is PREDICTED (no measurement): compare with care\n";
  if (model_identity(a.model) != model_identity(b.model) ||
      a.tokens != b.tokens)
    out += "note: the two results are for different models or batches; B/A mixes hardware and shape\n";
  // The clocks each measured side ran at: a power-capped run's rows move by several percent on their own.
  for (const auto& [side, r] : {std::pair{"A", &a}, std::pair{"B", &b}})
    if (!r->predicted) out += wrap_text(fmt::format("{} {}", side, bench::clock_header(r->clocks)), "", "  ");
  out += fmt::format("\n{:<13}{:<14}{:>11}{:>11}{:>7}{:>10}{:>10}  {}\n", "recipe", "mode", "A layer ms",
                     "B layer ms", "B/A", "A vs bf16", "B vs bf16", "path");
  std::string path_differences;
  std::vector<std::pair<std::string, bench::Mode>> keys;
  for (const auto* list : {&sa, &sb})
    for (const auto& s : *list)
      if (std::find(keys.begin(), keys.end(), std::pair{s.recipe, s.mode}) == keys.end())
        keys.emplace_back(s.recipe, s.mode);
  for (const auto& [recipe, mode] : keys) {
    const auto* x = bench::find_summary(sa, recipe, mode);
    const auto* y = bench::find_summary(sb, recipe, mode);
    // The path the GPU runs (a prediction's path is the one it predicts; the header says which side is predicted).
    auto path = [](const bench::RecipeSummary* s) {
      return !s ? std::string("-") : s->path == "predicted" ? s->predicted_path : s->path;
    };
    const std::string pa = path(x), pb = path(y);
    std::string shown = pa == pb || pb == "-" ? pa : pa == "-" ? pb : "A, B differ (below)";
    if (pa != pb && pa != "-" && pb != "-")
      path_differences += fmt::format("  {} {}: A {}, B {}\n", recipe, bench::to_string(mode), pa, pb);
    const double ratio = (x && y && x->layer_ms > 0) ? y->layer_ms / x->layer_ms : bench::kNaN;
    out += fmt::format("{:<13}{:<14}{:>11}{:>11}{:>7}{:>10}{:>10}  {}\n", recipe, bench::to_string(mode),
                       x ? ms_text(x->layer_ms) : "-", y ? ms_text(y->layer_ms) : "-",
                       std::isfinite(ratio) ? fmt::format("{:.3f}", ratio) : "-",
                       x ? speedup_text(x->speedup_vs_bf16) : "-", y ? speedup_text(y->speedup_vs_bf16) : "-", shown);
  }
  out += "(B/A < 1: B is faster)\n";
  if (!path_differences.empty()) out += "paths that differ between A and B:\n" + path_differences;
  // Both measured with sequence timing: the same comparison on the layers timed as one unit each.
  std::string seq;
  for (const auto& [recipe, mode] : keys) {
    const auto* x = bench::find_summary(sa, recipe, mode);
    const auto* y = bench::find_summary(sb, recipe, mode);
    if (!x || !y || !std::isfinite(x->sequence_layer_ms) || !std::isfinite(y->sequence_layer_ms)) continue;
    seq += fmt::format("{:<13}{:<14}{:>12}{:>12}{:>9.3f}\n", recipe, bench::to_string(mode), ms_text(x->sequence_layer_ms),
                       ms_text(y->sequence_layer_ms), y->sequence_layer_ms / x->sequence_layer_ms);
  }
  if (!seq.empty())
    out += fmt::format("\nper layer timed as one sequence\n{:<13}{:<14}{:>12}{:>12}{:>9}\n", "recipe", "mode",
                       "A ms", "B ms", "B/A") + seq;
  // How close each side's quantization kernels came to its own copy bandwidth (autocast modes): tells a
  // kernel that scales with the memory from one that does not, when A and B are two GPUs.
  std::string quant;
  for (const auto& [recipe, mode] : keys) {
    const auto* x = bench::find_summary(sa, recipe, mode);
    const auto* y = bench::find_summary(sb, recipe, mode);
    const bool in_a = x && std::isfinite(x->quant_vs_copy), in_b = y && std::isfinite(y->quant_vs_copy);
    if (!in_a && !in_b) continue;
    quant += fmt::format("{:<13}{:<14}{:>12}{:>12}\n", recipe, bench::to_string(mode),
                         in_a ? fmt::format("{:.2f}", x->quant_vs_copy) : "-",
                         in_b ? fmt::format("{:.2f}", y->quant_vs_copy) : "-");
  }
  if (!quant.empty())
    out += fmt::format("\nquantization kernels against each side's copy bandwidth\n{:<13}{:<14}{:>12}{:>12}\n", "recipe",
                       "mode", "A", "B") + quant;
  return out;
}

}  // namespace nibble::report
