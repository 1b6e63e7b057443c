// The terminal report: fixed-width tables a user reads at a glance, then what the numbers mean.
#include "nibble/results/aggregate.hpp"
#include "nibble/report.hpp"
#include "number_text.hpp"
#include "terminal_header.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace nibble::report {

using bench::BenchResult;
using bench::Mode;
using bench::RecipeSummary;
using bench::Row;

namespace {

const Row* find_row(const BenchResult& r, const Row& shape, const std::string& recipe, Mode mode) {
  for (const Row& x : r.rows)
    if (x.recipe == recipe && x.mode == mode && x.layer == shape.layer && x.pass == shape.pass &&
        x.m == shape.m && x.k == shape.k && x.n == shape.n)
      return &x;
  return nullptr;
}

// Per mode and pass: GEMMs down, recipes across; each cell "ms / TFLOP/s".
std::string pass_tables(const BenchResult& r, Mode mode, const std::vector<std::string>& recipes) {
  std::string out;
  constexpr int kShape = 34, kCell = 17;
  for (const char* pass : {"fprop", "dgrad", "wgrad"}) {
    std::vector<const Row*> shapes;
    for (const Row& x : r.rows)
      if (x.mode == mode && x.pass == pass &&
          std::none_of(shapes.begin(), shapes.end(), [&](const Row* s) {
            return s->layer == x.layer && s->m == x.m && s->k == x.k && s->n == x.n;
          }))
        shapes.push_back(&x);
    if (shapes.empty()) continue;
    out += fmt::format("\n{} [{}]  ms per call / TFLOP/s\n", pass, bench::to_string(mode));
    out += fmt::format("{:<{}}", "GEMM (M x K x N, count)", kShape);
    for (const auto& rc : recipes) out += fmt::format("{:>{}}", rc, kCell);
    out += "\n";
    for (const Row* s : shapes) {
      std::string label = fmt::format("{} {}x{}x{}", s->layer, s->m, s->k, s->n);
      if (s->count > 1) label += fmt::format(" x{}", s->count);
      out += fmt::format("{:<{}}", label, kShape);
      for (const auto& rc : recipes) {
        const Row* x = find_row(r, *s, rc, mode);
        std::string cell = !x ? "" : !x->ok() ? "FAILED" : ms_text(x->total_ms) + " / " + tflops_text(x->tflops);
        out += fmt::format("{:>{}}", cell, kCell);
      }
      out += "\n";
    }
  }
  return out;
}

std::string summary_table(const std::vector<RecipeSummary>& sums, const BenchResult& r) {
  // A prediction with an interval gives it on the layer and model times of every row.
  const bool interval = r.interval.present();
  const int w_layer = interval ? 23 : 10, w_model = interval ? 23 : 10;
  std::string out = fmt::format(
      "\nper layer (ms; quantization included in autocast modes)   baseline: {}\n", r.baseline_recipe);
  out += fmt::format("{:<13}{:<14}{:>9}{:>9}{:>9}{:>9}{:>{}}{:>{}}{:>8}{:>9}{:>10}{:>11}  {}\n", "recipe", "mode",
                     "fprop", "dgrad", "wgrad", "quant", "layer", w_layer, "model", w_model, "TFLOP/s", "vs bf16",
                     "vs base", "copy-speed", "path");
  for (const RecipeSummary& s : sums) {
    std::string path = s.path == "predicted" ? "predicted: " + s.predicted_path : s.path;
    if (s.mixed_paths) path += " (mixed)";
    if (s.failed_rows) path += fmt::format("  [{} rows FAILED]", s.failed_rows);
    out += fmt::format("{:<13}{:<14}{:>9}{:>9}{:>9}{:>9}{:>{}}{:>{}}{:>8}{:>9}{:>10}{:>11}  {}\n", s.recipe,
                       bench::to_string(s.mode), ms_text(s.ms.fprop_ms), ms_text(s.ms.dgrad_ms),
                       ms_text(s.ms.wgrad_ms), ms_text(s.quant.total_ms()),
                       ms_interval_text(s.layer_ms, s.layer_ms_low, s.layer_ms_high), w_layer,
                       ms_interval_text(s.model_ms, s.model_ms_low, s.model_ms_high), w_model,
                       tflops_text(s.layer_tflops), speedup_text(s.speedup_vs_bf16),
                       speedup_text(s.speedup_vs_baseline), ms_text(s.bound_layer_ms), path);
  }
  out += fmt::format("(model = the blocks (per model table below) + once-per-model GEMMs; layer = one block under the "
                     "recipe, {} blocks in all; copy-speed = the layer's time were its quantization at copy "
                     "bandwidth: its GEMMs on pre-quantized operands (per-gemm: its own GEMMs, with Transformer "
                     "Engine's settings) + quantization bytes / copy bandwidth. A reference, not a floor: a "
                     "measurement can beat it, by GEMM timing noise or quantization kernels faster than a copy)\n",
                     r.layers);
  return out;
}

// The whole model per recipe: its blocks under the layer plan, throughput, the weight quantization that
// gradient accumulation amortises, and the prediction interval when the result has one.
std::string model_table(const std::vector<RecipeSummary>& sums, const BenchResult& r) {
  const bool interval = r.interval.present();
  std::string out = fmt::format("\nper model, one micro-batch of {} tokens through all {} blocks{}{}\n", r.tokens,
                                r.layers,
                                r.layer_plan.bf16_blocks() > 0
                                    ? fmt::format(" ({} kept in BF16: {})", r.layer_plan.bf16_blocks(),
                                                  bench::to_string(r.layer_plan))
                                    : "",
                                r.grad_accum > 1 ? fmt::format(", gradient accumulation over {}", r.grad_accum) : "");
  const int w_ms = interval ? 28 : 11, w_tok = interval ? 26 : 11;
  out += fmt::format("{:<13}{:<14}{:>{}}{:>{}}{:>9}{:>14}{:>14}\n", "recipe", "mode", "blocks ms", w_ms, "tokens/s",
                     w_tok, "vs bf16", "W-quant ms", "of it counted");
  for (const RecipeSummary& s : sums) {
    const double blocks_low = interval ? s.blocks_ms * r.interval.low : bench::kNaN;
    const double blocks_high = interval ? s.blocks_ms * r.interval.high : bench::kNaN;
    out += fmt::format("{:<13}{:<14}{:>{}}{:>{}}{:>9}{:>14}{:>14}\n", s.recipe, bench::to_string(s.mode),
                       ms_interval_text(s.blocks_ms, blocks_low, blocks_high), w_ms,
                       tokens_interval_text(s.tokens_per_s, s.tokens_per_s_low, s.tokens_per_s_high), w_tok,
                       speedup_text(s.model_speedup_vs_bf16), s.weight_quant_ms > 0 ? ms_text(s.weight_quant_ms) : "-",
                       s.weight_quant_ms > 0 ? ms_text(s.weight_quant_share_ms) : "-");
  }
  out += "(blocks = the transformer blocks' linear GEMMs and their quantization, each block under its plan; tokens/s = "
         "tokens / blocks ms: embeddings, LM head, attention core, communication and the optimizer are excluded. "
         "W-quant = one quantization of one block's weights (step mode); counted = its share per micro-batch, "
         "W-quant / grad_accum, included in every time above)\n";
  if (interval) out += fmt::format("(intervals: {})\n", r.interval.method);
  return out;
}

std::string overhead_and_asymmetry(const std::vector<RecipeSummary>& sums, const BenchResult& r) {
  std::string out;
  bool any = std::any_of(sums.begin(), sums.end(), [](const auto& s) { return std::isfinite(s.quant_overhead_ms); });
  if (any) {
    out += "\nquantization overhead per layer (autocast minus pre-quantized)\n";
    for (const auto& s : sums)
      if (std::isfinite(s.quant_overhead_ms) && s.recipe != "bf16") {
        const auto* pre = bench::find_summary(sums, s.recipe, Mode::pre_quantized);
        out += fmt::format("  {:<13}{:<10}{:>9} ms  ({:+.0f}% of the GEMM time)", s.recipe,
                           bench::to_string(s.mode), ms_text(s.quant_overhead_ms),
                           100.0 * s.quant_overhead_ms / pre->layer_ms);
        if (std::isfinite(s.quant_vs_copy))
          out += fmt::format("; its quantization kernels move {:.0f} MB at {:.2f} of copy bandwidth",
                             s.quant_bytes / 1e6, s.quant_vs_copy);
        // Per-gemm GEMMs run with Transformer Engine's settings, not the pre-quantized rows': when their
        // time differs, the overhead above is not the quantization's cost alone, so say what each was.
        const double gemm_change = s.gemm.total_ms() / pre->gemm.total_ms() - 1;
        if (s.mode == Mode::per_gemm && std::isfinite(gemm_change) && std::abs(gemm_change) > 0.03)
          out += fmt::format("\n{:23}(its GEMMs, with Transformer Engine's settings, took {} ms, {:+.0f}% vs "
                             "pre-quantized; its quantization {} ms)",
                             "", ms_text(s.gemm.total_ms()), 100.0 * gemm_change, ms_text(s.quant.total_ms()));
        out += "\n";
      }
  }
  // GEMM-only asymmetry (the first mode, pre-quantized when it ran); the JSON has every mode.
  auto asym = bench::fprop_dgrad_asymmetry(r);
  if (!asym.empty()) {
    // One line per layer shape, one column per recipe (the times themselves are in the pass tables).
    const Mode shown = asym.front().mode;
    std::vector<std::pair<std::string, bench::LinearShape>> layers;
    std::vector<std::string> cols;
    auto index_of = [](auto& v, const auto& key) {
      const auto it = std::find(v.begin(), v.end(), key);
      if (it != v.end()) return static_cast<size_t>(it - v.begin());
      v.push_back(key);
      return v.size() - 1;
    };
    std::vector<std::vector<std::string>> cells;  // [layer][recipe], filled in one pass over asym
    for (const auto& a : asym) {
      if (a.mode != shown) continue;
      const size_t li = index_of(layers, std::pair<std::string, bench::LinearShape>{a.layer, a.shape});
      const size_t ci = index_of(cols, a.recipe);
      if (cells.size() <= li) cells.resize(li + 1);
      if (cells[li].size() <= ci) cells[li].resize(ci + 1, "-");
      if (std::isfinite(a.dgrad_over_fprop)) cells[li][ci] = fmt::format("{:.2f}", a.dgrad_over_fprop);
    }
    out += fmt::format("\nfprop vs dgrad per shape, {} (dgrad / fprop time; 1.00 = same cost)\n",
                       bench::to_string(shown));
    out += fmt::format("  {:<36}", "layer (fprop T x I x O)");
    for (const auto& c : cols) out += fmt::format("{:>13}", c);
    out += "\n";
    for (size_t li = 0; li < layers.size(); ++li) {
      const auto& [layer, shape] = layers[li];
      out += fmt::format("  {:<36}", fmt::format("{} {}x{}x{}", layer, shape.t, shape.i, shape.o));
      for (size_t ci = 0; ci < cols.size(); ++ci)
        out += fmt::format("{:>13}", ci < cells[li].size() ? cells[li][ci] : "-");
      out += "\n";
    }
  }
  if (!r.memory.empty()) {
    const bool measured = std::any_of(r.memory.begin(), r.memory.end(), [](const auto& m) { return m.measured_bytes > 0; });
    out += "\nmemory per recipe (one transformer block; modelled, the same model as a prediction)\n";
    out += fmt::format("  {:<13}{:>14}{:>18}{:>14}{}\n", "recipe", "operands", "saved for bwd", "peak",
                       measured ? fmt::format("{:>16}", "measured") : "");
    for (const auto& m : r.memory)
      out += fmt::format("  {:<13}{:>14}{:>18}{:>14}{}\n", m.recipe, bytes_text(double(m.operand_bytes)),
                         bytes_text(double(m.saved_bytes)), bytes_text(double(m.peak_bytes)),
                         measured ? fmt::format("{:>16}", m.measured_bytes > 0 ? bytes_text(double(m.measured_bytes)) : "-")
                                  : "");
    out += "(operands: the largest linear layer's, all copies and emulation buffers; peak: what every layer saves for "
           "backward + the largest layer's other operands";
    out += measured ? "; measured: the most device memory one linear layer held, BF16 sources and GEMM output included)\n"
                    : ")\n";
  }
  return out;
}

// Each linear layer's passes timed back to back as one unit, next to the sum of the rows' parts.
std::string sequence_table(const std::vector<RecipeSummary>& sums) {
  const bool any = std::any_of(sums.begin(), sums.end(), [](const auto& s) { return std::isfinite(s.sequence_layer_ms); });
  if (!any) return {};
  std::string out = "\nper layer timed as one sequence (each linear layer's passes back to back, as a training "
                    "step runs them)\n";
  out += fmt::format("  {:<13}{:<14}{:>10}{:>14}{:>10}{:>9}{:>15}\n", "recipe", "mode", "sequence", "sum of parts",
                     "diff", "vs bf16", "vs copy-speed");
  auto pct = [](double a, double b) { return std::isfinite(a / b) ? fmt::format("{:+.1f}%", 100.0 * (a / b - 1)) : "-"; };
  for (const auto& s : sums) {
    if (!std::isfinite(s.sequence_layer_ms)) continue;
    out += fmt::format("  {:<13}{:<14}{:>10}{:>14}{:>10}{:>9}{:>15}\n", s.recipe, bench::to_string(s.mode),
                       ms_text(s.sequence_layer_ms), ms_text(s.layer_ms), pct(s.sequence_layer_ms, s.layer_ms),
                       speedup_text(s.sequence_speedup_vs_bf16),
                       bench::is_autocast(s.mode) ? pct(s.sequence_layer_ms, s.bound_layer_ms) : "");
  }
  out += "(the rows above time quantization and GEMM apart; a sequence also pays for what they do to each other: "
         "clock state, launch gaps, operands left in L2)\n";
  return out;
}

// Repeated sweeps (`--repeat N`): each sweep's per-layer time and speedup, and how far apart the sweeps were.
std::string sweep_table(const BenchResult& r) {
  if (r.sweeps <= 1 || r.sweep_summaries.empty()) return {};
  std::string out = fmt::format("\nper layer in each of the {} sweeps (recipe order rotated every sweep; every table "
                                "above holds the medians over the sweeps)\n", r.sweeps);
  out += fmt::format("  {:<13}{:<14}{:>11}  {}\n", "recipe", "mode", "spread", "layer ms (speedup vs bf16) per sweep");
  for (const auto& w : r.sweep_summaries) {
    std::string cells;
    double lo = bench::kNaN, hi = bench::kNaN;
    for (size_t i = 0; i < w.layer_ms.size(); ++i) {
      const double ms = w.layer_ms[i];
      const double sp = i < w.speedup_vs_bf16.size() ? w.speedup_vs_bf16[i] : bench::kNaN;
      cells += fmt::format("  {} ({})", ms_text(ms), speedup_text(sp));
      if (std::isfinite(ms)) {
        lo = std::isfinite(lo) ? std::min(lo, ms) : ms;
        hi = std::isfinite(hi) ? std::max(hi, ms) : ms;
      }
    }
    const std::string spread = std::isfinite(lo) && lo > 0 ? fmt::format("{:.1f}%", 100.0 * (hi / lo - 1)) : "-";
    out += fmt::format("  {:<13}{:<14}{:>11}{}\n", w.recipe, bench::to_string(w.mode), spread, cells);
  }
  out += "(spread = slowest / fastest sweep - 1: recipes whose speedups differ by less than it are not ordered "
         "by this run)\n";
  return out;
}

// What the numbers mean, in words (the same lines as the HTML report's).
std::string interpretation(const std::vector<RecipeSummary>& sums, const BenchResult& r) {
  std::string out = "\nwhat this means\n";
  for (const std::string& line : interpretation_lines(sums, bench::run_variation(r))) out += "  " + line + "\n";
  return out;
}

}  // namespace

