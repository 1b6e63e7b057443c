// The collapsed detail of the HTML report: sums per (recipe, mode), every GEMM, memory, sweeps, notes.
// Each section is a <details> element whose summary line says what it holds and how much.
#include "html_parts.hpp"
#include "html_table.hpp"
#include "nibble/report.hpp"
#include "number_text.hpp"
#include "svg_charts.hpp"

#include <fmt/format.h>

#include <cmath>

namespace nibble::report::html {

using bench::BenchResult;
using bench::Mode;
using svg::escape_xml;

namespace {

std::string details(const std::string& id, const std::string& summary, const std::string& body) {
  if (body.empty()) return "";
  return fmt::format("<details id={}><summary>{}</summary>\n{}</details>\n", id, summary, body);
}

std::string path_text(const std::string& path, const std::string& predicted_path) {
  return escape_xml(path == "predicted" ? "predicted: " + predicted_path : path);
}

// "a / b" of two speedups, "-" when neither is known.
std::string pair_text(double a, double b) {
  if (!std::isfinite(a) && !std::isfinite(b)) return "-";
  return speedup_text(a) + " / " + speedup_text(b);
}

std::string time_per_pass_chart(const BenchResult& r, const Summaries& sums) {
  std::vector<svg::StackedBar> stacked;
  for (const auto& s : sums) {
    svg::StackedBar b{fmt::format("{} ({})", s.recipe, bench::to_string(s.mode)),
                      {{"fprop GEMM", s.gemm.fprop_ms}, {"dgrad GEMM", s.gemm.dgrad_ms}, {"wgrad GEMM", s.gemm.wgrad_ms}}};
    if (bench::is_autocast(s.mode)) {
      b.segments.push_back({"fprop quant", s.quant.fprop_ms});
      b.segments.push_back({"dgrad quant", s.quant.dgrad_ms});
      b.segments.push_back({"wgrad quant", s.quant.wgrad_ms});
    }
    stacked.push_back(b);
  }
  return svg::stacked_bars(predicted_title(r, "Time per block, by pass and quantization"), "ms", stacked, {900, 230});
}

// TFLOP/s per GEMM shape and recipe, in the main mode.
std::string tflops_chart(const BenchResult& r) {
  const Mode mode = main_mode(r);
  const auto recipes = bench::recipes_in(r);
  std::vector<svg::Group> groups;
  for (const auto& x : r.rows) {
    if (x.mode != mode || x.recipe != recipes.front()) continue;
    svg::Group g{fmt::format("{} {} {}x{}x{}", x.layer, x.pass, x.m, x.k, x.n), {}, {}, {}};
    for (const auto& rc : recipes) {
      double v = bench::kNaN;
      for (const auto& y : r.rows)
        if (y.ok() && y.mode == mode && y.recipe == rc && y.layer == x.layer && y.pass == x.pass && y.m == x.m &&
            y.k == x.k && y.n == x.n)
          v = y.tflops;
      g.values.push_back(v);
    }
    groups.push_back(g);
  }
  if (groups.empty()) return "";
  return svg::grouped_bars(predicted_title(r, fmt::format("TFLOP/s per GEMM ({})", bench::to_string(mode))),
                           "TFLOP/s", recipes, groups);
}

}  // namespace

std::string per_layer_details(const BenchResult& r, const Summaries& sums) {
  Table time({{"recipe", true}, {"mode", true}, {"fprop ms"}, {"dgrad ms"}, {"wgrad ms"}, {"of it quant ms"},
              {"layer ms"}, {"copy-speed ms"}, {"TFLOP/s"}, {"path", true}});
  Table gain({{"recipe", true}, {"mode", true}, {"vs bf16"}, {"vs " + escape_xml(r.baseline_recipe)},
              {"fwd / bwd vs bf16"}, {"quant overhead ms"}, {"quant vs copy"}, {"as one sequence ms (vs bf16)"},
              {"model ms"}, {"tokens/s"}, {"model vs bf16"}, {"W-quant ms (counted)"}});
  for (const auto& s : sums) {
    std::string path = path_text(s.path, s.predicted_path);
    if (s.mixed_paths) path += " (mixed)";
    if (s.failed_rows) path += fmt::format(" [{} rows FAILED]", s.failed_rows);
    const std::string recipe = escape_xml(s.recipe), mode(bench::to_string(s.mode));
    time.add_row({recipe, mode, ms_text(s.ms.fprop_ms), ms_text(s.ms.dgrad_ms), ms_text(s.ms.wgrad_ms),
                  ms_text(s.quant.total_ms()), ms_text(s.layer_ms), ms_text(s.bound_layer_ms),
                  tflops_text(s.layer_tflops), path},
                 s.failed_rows ? "failed" : "");
    gain.add_row({recipe, mode, speedup_text(s.speedup_vs_bf16), speedup_text(s.speedup_vs_baseline),
                  pair_text(s.forward_speedup_vs_bf16, s.backward_speedup_vs_bf16), ms_text(s.quant_overhead_ms),
                  std::isfinite(s.quant_vs_copy) ? fmt::format("{:.2g}", s.quant_vs_copy) : "-",
                  std::isfinite(s.sequence_layer_ms)
                      ? fmt::format("{} ({})", ms_text(s.sequence_layer_ms), speedup_text(s.sequence_speedup_vs_bf16))
                      : "-",
                  ms_interval_text(s.model_ms, s.model_ms_low, s.model_ms_high),
                  tokens_interval_text(s.tokens_per_s, s.tokens_per_s_low, s.tokens_per_s_high),
                  speedup_text(s.model_speedup_vs_bf16),
                  s.weight_quant_ms > 0
                      ? fmt::format("{} ({})", ms_text(s.weight_quant_ms), ms_text(s.weight_quant_share_ms))
                      : "-"});
  }
  std::string body = fmt::format("<h3>{}</h3>\n", escape_xml(predicted_title(r, "Time per block (ms)"))) +
                     time.render() +
                     "<p class=note>Quantization included in the autocast modes. bound: the GEMMs on pre-quantized "
                     "operands + the quantization's bytes at copy bandwidth.</p>\n" +
                     fmt::format("<h3>{}</h3>\n", escape_xml(predicted_title(r, "Speedups and the whole model"))) +
                     gain.render() +
                     fmt::format("<p class=note>model: all {} blocks + once-per-model GEMMs; tokens/s: blocks only. "
                                 "W-quant: one quantization of one block's weights (step mode), in brackets its "
                                 "share per micro-batch.</p>\n",
                                 r.layers) +
                     time_per_pass_chart(r, sums);
  return details("per-layer", fmt::format("Per block: time per pass, speedups, the whole model ({} rows)", sums.size()),
                 body);
}

std::string gemm_details(const BenchResult& r) {
  Table t({{"layer", true}, {"pass", true}, {"M"}, {"K"}, {"N"}, {"count"}, {"recipe", true}, {"mode", true},
           {"GEMM ms"}, {"p10 &ndash; p90"}, {"quant ms"}, {"total ms"}, {"copy-speed ms"}, {"TFLOP/s"}, {"% peak"},
           {"path", true}, {"error", true}});
  for (const auto& x : r.rows) {
    std::vector<std::string> cells{escape_xml(x.layer), escape_xml(x.pass), fmt::format("{}", x.m),
                                   fmt::format("{}", x.k), fmt::format("{}", x.n), fmt::format("{}", x.count),
                                   escape_xml(x.recipe), std::string(bench::to_string(x.mode))};
    if (x.ok()) {
      for (std::string c : {ms_text(x.gemm.median_ms),
                            x.gemm.p90_ms > x.gemm.p10_ms
                                ? fmt::format("{} &ndash; {}", ms_text(x.gemm.p10_ms), ms_text(x.gemm.p90_ms))
                                : std::string("-"),
                            ms_text(x.quant_ms), ms_text(x.total_ms), ms_text(x.bound_ms), tflops_text(x.tflops),
                            pct_text(x.pct_of_peak), path_text(x.path, x.predicted_path), std::string("-")})
        cells.push_back(c);
    } else {
      for (int i = 0; i < 8; ++i) cells.push_back("-");
      cells.push_back("FAILED: " + escape_xml(x.error));
    }
    t.add_row(cells, x.ok() ? "" : "failed");
  }
  std::string body = fmt::format("<h3>{}</h3>\n", escape_xml(predicted_title(r, "Every GEMM, one call (ms)"))) +
                     t.render() + tflops_chart(r);
  return details("gemms", fmt::format("Every GEMM ({} rows)", r.rows.size()), body);
}

std::string memory_details(const BenchResult& r) {
  Table t({{"recipe", true}, {"operands (largest layer)"}, {"saved for backward"}, {"peak (modelled)"},
           {"measured (the most one linear layer held, with BF16 sources and output)"}});
  for (const auto& m : r.memory)
    t.add_row({escape_xml(m.recipe), bytes_text(double(m.operand_bytes)), bytes_text(double(m.saved_bytes)),
               bytes_text(double(m.peak_bytes)), m.measured_bytes > 0 ? bytes_text(double(m.measured_bytes)) : "-"});
  return details("memory", "Memory per recipe (one transformer block)", r.memory.empty() ? "" : t.render());
}

std::string sweep_details(const BenchResult& r) {
  if (r.sweeps <= 1 || r.sweep_summaries.empty()) return "";
  std::vector<Column> columns{{"recipe", true}, {"mode", true}};
  for (int k = 0; k < r.sweeps; ++k) columns.push_back({fmt::format("sweep {} ms (vs bf16)", k + 1)});
  Table t(columns);
  for (const auto& w : r.sweep_summaries) {
    std::vector<std::string> cells{escape_xml(w.recipe), std::string(bench::to_string(w.mode))};
    for (int k = 0; k < r.sweeps; ++k)
      cells.push_back(size_t(k) < w.layer_ms.size()
                          ? fmt::format("{} ({})", ms_text(w.layer_ms[k]),
                                        speedup_text(size_t(k) < w.speedup_vs_bf16.size() ? w.speedup_vs_bf16[k]
                                                                                           : bench::kNaN))
                          : "-");
    t.add_row(cells);
  }
  return details("sweeps",
                 fmt::format("Each of the {} sweeps (recipe order rotated every sweep; the tables hold the medians)",
                             r.sweeps),
                 t.render());
}

std::string notes_details(const BenchResult& r) {
  std::string body;
  const auto notes = grouped_notes(r);
  for (const auto& n : notes) body += fmt::format("<p class=note>note: {}</p>\n", escape_xml(n));
  return details("notes", fmt::format("Notes ({})", notes.size()), body);
}

}  // namespace nibble::report::html
