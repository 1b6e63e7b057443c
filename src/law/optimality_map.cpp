// Grid evaluation of the planner, and the map as CSV and as SVG.
#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

#include "nibble/io/xml_text.hpp"
#include "nibble/law/planner.hpp"

namespace nibble::law {
namespace {
double log_step(double lo, double hi, int steps, int i) {
  // Endpoints exact, so the map's corners are the N and D/N the user asked for.
  if (i == 0 || steps == 1) return lo;
  if (i == steps - 1) return hi;
  return std::exp(std::log(lo) + (std::log(hi) - std::log(lo)) * i / (steps - 1));
}
}  // namespace

OptimalityMap compute_optimality_map(const LawConstants& law, Efficiency fp4_eff, const std::string& eff_source,
                                     const Speedups& sp, const MapGridSpec& g) {
  if (!(g.n_min > 0 && g.n_max >= g.n_min && g.ratio_min > 0 && g.ratio_max >= g.ratio_min))
    throw std::invalid_argument(fmt::format("map grid N [{}, {}], D/N [{}, {}] must be positive and ordered "
                                            "(min <= max)", g.n_min, g.n_max, g.ratio_min, g.ratio_max));
  if (g.n_steps < 1 || g.ratio_steps < 1 || g.n_steps > 1000 || g.ratio_steps > 1000)
    throw std::invalid_argument("map grid steps must be between 1 and 1000 per axis");
  OptimalityMap m{g, law, fp4_eff, eff_source, sp, {}};
  for (int r = 0; r < g.ratio_steps; ++r)
    for (int i = 0; i < g.n_steps; ++i) {
      MapCell c;
      c.n = log_step(g.n_min, g.n_max, g.n_steps, i);
      c.tokens_per_param = log_step(g.ratio_min, g.ratio_max, g.ratio_steps, r);
      const Plan p = plan_precision(law, fp4_eff, sp, c.n, c.n * c.tokens_per_param);
      for (int s = 0; s < 4; ++s) c.loss[s] = p.schemes[s].loss;
      c.best = p.best;
      m.cells.push_back(c);
    }
  return m;
}

std::string optimality_map_csv(const OptimalityMap& m) {
  std::string out = "n,tokens_per_param,d";
  for (const char* s : kSchemeNames) out += fmt::format(",loss_{}", s);
  out += ",best\n";
  for (const auto& c : m.cells) {
    out += fmt::format("{:.6g},{:.6g},{:.6g}", c.n, c.tokens_per_param, c.n * c.tokens_per_param);
    for (double l : c.loss) out += fmt::format(",{:.6f}", l);
    out += fmt::format(",{}\n", kSchemeNames[c.best]);
  }
  return out;
}

}  // namespace nibble::law