std::string model_line(const BenchResult& r) {
  std::string name = "model";
  const auto& m = r.model;
  if (m.contains("model") && m["model"].is_object()) {
    const auto& c = m["model"];
    // A result file may hold anything here: read each field only when it has the expected type
    // (json::value() throws type_error otherwise).
    auto num = [&](const char* k) { return c.contains(k) ? c[k].dump() : std::string("?"); };
    auto integer = [&](const char* k, int64_t fallback) {
      return c.contains(k) && c[k].is_number_integer() ? c[k].get<int64_t>() : fallback;
    };
    const std::string model_name = c.contains("name") && c["name"].is_string() ? c["name"].get<std::string>() : "model";
    name = fmt::format("{}: hidden {}, ffn {}, heads {}, kv_heads {}, layers {}, vocab {}", model_name, num("hidden"),
                       num("ffn"), num("heads"), num("kv_heads"), num("layers"), num("vocab"));
    if (c.contains("gated") && c["gated"].is_boolean() && c["gated"].get<bool>()) name += ", gated MLP";
    if (integer("experts", 0) > 0) name += fmt::format(", {} experts top-{}", num("experts"), num("top_k"));
    if (integer("tp", 1) > 1) name += fmt::format(", tp {}", num("tp"));
  } else if (m.contains("name")) {
    name = m["name"].is_string() ? m["name"].get<std::string>() : m["name"].dump();
  }
  return fmt::format("{}\nT = {} tokens per micro-batch, {} layers\n", name, r.tokens, r.layers);
}

