// The HTML report: one self-contained file (inline CSS and SVG, no script, no external reference)
// so it can be mailed, archived beside its result JSON and opened offline. The answer comes first: the
// speedup chart and a short per-recipe table side by side, above the fold of a 1280 x 800 window; what
// it means, the model and the run below; every other table collapsed in a <details> section.
#include "html_parts.hpp"
#include "nibble/report.hpp"
#include "svg_charts.hpp"

#include <fmt/format.h>

namespace nibble::report {

using bench::BenchResult;
using svg::escape_xml;

namespace {

constexpr const char* kStyle = R"(
body { font: 14px/1.35 sans-serif; color: #222; margin: 0 auto; padding: 10px 20px; max-width: 1240px; }
h1 { font-size: 21px; margin: 4px 0; } h2 { font-size: 16px; margin: 14px 0 6px; } h3 { font-size: 14px; margin: 12px 0 4px; }
#summary h2 { font-size: 14px; margin: 0 0 6px; }
.facts-line { margin: 2px 0 8px; color: #444; }
.banner { background: #ffdd57; border: 2px solid #d55e00; padding: 4px 10px; margin: 6px 0; font-weight: bold; }
.top { display: flex; flex-wrap: wrap; gap: 12px 20px; align-items: flex-start; }
#headline { flex: 0 1 560px; margin: 0; min-width: 0; }
#summary { flex: 1 1 420px; min-width: 0; }
.side-by-side { display: flex; flex-wrap: wrap; gap: 12px 24px; align-items: flex-start; }
figcaption, .note { color: #555; font-size: 12px; }
svg { max-width: 100%; height: auto; }
.wide { max-width: 100%; overflow-x: auto; }
table { border-collapse: collapse; margin: 4px 0; font-size: 13px; }
caption { text-align: left; font-weight: bold; padding: 2px 0; }
th, td { border: 1px solid #ccc; padding: 2px 6px; text-align: right; vertical-align: top; }
th { background: #f0f0f0; font-weight: 600; } td.l, th.l { text-align: left; }
th.group { text-align: center; } th.blank { background: none; border: none; }
table.summary td:first-child { font-weight: 600; }
table.summary td:not(:last-child), table.summary th { white-space: nowrap; }
table.facts td { max-width: 420px; overflow-wrap: anywhere; }
small { color: #555; }
details { margin: 6px 0; border: 1px solid #ddd; border-radius: 4px; padding: 4px 10px; }
summary { cursor: pointer; font-weight: 600; }
.failed, .failed td { color: #b00; }
)";

}  // namespace

std::string to_html(const BenchResult& r) {
  const auto sums = bench::summarize(r);
  const std::string title =
      fmt::format("nibble bench: {} on {}{}", html::model_name(r), r.gpu.name, r.predicted ? " \u2014 PREDICTED" : "");
  std::string out = fmt::format("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                                "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
                                "<title>{}</title><style>{}</style></head><body>\n<h1>{}</h1>\n",
                                escape_xml(title), kStyle, escape_xml(title));
  if (r.predicted)
    out += fmt::format("<p class=banner>{}: every time in this report comes from nibble's performance model.</p>\n",
                       escape_xml(predicted_banner(r)));
  std::string facts = fmt::format("{} tokens per micro-batch &middot; {} blocks", r.tokens, r.layers);
  if (!r.date.empty()) facts += " &middot; " + escape_xml(r.date);
  out += "<p class=facts-line>" + facts + "</p>\n";
  out += "<div class=top>\n" + html::headline_chart(r, sums) + html::summary_table(r, sums) + "</div>\n";
  if (const auto lines = interpretation_lines(sums, bench::run_variation(r)); !lines.empty()) {
    out += "<h2>What this means</h2>\n<ul>\n";
    for (const std::string& line : lines) out += "<li>" + escape_xml(line) + "</li>\n";
    out += "</ul>\n";
  }
  out += "<div class=side-by-side>\n" + html::model_facts(r) + "<div>" + html::run_facts(r) + "</div></div>\n";
  out += html::per_layer_details(r, sums) + html::gemm_details(r) + html::memory_details(r) +
         html::sweep_details(r) + html::notes_details(r);
  if (r.predicted) out += fmt::format("<p class=banner>{}</p>\n", escape_xml(predicted_banner(r)));
  return out + "</body></html>\n";
}

}  // namespace nibble::report
