// The default terminal output of a benchmark: one screen, the answer first (report::render_summary).
#include "nibble/results/aggregate.hpp"
#include "nibble/report.hpp"
#include "number_text.hpp"
#include "terminal_header.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace nibble::report {

using bench::BenchResult;
using bench::Mode;
using bench::RecipeSummary;

namespace {

// The autocast mode the summary reports: step (what a training step pays), else per-gemm; pre-quantized alone
// when no autocast mode ran.
Mode reported_mode(const BenchResult& r) {
  const auto modes = bench::modes_in(r);
  for (Mode m : {Mode::step, Mode::per_gemm, Mode::pre_quantized})
    if (std::find(modes.begin(), modes.end(), m) != modes.end()) return m;
  return Mode::pre_quantized;
}

std::string path_of(const RecipeSummary& s) {
  std::string p = s.path == bench::path::predicted ? s.predicted_path : s.path;
  if (s.mixed_paths) p += " (mixed)";
  return p;
}

// A speedup over bf16, with the interval a prediction's time interval [low, high] gives it: the recipe's time and
// bf16's may each be off by any factor in the interval, so the speedup lies in [s low/high, s high/low].
std::string speedup_cell(const RecipeSummary& s, const BenchResult& r) {
  if (s.failed_rows) return "FAILED";
  if (!r.interval.present() || !std::isfinite(s.speedup_vs_bf16)) return speedup_text(s.speedup_vs_bf16);
  const double v = s.speedup_vs_bf16;
  return speedup_interval_text(v, v * r.interval.low / r.interval.high, v * r.interval.high / r.interval.low);
}

// bf16's own time per block, the reference of every speedup.
std::string time_cell(const RecipeSummary& s) {
  if (s.failed_rows) return "FAILED";
  if (!std::isfinite(s.layer_ms_low) || !std::isfinite(s.layer_ms_high))
    return fmt::format("{:.{}f} ms", s.layer_ms, s.layer_ms >= 100 ? 1 : 2);
  const int d = decimals_for(s.layer_ms);
  return fmt::format("{:.{}f} ms [{:.{}f}, {:.{}f}]", s.layer_ms, d, s.layer_ms_low, d, s.layer_ms_high, d);
}

// What an emulated path means, for a reader who did not read docs/spec.md.
std::string emulation_meaning(const std::string& path) {
  if (path == bench::path::emulated_exact_bf16) return "decoded exactly to BF16, BF16 GEMMs";
  if (path == bench::path::emulated_exact_fp8) return "re-encoded exactly as FP8, FP8 GEMMs";
  return "an approximate emulation";
}

std::string table(const std::vector<RecipeSummary>& sums, const BenchResult& r, Mode mode) {
  const auto recipes = bench::recipes_in(r);
  const bool with_pre = mode != Mode::pre_quantized && std::any_of(sums.begin(), sums.end(), [](const auto& s) {
                          return s.mode == Mode::pre_quantized;
                        });
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"recipe", "path"});
  if (with_pre) rows.back().push_back("pre-quantized");
  rows.back().push_back(std::string(bench::to_string(mode)));
  rows.back().push_back(fmt::format("tokens/s ({})", bench::to_string(mode)));
  for (const auto& recipe : recipes) {
    const RecipeSummary* s = bench::find_summary(sums, recipe, mode);
    if (!s) continue;
    std::vector<std::string> row{recipe, path_of(*s)};
    for (Mode m : with_pre ? std::vector<Mode>{Mode::pre_quantized, mode} : std::vector<Mode>{mode}) {
      const RecipeSummary* x = bench::find_summary(sums, recipe, m);
      row.push_back(!x ? "-" : recipe == "bf16" ? time_cell(*x) : speedup_cell(*x, r));
    }
    row.push_back(s->failed_rows ? "-" : rate_text(s->tokens_per_s, s->tokens_per_s_low, s->tokens_per_s_high));
    rows.push_back(std::move(row));
  }
  std::vector<size_t> width(rows.front().size(), 0);
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  std::string out;
  for (const auto& row : rows) {
    std::string line = fmt::format("{:<{}}  {:<{}}", row[0], width[0], row[1], width[1]);
    for (size_t i = 2; i < row.size(); ++i) line += fmt::format("  {:>{}}", row[i], width[i]);
    out += line + "\n";
  }
  return out;
}

}  // namespace