std::string gpu_line(const BenchResult& r) {
  const auto& g = r.gpu;
  std::string out = fmt::format("nibble bench on {}", g.name);
  if (g.sm_count) out += fmt::format(", {} SMs", g.sm_count);
  if (g.sm_clock_mhz > 0) out += fmt::format(", {:.0f} MHz", g.sm_clock_mhz);
  if (!g.driver_version.empty()) out += fmt::format(", driver {}", g.driver_version);
  if (!g.cuda_version.empty()) out += fmt::format(", CUDA {}", g.cuda_version);
  if (!g.cublaslt_version.empty()) out += fmt::format(", cuBLASLt {}", g.cublaslt_version);
  return out + "\n";
}

std::string copy_bandwidth_line(const BenchResult& r) {
  if (!(r.copy_bandwidth_gbs > 0)) return {};
  std::string out =
      fmt::format("copy bandwidth {} {:.2f} TB/s", r.predicted ? "assumed" : "measured", r.copy_bandwidth_gbs / 1000);
  if (r.gpu.memory_bandwidth_gbs > 0)
    out += fmt::format(" ({:.2f} of the {:.2f} TB/s peak{})", r.copy_bandwidth_gbs / r.gpu.memory_bandwidth_gbs,
                       r.gpu.memory_bandwidth_gbs / 1000,
                       r.predicted ? " in the GPU database" : " from the memory clock and bus width");
  return out + "\n";
}

