// What a benchmark's numbers mean, in words (interpretation_lines), and the path notes as a reader sees
// them (grouped_notes); both declared in include/nibble/report.hpp.
#include "nibble/report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

namespace nibble::report {

// What the numbers mean, in words: one sentence per line, no indentation (the renderers add it).
std::vector<std::string> interpretation_lines(const std::vector<bench::RecipeSummary>& sums,
                                              const bench::RunVariation& variation) {
  std::vector<std::string> out;
  const double timing_spread = variation.timing_spread;
  const bench::RecipeSummary* best = nullptr;
  for (const auto& s : sums)
    if (s.recipe != "bf16" && std::isfinite(s.speedup_vs_bf16) && bench::is_autocast(s.mode) &&
        (!best || s.speedup_vs_bf16 > best->speedup_vs_bf16))
      best = &s;
  if (!best)
    for (const auto& s : sums)
      if (s.recipe != "bf16" && std::isfinite(s.speedup_vs_bf16) && (!best || s.speedup_vs_bf16 > best->speedup_vs_bf16))
        best = &s;
  if (best) {
    out.push_back(fmt::format("fastest: {} ({}), GEMM speedup {:.2f}x over bf16: if your end-to-end speedup "
                       "is much lower, non-GEMM work is eating the gain.",
                       best->recipe, bench::to_string(best->mode), best->speedup_vs_bf16));
    if (std::isfinite(best->forward_speedup_vs_bf16) && std::isfinite(best->backward_speedup_vs_bf16))
      out.push_back(fmt::format("its forward speedup {:.2f}x and backward speedup {:.2f}x give a training "
                         "speedup of {:.2f}x on the GEMMs (docs/spec.md §7: 1/(1/(3 fw) + 2/(3 bw))).",
                         best->forward_speedup_vs_bf16, best->backward_speedup_vs_bf16,
                         bench::training_speedup(best->forward_speedup_vs_bf16, best->backward_speedup_vs_bf16)));
    // The runner-up in the same mode: is the order of the two within this run's own timing variation?
    const bench::RecipeSummary* next = nullptr;
    for (const auto& s : sums)
      if (&s != best && s.recipe != "bf16" && s.mode == best->mode && std::isfinite(s.speedup_vs_bf16) &&
          (!next || s.speedup_vs_bf16 > next->speedup_vs_bf16))
        next = &s;
    // Repeated sweeps answer it directly: in how many of them did the fastest lead?
    const bench::SweepSummary* sb = nullptr;
    const bench::SweepSummary* sn = nullptr;
    for (const auto& w : variation.sweeps) {
      if (w.mode == best->mode && w.recipe == best->recipe) sb = &w;
      if (next && w.mode == next->mode && w.recipe == next->recipe) sn = &w;
    }
    if (next && sb && sn && sb->speedup_vs_bf16.size() == sn->speedup_vs_bf16.size()) {
      int led = 0, n = 0;
      double lo = 1e300, hi = -1e300;
      for (size_t k = 0; k < sb->speedup_vs_bf16.size(); ++k) {
        const double a = sb->speedup_vs_bf16[k], b = sn->speedup_vs_bf16[k];
        if (!std::isfinite(a) || !std::isfinite(b) || !(b > 0)) continue;
        ++n;
        led += a > b;
        lo = std::min(lo, 100.0 * (a / b - 1));
        hi = std::max(hi, 100.0 * (a / b - 1));
      }
      if (n > 1 && led == n)
        out.push_back(fmt::format("{} was faster than {} ({}) in every one of the {} sweeps (by {:.1f}% to {:.1f}%): "
                                  "the order holds on this GPU.",
                                  best->recipe, next->recipe, bench::to_string(best->mode), n, lo, hi));
      else if (n > 1)
        out.push_back(fmt::format("{} and {} ({}) swapped places between sweeps ({} led in {} of {}; {:+.1f}% to "
                                  "{:+.1f}%): their difference is within this GPU's variation.",
                                  best->recipe, next->recipe, bench::to_string(best->mode), best->recipe, led, n, lo, hi));
    } else if (next && std::isfinite(timing_spread) &&
               best->speedup_vs_bf16 / next->speedup_vs_bf16 - 1 < timing_spread)
      out.push_back(fmt::format("{} and {} ({}) differ by {:.1f}%, less than this run's timing variation: the same "
                                "BF16 GEMMs, timed in the pre-quantized and the step rows, differ by up to {:.1f}%. "
                                "One run does not order them; repeat it (nibble bench --repeat 3) before choosing.",
                                best->recipe, next->recipe, bench::to_string(best->mode),
                                100.0 * (best->speedup_vs_bf16 / next->speedup_vs_bf16 - 1), 100.0 * timing_spread));
  }
  std::set<std::string> said_emulated;  // one line per recipe, not per mode
  for (const auto& s : sums) {
    if (s.recipe == "bf16") continue;
    if (std::isfinite(s.speedup_vs_bf16) && s.speedup_vs_bf16 < 1.0)
      out.push_back(fmt::format("{} ({}) is SLOWER than bf16 ({:.2f}x): {}", s.recipe, bench::to_string(s.mode),
                         s.speedup_vs_bf16,
                         bench::is_autocast(s.mode) ? "its quantization costs more than the GEMM saves"
                                                    : "this GPU has no fast path for it"));
    if (std::isfinite(s.bound_layer_ms) && bench::is_autocast(s.mode) && s.layer_ms > 1.05 * s.bound_layer_ms)
      out.push_back(fmt::format("{} ({}) is {:.0f}% above its copy-speed time: its quantization kernels "
                         "run below copy bandwidth.",
                         s.recipe, bench::to_string(s.mode), 100.0 * (s.layer_ms / s.bound_layer_ms - 1)));
    if (s.path != "native" && !(s.path == "predicted" && s.predicted_path == "native") &&
        said_emulated.insert(s.recipe).second)
      out.push_back(fmt::format("{} does not run natively here ({}): its time is an emulation's, not the "
                         "format's.", s.recipe, s.path == "predicted" ? s.predicted_path : s.path));
  }
  for (const auto& s : sums)
    if (std::isfinite(s.sequence_layer_ms) && std::fabs(s.sequence_layer_ms / s.layer_ms - 1) > 0.05)
      out.push_back(fmt::format("{} ({}) timed as one sequence per linear layer takes {:+.0f}% against its separately "
                         "timed parts: {}.",
                         s.recipe, bench::to_string(s.mode), 100.0 * (s.sequence_layer_ms / s.layer_ms - 1),
                         s.sequence_layer_ms > s.layer_ms
                             ? "the parts understate what a training step pays (clocks after the other work, launch "
                               "gaps); trust the sequence"
                             : "in a step the pieces help each other (operands still in L2, no idle gaps); the parts "
                               "overstate its cost"));
  if (bench::clocks_varied(variation.clocks)) {
    const bench::ClockRecord& c = variation.clocks;
    out.push_back(fmt::format("the GPU's clocks moved during this run (SM clock {:.0f}-{:.0f} MHz, at its power cap in "
                              "{:.0f}% of {} samples{}): rows timed at different moments ran at different clocks, so "
                              "differences of a few percent between rows are within this run's own variation "
                              "(docs/timing-noise.md).",
                              c.sm_clock_mhz_min, c.sm_clock_mhz_max, 100.0 * c.power_capped_fraction, c.samples,
                              c.thermal_fraction > 0 ? fmt::format(", thermally slowed in {:.0f}%", 100.0 * c.thermal_fraction)
                                                     : std::string()));
  }
  for (const auto& s : sums)
    if (s.failed_rows)
      out.push_back(fmt::format("{} ({}): {} GEMMs failed (see the rows); its sums leave them out and its "
                         "speedups are not shown.", s.recipe, bench::to_string(s.mode), s.failed_rows));
  return out;
}

}  // namespace nibble::report

