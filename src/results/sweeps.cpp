// Merging repeated sweeps of one benchmark (see sweeps.hpp).
#include "nibble/results/sweeps.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <tuple>

#include "nibble/results/aggregate.hpp"

namespace nibble::bench {

namespace {

using RowKey = std::tuple<std::string, std::string, std::string, Mode, int64_t, int64_t, int64_t, bool>;
RowKey key_of(const Row& r) { return {r.layer, r.pass, r.recipe, r.mode, r.m, r.k, r.n, r.per_model}; }

using SequenceKey = std::tuple<std::string, int64_t, int64_t, int64_t, std::string, Mode, bool>;
SequenceKey key_of(const SequenceTiming& q) { return {q.layer, q.t, q.i, q.o, q.recipe, q.mode, q.per_model}; }

std::string row_name(const Row& r) {
  return fmt::format("{} {} {}x{}x{} {} {}", r.layer, r.pass, r.m, r.k, r.n, r.recipe, to_string(r.mode));
}

// The timings of one row (or sequence) over the sweeps, merged as sweeps.hpp says.
Timing merge_timings(const std::vector<Timing>& t) {
  std::vector<double> medians, p10, p90;
  Timing out;
  out.min_ms = t.front().min_ms;
  out.max_ms = t.front().max_ms;
  for (const Timing& x : t) {
    medians.push_back(x.median_ms);
    p10.push_back(x.p10_ms);
    p90.push_back(x.p90_ms);
    out.min_ms = std::min(out.min_ms, x.min_ms);
    out.max_ms = std::max(out.max_ms, x.max_ms);
    out.n_runs += x.n_runs;
  }
  out.median_ms = median(medians);
  out.p10_ms = median(p10);
  out.p90_ms = median(p90);
  return out;
}

ClockRecord merge_clocks(const std::vector<BenchResult>& sweeps) {
  ClockRecord out = sweeps.front().clocks;
  std::vector<double> medians;
  double capped = 0, thermal = 0;
  int samples = 0;
  bool first = true;
  for (const BenchResult& s : sweeps) {
    const ClockRecord& c = s.clocks;
    if (!c.available || c.samples <= 0) continue;
    if (first) {
      out = c;
      first = false;
    }
    out.sm_clock_mhz_min = std::min(out.sm_clock_mhz_min, c.sm_clock_mhz_min);
    out.sm_clock_mhz_max = std::max(out.sm_clock_mhz_max, c.sm_clock_mhz_max);
    out.power_w_max = std::max(out.power_w_max, c.power_w_max);
    medians.push_back(c.sm_clock_mhz_median);
    capped += c.power_capped_fraction * c.samples;
    thermal += c.thermal_fraction * c.samples;
    samples += c.samples;
  }
  if (samples == 0) return out;
  out.samples = samples;
  out.sm_clock_mhz_median = median(medians);
  out.power_capped_fraction = capped / samples;
  out.thermal_fraction = thermal / samples;
  return out;
}

}  // namespace

std::vector<std::string> sweep_order(const std::vector<std::string>& recipes, int sweep) {
  std::vector<std::string> out = recipes;
  if (!out.empty() && sweep > 0) std::rotate(out.begin(), out.begin() + sweep % out.size(), out.end());
  return out;
}

BenchResult merge_sweeps(const std::vector<BenchResult>& sweeps) {
  if (sweeps.empty()) throw std::invalid_argument("merge_sweeps: no sweeps to merge");
  if (sweeps.size() == 1) return sweeps.front();
  BenchResult out = sweeps.front();
  const size_t n = sweeps.size();

  // Rows are matched by what they measure; two rows measuring the same (say an MoE's routed and shared
  // experts at one shape) by their order among those rows, which every sweep derives alike.
  std::vector<std::map<RowKey, std::vector<const Row*>>> rows(n);
  for (size_t s = 0; s < n; ++s) {
    if (sweeps[s].rows.size() != out.rows.size() || sweeps[s].predicted != out.predicted)
      throw std::invalid_argument(fmt::format("merge_sweeps: sweep {} has {} rows, sweep 0 {}: not the same benchmark", s,
                                              sweeps[s].rows.size(), out.rows.size()));
    for (const Row& r : sweeps[s].rows) rows[s][key_of(r)].push_back(&r);
  }
  std::map<RowKey, size_t> seen;
  for (Row& row : out.rows) {
    const size_t occurrence = seen[key_of(row)]++;
    if (!row.ok()) continue;  // failed in sweep 0: keeps that error
    std::vector<Timing> gemm;
    std::vector<double> quant, weight_quant;
    for (size_t s = 0; s < n; ++s) {
      const auto it = rows[s].find(key_of(row));
      if (it == rows[s].end() || it->second.size() <= occurrence)
        throw std::invalid_argument(fmt::format("merge_sweeps: sweep {} has no row {}", s, row_name(row)));
      const Row& r = *it->second[occurrence];
      if (!r.ok()) {
        row.error = fmt::format("sweep {}: {}", s, r.error);
        break;
      }
      gemm.push_back(r.gemm);
      quant.push_back(r.quant_ms);
      weight_quant.push_back(r.weight_quant_ms);
    }
    if (!row.ok()) continue;
    // pct_of_peak is inversely proportional to the GEMM time (finish_row): sweep 0's, rescaled.
    const double first_median = row.gemm.median_ms, first_pct = row.pct_of_peak;
    row.gemm = merge_timings(gemm);
    row.quant_ms = median(quant);
    row.weight_quant_ms = median(weight_quant);
    finish_row(row, 0);  // total_ms and tflops by their one definition
    row.pct_of_peak = row.gemm.median_ms > 0 ? first_pct * first_median / row.gemm.median_ms : kNaN;
  }

  std::vector<std::map<SequenceKey, std::vector<const SequenceTiming*>>> seqs(n);
  for (size_t s = 0; s < n; ++s)
    for (const SequenceTiming& q : sweeps[s].sequences) seqs[s][key_of(q)].push_back(&q);
  std::map<SequenceKey, size_t> seen_sequences;
  for (SequenceTiming& q : out.sequences) {
    const size_t occurrence = seen_sequences[key_of(q)]++;
    std::vector<Timing> t;
    for (size_t s = 0; s < n; ++s) {
      const auto it = seqs[s].find(key_of(q));
      if (it == seqs[s].end() || it->second.size() <= occurrence)
        throw std::invalid_argument(
            fmt::format("merge_sweeps: sweep {} has no sequence {} {} {}", s, q.layer, q.recipe, to_string(q.mode)));
      t.push_back(it->second[occurrence]->timing);
    }
    q.timing = merge_timings(t);
  }

  for (MemoryUsage& m : out.memory)
    for (const BenchResult& s : sweeps)
      for (const MemoryUsage& o : s.memory)
        if (o.recipe == m.recipe) m.measured_bytes = std::max(m.measured_bytes, o.measured_bytes);

  std::vector<double> copy;
  for (const BenchResult& s : sweeps) copy.push_back(s.copy_bandwidth_gbs);
  out.copy_bandwidth_gbs = median(copy);
  out.clocks = merge_clocks(sweeps);
  out.sweeps = static_cast<int>(n);

  // Each sweep's per-layer summary, in the merged result's (recipe, mode) order.
  std::vector<std::vector<RecipeSummary>> per_sweep;
  for (const BenchResult& s : sweeps) per_sweep.push_back(summarize(s));
  out.sweep_summaries.clear();
  for (const RecipeSummary& m : summarize(out)) {
    SweepSummary ss{m.recipe, m.mode, {}, {}};
    for (const auto& p : per_sweep) {
      const RecipeSummary* x = find_summary(p, m.recipe, m.mode);
      ss.layer_ms.push_back(x ? x->layer_ms : kNaN);
      ss.speedup_vs_bf16.push_back(x ? x->speedup_vs_bf16 : kNaN);
    }
    out.sweep_summaries.push_back(std::move(ss));
  }
  if (out.copy_bandwidth_gbs > 0) fill_bounds(out);
  out.notes.push_back(fmt::format(
      "{} sweeps, the recipes in a rotated order in each (so every recipe ran at several positions of the sweep); "
      "each row is the median over the sweeps of its per-sweep median; each sweep's per-layer times are in "
      "sweep_summaries; copy bandwidth per sweep {:.0f} GB/s (the bounds use their median, {:.0f} GB/s; notes "
      "above this one are sweep 1's)",
      n, fmt::join(copy, ", "), out.copy_bandwidth_gbs));
  return out;
}

}  // namespace nibble::bench