std::string predicted_banner(const BenchResult& r) {
  return fmt::format("PREDICTED for {} (no measurement)", r.gpu.name);
}

std::string opening_banner(const BenchResult& r) {
  if (!r.predicted) return {};
  const std::string rule(kTerminalColumns, '!');
  return fmt::format("{}\n!!! {}: every time below comes from the performance model\n{}\n", rule,
                     predicted_banner(r), rule);
}

std::string render_terminal(const BenchResult& r) {
  std::string out = opening_banner(r);
  const std::string rule(kTerminalColumns, '!');
  out += gpu_line(r);
  if (!r.date.empty()) out += fmt::format("{}  {}\n", r.date, r.command_line);
  out += model_line(r);
  out += copy_bandwidth_line(r);
  if (!r.predicted) out += bench::clock_header(r.clocks) + "\n";
  const auto recipes = bench::recipes_in(r);
  for (Mode mode : bench::modes_in(r)) out += pass_tables(r, mode, recipes);
  const auto sums = bench::summarize(r);
  out += summary_table(sums, r);
  out += model_table(sums, r);
  out += overhead_and_asymmetry(sums, r);
  out += sequence_table(sums);
  out += sweep_table(r);
  out += interpretation(sums, r);
  for (const Row& x : r.rows)
    if (!x.ok())
      out += fmt::format("  FAILED {} {} {} ({}): {}\n", x.layer, x.pass, x.recipe, bench::to_string(x.mode), x.error);
  for (const auto& n : grouped_notes(r)) out += "note: " + n + "\n";
  if (r.predicted) out += fmt::format("{}\n!!! {}\n{}\n", rule, predicted_banner(r), rule);
  return out;
}

}  // namespace nibble::report