std::vector<std::string> summary_findings(const BenchResult& r) {
  const auto sums = bench::summarize(r);
  const Mode mode = reported_mode(r);
  const std::string mode_name(bench::to_string(mode));
  std::vector<std::string> out;
  std::vector<const RecipeSummary*> ranked;
  for (const auto& s : sums)
    if (s.mode == mode && s.recipe != "bf16" && std::isfinite(s.speedup_vs_bf16)) ranked.push_back(&s);
  std::sort(ranked.begin(), ranked.end(),
            [](const auto* a, const auto* b) { return a->speedup_vs_bf16 > b->speedup_vs_bf16; });
  if (!ranked.empty()) {
    const RecipeSummary& best = *ranked.front();
    std::string line = fmt::format("fastest ({}): {}, {} over bf16", mode_name, best.recipe, speedup_cell(best, r));
    if (std::isfinite(best.forward_speedup_vs_bf16) && std::isfinite(best.backward_speedup_vs_bf16))
      line += fmt::format(" (forward {:.2f}x, backward {:.2f}x)", best.forward_speedup_vs_bf16,
                          best.backward_speedup_vs_bf16);
    if (ranked.size() > 1) {
      const RecipeSummary& next = *ranked[1];
      line += fmt::format("; next {} at {:.2f}x", next.recipe, next.speedup_vs_bf16);
      if (r.interval.present() && next.speedup_vs_bf16 >= best.speedup_vs_bf16 * r.interval.low / r.interval.high)
        line += ", inside its interval: the prediction does not order them";
      const double spread = bench::bf16_twin_spread(r);
      if (r.sweeps <= 1 && std::isfinite(spread) && best.speedup_vs_bf16 / next.speedup_vs_bf16 - 1 < spread)
        line += fmt::format(", closer than this run's timing variation ({:.1f}%): repeat with --repeat 3 before "
                            "choosing", 100 * spread);
    }
    out.push_back(line + ".");
  }
  // Where quantization eats the GEMM gain: the recipes that lose half or more of their pre-quantized gain in the
  // reported mode, and those it makes slower than bf16.
  if (mode != Mode::pre_quantized) {
    std::vector<std::string> eaten, slower, no_fast_gemm;
    for (const auto* s : ranked) {
      const RecipeSummary* pre = bench::find_summary(sums, s->recipe, Mode::pre_quantized);
      if (!pre || !std::isfinite(pre->speedup_vs_bf16)) continue;
      const std::string change = fmt::format("{} {:.2f}x -> {:.2f}x", s->recipe, pre->speedup_vs_bf16, s->speedup_vs_bf16);
      if (pre->speedup_vs_bf16 < 1) no_fast_gemm.push_back(change);
      else if (s->speedup_vs_bf16 < 1) slower.push_back(change);
      else if (pre->speedup_vs_bf16 > 1 && pre->speedup_vs_bf16 - s->speedup_vs_bf16 >= 0.5 * (pre->speedup_vs_bf16 - 1))
        eaten.push_back(change);
    }
    if (!slower.empty())
      out.push_back(fmt::format("slower than bf16 ({}): {}: their quantization costs more than their GEMMs save.",
                                mode_name, fmt::join(slower, ", ")));
    if (!no_fast_gemm.empty())
      out.push_back(fmt::format("slower than bf16 with the GEMMs alone: {}: this GPU has no fast GEMM for them.",
                                fmt::join(no_fast_gemm, ", ")));
    if (!eaten.empty())
      out.push_back(fmt::format("quantization eats half or more of the GEMM gain: {} (pre-quantized -> {}).",
                                fmt::join(eaten, ", "), mode_name));
  }
  // Emulated paths, grouped by path: their times are the emulation's, not the format's.
  std::map<std::string, std::vector<std::string>> emulated;
  for (const auto& s : sums) {
    const std::string p = s.path == bench::path::predicted ? s.predicted_path : s.path;
    if (s.recipe == "bf16" || s.mode != mode || p.empty() || p == bench::path::native) continue;
    emulated[p].push_back(s.recipe);
  }
  if (!emulated.empty()) {
    std::vector<std::string> groups;
    size_t recipes = 0;
    for (const auto& [p, names] : emulated) {
      groups.push_back(fmt::format("{} ({}: {})", fmt::join(names, ", "), p, emulation_meaning(p)));
      recipes += names.size();
    }
    out.push_back(fmt::format("no native GEMM here for {}: {} the emulation's, not the format's.",
                              fmt::join(groups, "; "), recipes == 1 ? "its time is" : "their times are"));
  }
  if (!r.predicted && bench::clocks_varied(r.clocks))
    out.push_back(fmt::format("the GPU's clocks moved during the run (SM clock {:.0f}-{:.0f} MHz, power-capped in "
                              "{:.0f}% of the samples): differences of a few percent are within its variation.",
                              r.clocks.sm_clock_mhz_min, r.clocks.sm_clock_mhz_max,
                              100.0 * r.clocks.power_capped_fraction));
  std::vector<std::string> failed;
  for (const auto& s : sums)
    if (s.failed_rows) failed.push_back(fmt::format("{} {} ({} GEMMs)", s.recipe, bench::to_string(s.mode), s.failed_rows));
  if (!failed.empty())  // first: whatever else the run says, these recipes have no result
    out.insert(out.begin(), fmt::format("FAILED: {}: no speedup shown; the errors are in --details.",
                                        fmt::join(failed, ", ")));
  if (out.size() > 5) out.resize(5);
  return out;
}

