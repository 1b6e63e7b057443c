// The top of the HTML report: the speedup chart and the per-recipe summary, sized to sit side by side
// above the fold of a 1280 x 800 window.
#include "html_parts.hpp"
#include "html_table.hpp"
#include "nibble/report.hpp"
#include "number_text.hpp"
#include "svg_charts.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace nibble::report::html {

using bench::BenchResult;
using bench::Mode;
using svg::escape_xml;

namespace {

// What each mode times, as the headline chart's legend says it.
std::string mode_label(Mode m) {
  switch (m) {
    case Mode::pre_quantized: return "pre-quantized GEMMs";
    case Mode::step: return "full step (GEMMs + quantization)";
    case Mode::per_gemm: return "per-gemm (Transformer Engine's quantization)";
  }
  return std::string(bench::to_string(m));
}

// The speedup of the model's blocks (honours the layer plan) and, with a prediction interval, its range:
// the recipe's time anywhere in the interval against bf16's predicted time.
struct Speedup {
  double value = bench::kNaN, low = bench::kNaN, high = bench::kNaN;
};
Speedup speedup_of(const BenchResult& r, const bench::RecipeSummary* s) {
  if (!s) return {};
  Speedup out{s->model_speedup_vs_bf16};
  if (r.interval.present() && std::isfinite(out.value) && s->recipe != "bf16")
    out.low = out.value / r.interval.high, out.high = out.value / r.interval.low;
  return out;
}

// "14.459" with its interval on a second, smaller line when the result has one.
std::string with_interval(const std::string& value, double low, double high, std::string (*text)(double)) {
  if (!std::isfinite(low) || !std::isfinite(high) || value == "-") return value;
  return fmt::format("{}<br><small>{} &ndash; {}</small>", value, text(low), text(high));
}

}  // namespace

std::string predicted_title(const BenchResult& r, const std::string& text) {
  return r.predicted ? text + " \u2014 PREDICTED for " + r.gpu.name : text;
}

Mode main_mode(const BenchResult& r) {
  const auto modes = bench::modes_in(r);
  for (Mode m : {Mode::step, Mode::per_gemm})
    if (std::find(modes.begin(), modes.end(), m) != modes.end()) return m;
  return Mode::pre_quantized;
}

std::string headline_chart(const BenchResult& r, const Summaries& sums) {
  const auto modes = bench::modes_in(r);
  std::vector<std::string> series;
  for (Mode m : modes) series.push_back(mode_label(m));
  std::vector<svg::Group> groups;
  for (const std::string& recipe : bench::recipes_in(r)) {
    if (recipe == "bf16") continue;
    svg::Group g{recipe, {}, {}, {}};
    for (Mode m : modes) {
      const Speedup s = speedup_of(r, bench::find_summary(sums, recipe, m));
      g.values.push_back(s.value);
      g.low.push_back(s.low);
      g.high.push_back(s.high);
    }
    groups.push_back(g);
  }
  const svg::GroupedStyle style{.frame = {560, 96},
                                .bar_height = modes.size() > 2 ? 12 : 15,
                                .reference = 1.0,
                                .reference_label = "bf16",
                                .value_suffix = "x",
                                .decimals = 2};
  std::string title = predicted_title(r, "Speedup over bf16, all blocks");
  std::string caption = "Bars: the model's transformer blocks (their linear layers' GEMMs, forward and backward), "
                        "bf16 time / the recipe's time; right of the dashed line is faster than bf16.";
  if (r.interval.present())
    caption += fmt::format(" Whiskers: the recipe's time anywhere in the prediction interval x{:.2f} .. x{:.2f} "
                           "against bf16's predicted time.",
                           r.interval.low, r.interval.high);
  return fmt::format("<figure id=headline>\n{}<figcaption>{}</figcaption></figure>\n",
                     svg::grouped_bars(title, "x", series, groups, style), escape_xml(caption));
}

std::string summary_table(const BenchResult& r, const Summaries& sums) {
  const auto modes = bench::modes_in(r);
  const Mode main = main_mode(r);
  const std::string main_group = main == Mode::step ? "full step" : std::string(bench::to_string(main));
  std::vector<Column> columns{{"recipe", true}};
  for (Mode m : modes) columns.push_back({std::string(bench::to_string(m)), false, "speedup over bf16"});
  columns.push_back({"ms per block", false, main_group});
  columns.push_back({"tokens/s", false, main_group});
  columns.push_back({"path", true});
  Table table(columns);
  for (const std::string& recipe : bench::recipes_in(r)) {
    std::vector<std::string> cells{escape_xml(recipe)};
    for (Mode m : modes) cells.push_back(speedup_text(speedup_of(r, bench::find_summary(sums, recipe, m)).value));
    const auto* s = bench::find_summary(sums, recipe, main);
    if (!s) s = bench::find_summary(sums, recipe, modes.front());
    cells.push_back(s ? with_interval(ms_text(s->layer_ms), s->layer_ms_low, s->layer_ms_high, ms_text) : "-");
    cells.push_back(s ? with_interval(tokens_text(s->tokens_per_s), s->tokens_per_s_low, s->tokens_per_s_high,
                                      tokens_text)
                      : "-");
    std::string path = !s ? "-" : s->path == "predicted" ? s->predicted_path : s->path;
    if (s && s->mixed_paths) path += " (mixed)";
    std::string row_class;
    if (s && s->failed_rows) {
      path += fmt::format(" [{} rows FAILED]", s->failed_rows);
      row_class = "failed";
    }
    cells.push_back(escape_xml(path));
    table.add_row(cells, row_class);
  }
  std::string caption = predicted_title(r, fmt::format("Per recipe: {} tokens per micro-batch, {} blocks", r.tokens, r.layers));
  const std::string note = fmt::format(
      "ms per block: one transformer block's linear layers, forward and backward; tokens/s: tokens / all blocks' "
      "time (embeddings, LM head, attention core, communication and the optimizer excluded){}{}.",
      r.predicted ? "; path: the path the GPU would run" : "",
      r.interval.present() ? "; second line: the prediction interval" : "");
  return fmt::format("<section id=summary><h2>{}</h2>\n{}<p class=note>{}</p></section>\n", escape_xml(caption),
                     table.render("summary"), note);
}

}  // namespace nibble::report::html