// Hand-written SVG of the optimality map: cells coloured by winner, log axes, and a legend that
// states the law, the FP4 efficiencies and the speedups it was drawn with. Self-contained on purpose
// (no fonts, scripts or links to fetch), so it opens offline and can be pasted into any report.
namespace nibble::law {
namespace {

constexpr std::array<const char*, 4> kColours = {"#4c78a8", "#f58518", "#54a24b", "#e45756"};
constexpr double kLeft = 90, kTop = 40, kPlotW = 620, kPlotH = 420, kLegendH = 190;


// Maps a value to [0, 1] on a log axis.
double log_frac(double v, double lo, double hi) {
  return hi > lo ? (std::log(v) - std::log(lo)) / (std::log(hi) - std::log(lo)) : 0.5;
}

}  // namespace

std::string optimality_map_svg(const OptimalityMap& m) {
  const MapGridSpec& g = m.grid;
  const double width = 1000, height = kTop + kPlotH + 60 + kLegendH;
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"22\" font-size=\"15\" font-weight=\"bold\">Compute-optimal forward:backward precision "
      "(lowest predicted loss at equal compute)</text>\n",
      width, height, kLeft);
  const double cw = kPlotW / g.n_steps, ch = kPlotH / g.ratio_steps;
  for (size_t k = 0; k < m.cells.size(); ++k) {
    const int i = static_cast<int>(k) % g.n_steps, r = static_cast<int>(k) / g.n_steps;
    const MapCell& c = m.cells[k];
    s += fmt::format(
        "<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\"><title>N={:.3g}, D/N={:.3g}: "
        "{} (loss {:.4f})</title></rect>\n",
        kLeft + i * cw, kTop + kPlotH - (r + 1) * ch, cw + 0.05, ch + 0.05, kColours[c.best], c.n,
        c.tokens_per_param, kSchemeNames[c.best], c.loss[c.best]);
  }
  s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"black\"/>\n", kLeft,
                   kTop, kPlotW, kPlotH);
  // Decade ticks on N, 1-2-5 ticks on D/N.
  for (double decade = std::pow(10, std::ceil(std::log10(g.n_min) - 1e-9)); decade <= g.n_max * (1 + 1e-9);
       decade *= 10) {
    const double x = kLeft + (g.n_steps == 1 ? 0.5 : log_frac(decade, g.n_min, g.n_max)) * kPlotW;
    s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"black\"/>"
                     "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">1e{4:.0f}</text>\n",
                     x, kTop + kPlotH, kTop + kPlotH + 5, kTop + kPlotH + 18, std::log10(decade));
  }
  for (double decade = 1; decade <= g.ratio_max * 10; decade *= 10)
    for (double mult : {1.0, 2.0, 5.0}) {
      const double v = decade * mult;
      if (v < g.ratio_min * (1 - 1e-9) || v > g.ratio_max * (1 + 1e-9)) continue;
      const double y = kTop + kPlotH - (g.ratio_steps == 1 ? 0.5 : log_frac(v, g.ratio_min, g.ratio_max)) * kPlotH;
      s += fmt::format("<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"black\"/>"
                       "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5:g}</text>\n",
                       kLeft - 5, y, kLeft, kLeft - 8, y + 4, v);
    }
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">N, non-embedding parameters "
                   "(inference budget)</text>\n",
                   kLeft + kPlotW / 2, kTop + kPlotH + 36);
  s += fmt::format("<text transform=\"translate(22,{}) rotate(-90)\" text-anchor=\"middle\">D/N, tokens per "
                   "parameter (training budget)</text>\n",
                   kTop + kPlotH / 2);
  double y = kTop + kPlotH + 62;
  double x = kLeft;
  for (int k = 0; k < 4; ++k) {
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"14\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">{}"
                     "</text>\n",
                     x, y - 11, kColours[k], x + 20, y, kSchemeNames[k]);
    x += 120;
  }
  const LawConstants& L = m.law;
  const std::string lines[] = {
      "forward:backward precision; FP8 is the baseline (efficiency 1, speedup 1)",
      fmt::format("L = (A/(N effN)^alpha + B/(D effD)^beta)^gamma + E, A={:.4g} alpha={:.4g} B={:.4g} "
                  "beta={:.4g} E={:.4g} gamma={:.4g}",
                  L.A, L.alpha, L.B, L.beta, L.E, L.gamma),
      "law: " + L.source,
      fmt::format("FP4 effN={:.3f} effD={:.3f} ({})", m.fp4_eff.eff_n, m.fp4_eff.eff_d, m.fp4_eff_source),
      fmt::format("FP4 speedup over FP8: forward {:.3f}x, backward {:.3f}x (training {:.3f}x)", m.speedups.fwd,
                  m.speedups.bwd, training_speedup(m.speedups.fwd, m.speedups.bwd)),
      "speedups: " + m.speedups.source,
      "scheme reaches L(N sp_fw, D sp_tr / sp_fw), sp_tr = 1/(1/(3 sp_fw) + 2/(3 sp_bw))",
  };
  for (const auto& line : lines) {
    y += 20;
    s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"11\">{}</text>\n", kLeft, y, io::escape_xml(line));
  }
  s += "</svg>\n";
  return s;
}

}  // namespace nibble::law
