// The HTML report: one self-contained file (inline CSS and SVG, no script, no external reference)
// so it can be mailed, archived beside its result JSON and opened offline.
#include "nibble/report.hpp"
#include "nibble/results/aggregate.hpp"
#include "number_text.hpp"
#include "svg_charts.hpp"

#include <fmt/format.h>

#include <cmath>

namespace nibble::report {

using bench::BenchResult;
using bench::Mode;
using svg::escape_xml;

namespace {

constexpr const char* kStyle = R"(
body { font-family: sans-serif; margin: 2em; color: #222; max-width: 1200px; }
table { border-collapse: collapse; margin: 1em 0; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th { background: #f0f0f0; } td.l, th.l { text-align: left; }
.banner { background: #ffdd57; border: 3px solid #d55e00; padding: 1em; font-size: 1.4em; font-weight: bold; }
.failed { color: #b00; } .note { color: #555; }
)";

std::string summary_rows(const std::vector<bench::RecipeSummary>& sums) {
  std::string out =
      "<table><tr><th class=l>recipe</th><th class=l>mode</th><th>fprop ms</th><th>dgrad ms</th>"
      "<th>wgrad ms</th><th>quant ms</th><th>quant vs copy</th><th>layer ms</th><th>model ms</th><th>TFLOP/s</th>"
      "<th>vs bf16</th><th>vs baseline</th><th>quant overhead ms</th><th>bound ms</th>"
      "<th>fwd / bwd vs bf16</th><th>as one sequence ms (vs bf16)</th><th>model ms [interval]</th>"
      "<th>tokens/s (blocks only) [interval]</th><th>model vs bf16</th><th>W-quant ms (counted)</th>"
      "<th class=l>path</th></tr>\n";
  for (const auto& s : sums) {
    std::string path = s.path == "predicted" ? "predicted: " + s.predicted_path : s.path;
    if (s.mixed_paths) path += " (mixed)";
    if (s.failed_rows) path += fmt::format(" [{} failed]", s.failed_rows);
    out += fmt::format(
        "<tr><td class=l>{}</td><td class=l>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td><b>{}</b></td><td>{}</td><td>{}</td><td><b>{}</b></td><td>{}</td><td>{}</td><td>{}</td>"
        "<td>{} / {}</td><td>{} ({})</td><td>{}</td><td>{}</td><td>{}</td><td>{} ({})</td><td class=l>{}</td></tr>\n",
        escape_xml(s.recipe), bench::to_string(s.mode), ms_text(s.ms.fprop_ms), ms_text(s.ms.dgrad_ms),
        ms_text(s.ms.wgrad_ms), ms_text(s.quant.total_ms()),
        std::isfinite(s.quant_vs_copy) ? fmt::format("{:.2f}", s.quant_vs_copy) : std::string("-"), ms_text(s.layer_ms), ms_text(s.model_ms),
        tflops_text(s.layer_tflops), speedup_text(s.speedup_vs_bf16), speedup_text(s.speedup_vs_baseline),
        ms_text(s.quant_overhead_ms), ms_text(s.bound_layer_ms), speedup_text(s.forward_speedup_vs_bf16),
        speedup_text(s.backward_speedup_vs_bf16), ms_text(s.sequence_layer_ms),
        speedup_text(s.sequence_speedup_vs_bf16), ms_interval_text(s.model_ms, s.model_ms_low, s.model_ms_high),
        tokens_interval_text(s.tokens_per_s, s.tokens_per_s_low, s.tokens_per_s_high),
        speedup_text(s.model_speedup_vs_bf16), ms_text(s.weight_quant_ms), ms_text(s.weight_quant_share_ms),
        escape_xml(path));
  }
  return out + "</table>\n";
}

std::string gemm_rows(const BenchResult& r) {
  std::string out =
      "<table><tr><th class=l>layer</th><th class=l>pass</th><th>M</th><th>K</th><th>N</th>"
      "<th>count</th><th class=l>recipe</th><th class=l>mode</th><th>GEMM ms (p10-p90)</th>"
      "<th>quant ms</th><th>total ms</th><th>bound ms</th><th>TFLOP/s</th><th>% peak</th>"
      "<th class=l>path</th></tr>\n";
  for (const auto& x : r.rows) {
    const std::string path = x.path == "predicted" ? "predicted: " + x.predicted_path : x.path;
    if (!x.ok()) {
      out += fmt::format("<tr class=failed><td class=l>{}</td><td class=l>{}</td><td>{}</td><td>{}</td>"
                         "<td>{}</td><td>{}</td><td class=l>{}</td><td class=l>{}</td>"
                         "<td colspan=7 class=l>FAILED: {}</td></tr>\n",
                         escape_xml(x.layer), x.pass, x.m, x.k, x.n, x.count, escape_xml(x.recipe),
                         bench::to_string(x.mode), escape_xml(x.error));
      continue;
    }
    out += fmt::format("<tr><td class=l>{}</td><td class=l>{}</td><td>{}</td><td>{}</td><td>{}</td>"
                       "<td>{}</td><td class=l>{}</td><td class=l>{}</td><td>{} ({}-{})</td><td>{}</td>"
                       "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=l>{}</td></tr>\n",
                       escape_xml(x.layer), x.pass, x.m, x.k, x.n, x.count, escape_xml(x.recipe),
                       bench::to_string(x.mode), ms_text(x.gemm.median_ms), ms_text(x.gemm.p10_ms),
                       ms_text(x.gemm.p90_ms), ms_text(x.quant_ms), ms_text(x.total_ms),
                       ms_text(x.bound_ms), tflops_text(x.tflops), pct_text(x.pct_of_peak), escape_xml(path));
  }
  return out + "</table>\n";
}

std::string charts(const BenchResult& r, const std::vector<bench::RecipeSummary>& sums) {
  std::vector<svg::StackedBar> stacked;
  std::vector<svg::Bar> speedups;
  for (const auto& s : sums) {
    const std::string label = fmt::format("{} ({})", s.recipe, bench::to_string(s.mode));
    svg::StackedBar b{label, {{"fprop GEMM", s.gemm.fprop_ms}, {"dgrad GEMM", s.gemm.dgrad_ms},
                              {"wgrad GEMM", s.gemm.wgrad_ms}}};
    if (bench::is_autocast(s.mode)) {
      b.segments.push_back({"fprop quant", s.quant.fprop_ms});
      b.segments.push_back({"dgrad quant", s.quant.dgrad_ms});
      b.segments.push_back({"wgrad quant", s.quant.wgrad_ms});
    }
    stacked.push_back(b);
    if (s.recipe != "bf16") speedups.push_back({label, s.speedup_vs_bf16});
  }
  std::string out = svg::stacked_bars("Time per layer, by pass and quantization", "ms", stacked);
  out += svg::bars("Speedup over bf16 per layer (dashed line: 1.0x)", "x", speedups, 1.0);
  // TFLOP/s per shape, in the mode that shows raw throughput when it ran.
  const auto modes = bench::modes_in(r);
  if (!modes.empty()) {
    const Mode mode = modes.front();
    const auto recipes = bench::recipes_in(r);
    std::vector<svg::Group> groups;
    for (const auto& x : r.rows) {
      if (x.mode != mode || x.recipe != recipes.front()) continue;
      svg::Group g{fmt::format("{} {} {}x{}x{}", x.layer, x.pass, x.m, x.k, x.n), {}};
      for (const auto& rc : recipes) {
        double v = bench::kNaN;
        for (const auto& y : r.rows)
          if (y.ok() && y.mode == mode && y.recipe == rc && y.layer == x.layer && y.pass == x.pass &&
              y.m == x.m && y.k == x.k && y.n == x.n)
            v = y.tflops;
        g.values.push_back(v);
      }
      groups.push_back(g);
    }
    out += svg::grouped_bars(fmt::format("TFLOP/s per GEMM ({})", bench::to_string(mode)), "TFLOP/s",
                             recipes, groups);
  }
  return out;
}

}  // namespace

std::string to_html(const BenchResult& r) {
  const auto sums = bench::summarize(r);
  const std::string title = fmt::format("nibble bench: {}{}", r.gpu.name, r.predicted ? " (PREDICTED)" : "");
  std::string out = fmt::format("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                                "<title>{}</title><style>{}</style></head><body>\n<h1>{}</h1>\n",
                                escape_xml(title), kStyle, escape_xml(title));
  if (r.predicted)
    out += fmt::format("<p class=banner>{}: every time in this report comes from nibble's performance "
                       "model.</p>\n", escape_xml(predicted_banner(r)));
  const auto& g = r.gpu;
  out += fmt::format("<p>GPU {} &middot; {} SMs &middot; driver {} &middot; CUDA {} &middot; cuBLASLt {}"
                     "<br>{} &middot; <code>{}</code><br>T = {} tokens, {} layers, baseline {}, copy "
                     "bandwidth {:.2f} TB/s ({})</p>\n",
                     escape_xml(g.name), g.sm_count, escape_xml(g.driver_version), escape_xml(g.cuda_version),
                     escape_xml(g.cublaslt_version), escape_xml(r.date), escape_xml(r.command_line), r.tokens,
                     r.layers, escape_xml(r.baseline_recipe), r.copy_bandwidth_gbs / 1000,
                     r.predicted ? "assumed" : "measured");
  if (!r.predicted) out += "<p class=note>" + escape_xml(bench::clock_header(r.clocks)) + "</p>\n";
  if (r.model.contains("model"))
    out += fmt::format("<p class=note>model: <code>{}</code></p>\n", escape_xml(r.model["model"].dump()));
  out += "<h2>Summary per layer</h2>\n" + summary_rows(sums);
  if (const auto lines = interpretation_lines(sums, bench::run_variation(r)); !lines.empty()) {
    out += "<h2>What this means</h2>\n<ul>\n";
    for (const std::string& line : lines) out += "<li>" + escape_xml(line) + "</li>\n";
    out += "</ul>\n";
  }
  if (r.sweeps > 1 && !r.sweep_summaries.empty()) {
    out += fmt::format("<h2>Each of the {} sweeps (recipe order rotated every sweep; the tables hold the medians)</h2>\n"
                       "<table><tr><th class=l>recipe</th><th class=l>mode</th>",
                       r.sweeps);
    for (int k = 0; k < r.sweeps; ++k) out += fmt::format("<th>sweep {} ms (vs bf16)</th>", k + 1);
    out += "</tr>\n";
    for (const auto& w : r.sweep_summaries) {
      out += fmt::format("<tr><td class=l>{}</td><td class=l>{}</td>", escape_xml(w.recipe), bench::to_string(w.mode));
      for (size_t k = 0; k < w.layer_ms.size(); ++k)
        out += fmt::format("<td>{} ({})</td>", ms_text(w.layer_ms[k]),
                           speedup_text(k < w.speedup_vs_bf16.size() ? w.speedup_vs_bf16[k] : bench::kNaN));
      out += "</tr>\n";
    }
    out += "</table>\n";
  }
  out += "<h2>Charts</h2>\n" + charts(r, sums);
  if (!r.memory.empty()) {
    out += "<h2>Memory per recipe (one transformer block)</h2>\n<table><tr><th class=l>recipe</th>"
           "<th>operands (largest layer)</th><th>saved for backward</th><th>peak (modelled)</th>"
           "<th>measured (the most one linear layer held, with BF16 sources and output)</th></tr>\n";
    for (const auto& m : r.memory)
      out += fmt::format("<tr><td class=l>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                         escape_xml(m.recipe), bytes_text(double(m.operand_bytes)), bytes_text(double(m.saved_bytes)),
                         bytes_text(double(m.peak_bytes)),
                         m.measured_bytes > 0 ? bytes_text(double(m.measured_bytes)) : "-");
    out += "</table>\n";
  }
  out += "<h2>Every GEMM</h2>\n" + gemm_rows(r);
  for (const auto& n : grouped_notes(r)) out += fmt::format("<p class=note>note: {}</p>\n", escape_xml(n));
  if (r.predicted) out += fmt::format("<p class=banner>{}</p>\n", escape_xml(predicted_banner(r)));
  return out + "</body></html>\n";
}

}  // namespace nibble::report