// report::grouped_notes: per-layer path notes that repeat across layers, as one line each.
namespace nibble::report {
namespace {

struct Group {
  std::string recipe, text;  // text: what follows "<recipe> <layer>: "
  std::vector<std::string> layers;  // empty: a note that is not per-layer, kept as `text`
};

// The layer a note names after "<recipe> ", when "<recipe> <layer>: " opens it (the longest such layer).
const std::string* layer_of(const std::string& note, const std::string& recipe, const std::set<std::string>& layers) {
  const std::string* best = nullptr;
  for (const std::string& layer : layers) {
    const std::string head = recipe + " " + layer + ": ";
    if (note.size() > head.size() && note.compare(0, head.size(), head) == 0 &&
        (best == nullptr || layer.size() > best->size()))
      best = &layer;
  }
  return best;
}

}  // namespace

std::vector<std::string> grouped_notes(const bench::BenchResult& result) {
  std::set<std::string> recipes, layers;
  for (const bench::Row& r : result.rows) {
    recipes.insert(r.recipe);
    layers.insert(r.layer);
  }
  std::vector<Group> groups;
  for (const std::string& note : result.notes) {
    const std::string* recipe = nullptr;
    const std::string* layer = nullptr;
    for (const std::string& rc : recipes) {
      const std::string* l = layer_of(note, rc, layers);
      if (l != nullptr && (recipe == nullptr || rc.size() > recipe->size())) recipe = &rc, layer = l;
    }
    if (layer == nullptr) {
      groups.push_back({"", note, {}});
      continue;
    }
    const std::string text = note.substr(recipe->size() + 1 + layer->size() + 2);
    auto same = std::find_if(groups.begin(), groups.end(),
                             [&](const Group& g) { return !g.layers.empty() && g.recipe == *recipe && g.text == text; });
    if (same == groups.end()) {
      groups.push_back({*recipe, text, {*layer}});
    } else if (std::find(same->layers.begin(), same->layers.end(), *layer) == same->layers.end()) {
      same->layers.push_back(*layer);
    }
  }
  std::vector<std::string> out;
  out.reserve(groups.size());
  for (const Group& g : groups) {
    if (g.layers.empty()) {
      out.push_back(g.text);
      continue;
    }
    out.push_back(fmt::format("{} {}: {}", g.recipe, fmt::join(g.layers, ", "), g.text));
  }
  return out;
}

}  // namespace nibble::report
