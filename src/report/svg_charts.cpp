// Hand-drawn SVG bar charts (see svg_charts.hpp).
#include "svg_charts.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace nibble::report::svg {

namespace {

// Colour-blind-friendly palette (Okabe-Ito), cycled.
constexpr const char* kColours[] = {"#0072B2", "#E69F00", "#009E73", "#CC79A7",
                                    "#56B4E9", "#D55E00", "#F0E442", "#999999"};
const char* colour(size_t i) { return kColours[i % (sizeof kColours / sizeof *kColours)]; }

constexpr int kRightPad = 90, kTitleH = 26, kLegendRowH = 18;

// The legend under the title, wrapped to the frame's width; returns the y where the plot starts.
int legend(std::string& out, const std::vector<std::string>& entries, const Frame& frame) {
  int x = 4, y = kTitleH;
  for (size_t i = 0; i < entries.size(); ++i) {
    const int w = 24 + 7 * int(entries[i].size());
    if (x > 4 && x + w > frame.width) x = 4, y += kLegendRowH;
    out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/>"
                       "<text x=\"{}\" y=\"{}\">{}</text>\n",
                       x, y, colour(i), x + 16, y + 11, escape_xml(entries[i]));
    x += w;
  }
  return y + kLegendRowH + 8;
}

std::string open_svg(const Frame& frame, int height, const std::string& title) {
  return fmt::format("<svg width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" role=\"img\" "
                     "font-family=\"sans-serif\" font-size=\"12\">\n<title>{}</title>\n"
                     "<text class=\"chart-title\" x=\"4\" y=\"16\" font-size=\"14\" font-weight=\"bold\">{}</text>\n",
                     frame.width, height, frame.width, height, escape_xml(title), escape_xml(title));
}

double scale_max(double max_value) { return max_value > 0 && std::isfinite(max_value) ? max_value : 1.0; }

std::string value_text(double v) {
  if (!std::isfinite(v)) return "n/a";
  return std::fabs(v) >= 100 ? fmt::format("{:.0f}", v) : fmt::format("{:.3g}", v);
}

}  // namespace

std::string stacked_bars(const std::string& title, const std::string& unit, const std::vector<StackedBar>& bars,
                         const Frame& frame) {
  constexpr int kBarH = 18, kGap = 6;
  std::vector<std::string> entries;
  double max_total = 0;
  for (const auto& b : bars) {
    double total = 0;
    for (const auto& s : b.segments) {
      total += std::max(0.0, s.value);
      if (std::find(entries.begin(), entries.end(), s.label) == entries.end()) entries.push_back(s.label);
    }
    max_total = std::max(max_total, total);
  }
  const double vmax = scale_max(max_total);
  const int plot_w = frame.width - frame.label_width - kRightPad;
  std::string body;
  const int top = legend(body, entries, frame);
  for (size_t i = 0; i < bars.size(); ++i) {
    const int y = top + int(i) * (kBarH + kGap);
    body += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", frame.label_width - 6,
                        y + kBarH - 5, escape_xml(bars[i].label));
    double x = frame.label_width, total = 0;
    for (const auto& s : bars[i].segments) {
      const double w = std::max(0.0, s.value) / vmax * plot_w;
      const size_t ci = std::find(entries.begin(), entries.end(), s.label) - entries.begin();
      body += fmt::format("<rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\">"
                          "<title>{}: {} {}</title></rect>\n",
                          x, y, w, kBarH, colour(ci), escape_xml(s.label), value_text(s.value), escape_xml(unit));
      x += w;
      total += std::max(0.0, s.value);
    }
    body += fmt::format("<text x=\"{:.1f}\" y=\"{}\">{} {}</text>\n", x + 4, y + kBarH - 5, value_text(total),
                        escape_xml(unit));
  }
  return open_svg(frame, top + int(bars.size()) * (kBarH + kGap) + 4, title) + body + "</svg>\n";
}

std::string grouped_bars(const std::string& title, const std::string& unit, const std::vector<std::string>& series,
                         const std::vector<Group>& groups, const GroupedStyle& style) {
  const Frame& frame = style.frame;
  const int bar_h = style.bar_height;
  auto at = [](const std::vector<double>& v, size_t i) { return i < v.size() ? v[i] : std::nan(""); };
  double vmax = std::isfinite(style.reference) ? style.reference : 0;
  for (const auto& g : groups)
    for (size_t i = 0; i < g.values.size(); ++i)
      for (double v : {g.values[i], at(g.high, i)})
        if (std::isfinite(v)) vmax = std::max(vmax, v);
  vmax = scale_max(vmax);
  const int plot_w = frame.width - frame.label_width - kRightPad;
  auto x_of = [&](double v) { return frame.label_width + std::max(0.0, v) / vmax * plot_w; };
  const int group_h = int(series.size()) * bar_h + 10;
  const int font = bar_h >= 14 ? 11 : 9;
  std::string body;
  const int top = legend(body, series, frame) + (style.reference_label.empty() ? 0 : 14);
  const int bottom = top + int(groups.size()) * group_h;
  if (std::isfinite(style.reference)) {  // drawn first, so the bars' value labels stay readable over it
    const double x = x_of(style.reference);
    body += fmt::format("<line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"#333\" stroke-dasharray=\"4 3\"/>\n",
                        x, top - 4, x, bottom);
    if (!style.reference_label.empty())
      body += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\" font-size=\"11\">{}</text>\n", x, top - 7,
                          escape_xml(style.reference_label));
  }
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const int y0 = top + int(gi) * group_h;
    body += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", frame.label_width - 6,
                        y0 + (group_h - 10) / 2 + 4, escape_xml(groups[gi].label));
    for (size_t si = 0; si < series.size() && si < groups[gi].values.size(); ++si) {
      const double v = groups[gi].values[si];
      if (!std::isfinite(v)) continue;
      const int y = y0 + int(si) * bar_h;
      const double lo = at(groups[gi].low, si), hi = at(groups[gi].high, si);
      const bool whisker = std::isfinite(lo) && std::isfinite(hi);
      std::string tip = fmt::format("{}: {}{}", series[si], value_text(v), unit);
      if (whisker) tip += fmt::format(" [{}, {}]", value_text(lo), value_text(hi));
      body += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"><title>{}</title></rect>\n",
                          frame.label_width, y, x_of(v) - frame.label_width, bar_h - 1, colour(si), escape_xml(tip));
      double label_x = x_of(v);
      if (whisker) {
        const double cy = y + (bar_h - 1) / 2.0, cap = std::max(2.0, bar_h / 3.0);
        body += fmt::format("<path class=\"whisker\" d=\"M{0:.1f} {1:.1f}H{2:.1f}M{0:.1f} {3:.1f}V{4:.1f}M{2:.1f} {3:.1f}"
                            "V{4:.1f}\" stroke=\"#222\" fill=\"none\"/>\n",
                            x_of(lo), cy, x_of(hi), cy - cap, cy + cap);
        label_x = std::max(label_x, x_of(hi));
      }
      body += fmt::format("<text x=\"{:.1f}\" y=\"{}\" font-size=\"{}\">{}{}</text>\n", label_x + 3, y + bar_h - 3,
                          font, style.decimals >= 0 ? fmt::format("{:.{}f}", v, style.decimals) : value_text(v),
                          escape_xml(style.value_suffix));
    }
  }
  return open_svg(frame, bottom + 4, title) + body + "</svg>\n";
}

}  // namespace nibble::report::svg