std::string render_summary(const BenchResult& r, std::string_view details_command) {
  const auto sums = bench::summarize(r);
  const Mode mode = reported_mode(r);
  std::string out = opening_banner(r);
  out += wrap_text(gpu_line(r), "", "  ");
  if (!r.predicted && !r.date.empty()) out += wrap_text(fmt::format("{}  {}", r.date, r.command_line), "", "  ");
  const std::string model = model_line(r);
  out += wrap_text(model.substr(0, model.find('\n')), "", "  ");
  std::string workload = fmt::format("T = {} tokens per micro-batch, {} blocks", r.tokens, r.layers);
  if (r.grad_accum > 1) workload += fmt::format(", weights quantized once per {} micro-batches", r.grad_accum);
  if (r.layer_plan.bf16_blocks() > 0)
    workload +=
        fmt::format(", {} blocks kept in BF16 ({})", r.layer_plan.bf16_blocks(), bench::to_string(r.layer_plan));
  out += wrap_text(workload, "", "  ");
  out += wrap_text(copy_bandwidth_line(r), "", "  ");
  if (!r.predicted && r.sweeps > 1) out += fmt::format("median of {} sweeps, recipe order rotated\n", r.sweeps);

  out += fmt::format("\n{}speedup over bf16 of one transformer block (bf16: its time)\n", r.predicted ? "PREDICTED " : "");
  out += table(sums, r, mode);
  std::string legend = fmt::format("(pre-quantized: the GEMMs alone; {}: {}; tokens/s: one micro-batch through all {} "
                                   "blocks, their linear layers only)",
                                   bench::to_string(mode),
                                   mode == Mode::per_gemm ? "every GEMM re-quantizing both operands, Transformer "
                                                            "Engine's way"
                                                          : "with the quantization a training step does",
                                   r.layers);
  if (mode == Mode::pre_quantized)
    legend = fmt::format("(pre-quantized: the GEMMs alone; tokens/s: one micro-batch through all {} blocks, their "
                         "linear layers only)",
                         r.layers);
  out += wrap_text(legend, "", " ");
  if (r.interval.present())
    out += wrap_text(fmt::format("(intervals: every time x{:.2f} .. x{:.2f}, from public Blackwell measurements; a "
                                 "speedup's interval lets the recipe and bf16 err at opposite ends: docs/predict.md)",
                                 r.interval.low, r.interval.high),
                     "", " ");
  const auto findings = summary_findings(r);
  if (!findings.empty()) {
    out += "\nwhat this means\n";
    for (const auto& f : findings) out += wrap_text(f, "  ", "    ");
  }
  const auto notes = grouped_notes(r);
  out += "\n";
  out += wrap_text(fmt::format("more: {} (per-GEMM tables, quantization overhead, memory{})",
                               details_command, notes.empty() ? "" : fmt::format(", {} notes", notes.size())),
                   "", "  ");
  if (r.predicted) out += fmt::format("!!! {}\n", predicted_banner(r));
  return out;
}

}  // namespace nibble::report
