// Hand-drawn SVG bar charts (see svg_charts.hpp).
#include "svg_charts.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace nibble::report::svg {

namespace {

// Colour-blind-friendly palette (Okabe-Ito), cycled.
constexpr const char* kColours[] = {"#0072B2", "#E69F00", "#009E73", "#CC79A7",
                                    "#56B4E9", "#D55E00", "#F0E442", "#999999"};
const char* colour(size_t i) { return kColours[i % (sizeof kColours / sizeof *kColours)]; }

constexpr int kWidth = 900, kLabelW = 260, kRightPad = 90, kBarH = 18, kGap = 6, kTop = 34;

std::string open_svg(int height, const std::string& title) {
  return fmt::format("<svg width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" role=\"img\" "
                     "font-family=\"sans-serif\" font-size=\"12\">\n<title>{}</title>\n"
                     "<text x=\"4\" y=\"18\" font-size=\"15\" font-weight=\"bold\">{}</text>\n",
                     kWidth, height, kWidth, height, escape_xml(title), escape_xml(title));
}

double scale_max(double max_value) { return max_value > 0 && std::isfinite(max_value) ? max_value : 1.0; }

std::string value_text(double v) {
  if (!std::isfinite(v)) return "n/a";
  return std::fabs(v) >= 100 ? fmt::format("{:.0f}", v) : fmt::format("{:.3g}", v);
}

}  // namespace

std::string stacked_bars(const std::string& title, const std::string& unit, const std::vector<StackedBar>& bars) {
  std::vector<std::string> legend;
  double max_total = 0;
  for (const auto& b : bars) {
    double total = 0;
    for (const auto& s : b.segments) {
      total += std::max(0.0, s.value);
      if (std::find(legend.begin(), legend.end(), s.label) == legend.end()) legend.push_back(s.label);
    }
    max_total = std::max(max_total, total);
  }
  const double vmax = scale_max(max_total);
  const int plot_w = kWidth - kLabelW - kRightPad;
  const int legend_y = kTop + int(bars.size()) * (kBarH + kGap) + 10;
  std::string out = open_svg(legend_y + 30, title);
  for (size_t i = 0; i < bars.size(); ++i) {
    const int y = kTop + int(i) * (kBarH + kGap);
    out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", kLabelW - 6,
                       y + kBarH - 5, escape_xml(bars[i].label));
    double x = kLabelW, total = 0;
    for (const auto& s : bars[i].segments) {
      const double w = std::max(0.0, s.value) / vmax * plot_w;
      const size_t ci = std::find(legend.begin(), legend.end(), s.label) - legend.begin();
      out += fmt::format("<rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\">"
                         "<title>{}: {} {}</title></rect>\n",
                         x, y, w, kBarH, colour(ci), escape_xml(s.label), value_text(s.value), escape_xml(unit));
      x += w;
      total += std::max(0.0, s.value);
    }
    out += fmt::format("<text x=\"{:.1f}\" y=\"{}\">{} {}</text>\n", x + 4, y + kBarH - 5,
                       value_text(total), escape_xml(unit));
  }
  int lx = kLabelW;
  for (size_t i = 0; i < legend.size(); ++i) {
    out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/>"
                       "<text x=\"{}\" y=\"{}\">{}</text>\n",
                       lx, legend_y, colour(i), lx + 16, legend_y + 11, escape_xml(legend[i]));
    lx += 24 + 7 * int(legend[i].size());
  }
  return out + "</svg>\n";
}

std::string bars(const std::string& title, const std::string& unit, const std::vector<Bar>& bars, double reference) {
  double vmax = std::isfinite(reference) ? reference : 0;
  for (const auto& b : bars)
    if (std::isfinite(b.value)) vmax = std::max(vmax, b.value);
  vmax = scale_max(vmax);
  const int plot_w = kWidth - kLabelW - kRightPad;
  const int height = kTop + int(bars.size()) * (kBarH + kGap) + 10;
  std::string out = open_svg(height, title);
  for (size_t i = 0; i < bars.size(); ++i) {
    const int y = kTop + int(i) * (kBarH + kGap);
    const double v = bars[i].value;
    const double w = std::isfinite(v) ? std::max(0.0, v) / vmax * plot_w : 0;
    out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n"
                       "<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"/>\n"
                       "<text x=\"{:.1f}\" y=\"{}\">{}{}</text>\n",
                       kLabelW - 6, y + kBarH - 5, escape_xml(bars[i].label), kLabelW, y, w, kBarH,
                       std::isfinite(reference) && v < reference ? "#D55E00" : "#0072B2",
                       kLabelW + w + 4, y + kBarH - 5, value_text(v), escape_xml(unit));
  }
  if (std::isfinite(reference)) {
    const double x = kLabelW + reference / vmax * plot_w;
    out += fmt::format("<line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"#333\" "
                       "stroke-dasharray=\"4 3\"/>\n",
                       x, kTop - 4, x, height - 8);
  }
  return out + "</svg>\n";
}

std::string grouped_bars(const std::string& title, const std::string& unit, const std::vector<std::string>& series,
                         const std::vector<Group>& groups) {
  const int bar_h = 10;
  double vmax = 0;
  for (const auto& g : groups)
    for (double v : g.values)
      if (std::isfinite(v)) vmax = std::max(vmax, v);
  vmax = scale_max(vmax);
  const int plot_w = kWidth - kLabelW - kRightPad;
  const int group_h = int(series.size()) * bar_h + 12;
  const int legend_y = kTop + int(groups.size()) * group_h + 6;
  std::string out = open_svg(legend_y + 30, title);
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const int y0 = kTop + int(gi) * group_h;
    out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", kLabelW - 6,
                       y0 + group_h / 2 + 2, escape_xml(groups[gi].label));
    for (size_t si = 0; si < series.size() && si < groups[gi].values.size(); ++si) {
      const double v = groups[gi].values[si];
      if (!std::isfinite(v)) continue;
      const double w = std::max(0.0, v) / vmax * plot_w;
      const int y = y0 + int(si) * bar_h;
      out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\">"
                         "<title>{}: {} {}</title></rect>\n",
                         kLabelW, y, w, bar_h - 1, colour(si), escape_xml(series[si]), value_text(v), escape_xml(unit));
      out += fmt::format("<text x=\"{:.1f}\" y=\"{}\" font-size=\"9\">{}</text>\n", kLabelW + w + 3,
                         y + bar_h - 2, value_text(v));
    }
  }
  int lx = kLabelW;
  for (size_t i = 0; i < series.size(); ++i) {
    out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/>"
                       "<text x=\"{}\" y=\"{}\">{}</text>\n",
                       lx, legend_y, colour(i), lx + 16, legend_y + 11, escape_xml(series[i]));
    lx += 24 + 7 * int(series[i].size());
  }
  return out + "</svg>\n";
}

}  // namespace nibble::report::svg
