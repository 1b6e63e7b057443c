// Sums, speedups and overheads of benchmark rows (see aggregate.hpp for the definitions).
#include "nibble/results/aggregate.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

namespace nibble::bench {

namespace {

void add_to_pass(PassSums& sums, const std::string& pass, double ms) {
  if (pass == "fprop") sums.fprop_ms += ms;
  else if (pass == "dgrad") sums.dgrad_ms += ms;
  else sums.wgrad_ms += ms;
}

double ratio(double num, double den) {
  if (!(den > 0) || !std::isfinite(num) || !std::isfinite(den)) return kNaN;
  return num / den;
}

// bf16 does no quantization, so its time is the same in every mode; an engine may run it once.
const RecipeSummary* bf16_for(const std::vector<RecipeSummary>& all, Mode mode) {
  if (auto* s = find_summary(all, "bf16", mode)) return s;
  if (auto* s = find_summary(all, "bf16", Mode::pre_quantized)) return s;
  for (const auto& s : all)
    if (s.recipe == "bf16") return &s;
  return nullptr;
}

// sequence_layer_ms of (recipe, mode): NaN unless every block layer with rows has its sequence.
double sequence_sum(const BenchResult& result, const std::string& recipe, Mode mode) {
  std::set<std::tuple<std::string, int64_t, int64_t, int64_t>> layers;
  for (const Row& r : result.rows)
    if (r.recipe == recipe && r.mode == mode && !r.per_model) {
      const LinearShape l = linear_shape(r);
      layers.insert({r.layer, l.t, l.i, l.o});
    }
  if (layers.empty()) return kNaN;
  double sum = 0;
  for (const auto& key : layers) {
    // (No structured bindings here: clang 14, which builds the fuzz targets, cannot capture them.)
    auto it = std::find_if(result.sequences.begin(), result.sequences.end(), [&](const SequenceTiming& q) {
      return std::tie(q.layer, q.t, q.i, q.o) == key && q.recipe == recipe && q.mode == mode;
    });
    if (it == result.sequences.end() || !(it->timing.median_ms > 0)) return kNaN;
    sum += it->timing.median_ms * static_cast<double>(it->count);
  }
  return sum;
}

RecipeSummary sum_rows(const BenchResult& result, const std::string& recipe, Mode mode) {
  RecipeSummary s;
  s.recipe = recipe;
  s.mode = mode;
  std::map<std::string, double> flops_by_path;
  std::map<std::string, double> flops_by_predicted_path;
  double bound = 0;
  bool bound_complete = true;
  bool any_row = false;
  for (const Row& r : result.rows) {
    if (r.recipe != recipe || r.mode != mode) continue;
    if (!r.ok()) {
      ++s.failed_rows;
      continue;
    }
    any_row = true;
    const double c = static_cast<double>(r.count);
    flops_by_path[r.path] += r.flops * c;
    if (!r.predicted_path.empty()) flops_by_predicted_path[r.predicted_path] += r.flops * c;
    if (r.per_model) {
      s.once_per_model_ms += r.total_ms * c;
      continue;
    }
    add_to_pass(s.gemm, r.pass, r.gemm.median_ms * c);
    add_to_pass(s.quant, r.pass, r.quant_ms * c);
    s.weight_quant_ms += r.weight_quant_ms * c;
    s.quant_bytes += r.quant_bytes * c;
    add_to_pass(s.ms, r.pass, r.total_ms * c);
    s.layer_flops += r.flops * c;
    if (std::isfinite(r.bound_ms)) bound += r.bound_ms * c;
    else bound_complete = false;
  }
  auto dominant = [](const std::map<std::string, double>& m) {
    std::string best;
    double best_flops = -1;
    for (const auto& [p, f] : m)
      if (f > best_flops) best = p, best_flops = f;
    return best;
  };
  s.path = dominant(flops_by_path);
  s.predicted_path = dominant(flops_by_predicted_path);
  s.mixed_paths = flops_by_path.size() > 1 || flops_by_predicted_path.size() > 1;
  s.layer_ms = s.ms.total_ms();
  s.weight_quant_share_ms = s.weight_quant_ms / std::max(1, result.grad_accum);
  s.model_ms = s.layer_ms * static_cast<double>(result.layers) + s.once_per_model_ms;
  s.layer_tflops = s.layer_ms > 0 ? s.layer_flops / (s.layer_ms * 1e-3) / 1e12 : kNaN;
  s.bound_layer_ms = (any_row && bound_complete) ? bound : kNaN;
  s.sequence_layer_ms = s.failed_rows == 0 ? sequence_sum(result, recipe, mode) : kNaN;
  return s;
}

}  // namespace

std::vector<std::string> recipes_in(const BenchResult& result) {
  std::vector<std::string> out;
  for (const Row& r : result.rows)
    if (std::find(out.begin(), out.end(), r.recipe) == out.end()) out.push_back(r.recipe);
  auto bf16 = std::find(out.begin(), out.end(), "bf16");
  if (bf16 != out.end()) std::rotate(out.begin(), bf16, bf16 + 1);
  return out;
}

std::vector<Mode> modes_in(const BenchResult& result) {
  std::vector<Mode> out;
  for (Mode m : {Mode::pre_quantized, Mode::step, Mode::per_gemm})
    for (const Row& r : result.rows)
      if (r.mode == m) {
        out.push_back(m);
        break;
      }
  return out;
}

const RecipeSummary* find_summary(const std::vector<RecipeSummary>& summaries,
                                  std::string_view recipe, Mode mode) {
  for (const auto& s : summaries)
    if (s.recipe == recipe && s.mode == mode) return &s;
  return nullptr;
}

std::vector<RecipeSummary> summarize(const BenchResult& result) {
  std::vector<RecipeSummary> out;
  for (Mode mode : modes_in(result))
    for (const std::string& recipe : recipes_in(result)) {
      bool present = std::any_of(result.rows.begin(), result.rows.end(), [&](const Row& r) {
        return r.recipe == recipe && r.mode == mode;
      });
      if (present) out.push_back(sum_rows(result, recipe, mode));
    }
  for (RecipeSummary& s : out) {
    if (s.failed_rows > 0) continue;  // incomplete sums would overstate the speedup
    if (const RecipeSummary* b = bf16_for(out, s.mode); b && b->failed_rows == 0) {
      s.speedup_vs_bf16 = ratio(b->layer_ms, s.layer_ms);
      s.forward_speedup_vs_bf16 = ratio(b->ms.fprop_ms, s.ms.fprop_ms);
      s.backward_speedup_vs_bf16 = ratio(b->ms.backward_ms(), s.ms.backward_ms());
      s.sequence_speedup_vs_bf16 = ratio(b->sequence_layer_ms, s.sequence_layer_ms);
    }
    const RecipeSummary* base = result.baseline_recipe == "bf16"
                                    ? bf16_for(out, s.mode)
                                    : find_summary(out, result.baseline_recipe, s.mode);
    if (base && base->failed_rows == 0) s.speedup_vs_baseline = ratio(base->layer_ms, s.layer_ms);
    if (is_autocast(s.mode))
      if (const RecipeSummary* pre = find_summary(out, s.recipe, Mode::pre_quantized);
          pre && pre->failed_rows == 0)
        s.quant_overhead_ms = s.layer_ms - pre->layer_ms;
    if (s.quant.total_ms() > 0 && s.quant_bytes > 0 && result.copy_bandwidth_gbs > 0)
      s.quant_vs_copy = s.quant_bytes / (result.copy_bandwidth_gbs * 1e6) / s.quant.total_ms();  // GB/s x 1e6 = bytes/ms
  }
  // Model totals under the layer plan, once every layer_ms is known (the bf16 blocks take bf16's).
  const int64_t kept = std::min(result.layer_plan.bf16_blocks(), result.layers);
  for (RecipeSummary& s : out) {
    s.bf16_blocks = kept;
    const RecipeSummary* b = bf16_for(out, s.mode);
    const double kept_ms = kept == 0 ? 0.0 : b && b->failed_rows == 0 ? b->layer_ms * static_cast<double>(kept) : kNaN;
    s.blocks_ms = s.layer_ms * static_cast<double>(result.layers - kept) + kept_ms;
    s.model_ms = s.blocks_ms + s.once_per_model_ms;
    if (s.failed_rows == 0 && s.blocks_ms > 0 && result.tokens > 0)
      s.tokens_per_s = static_cast<double>(result.tokens) / (s.blocks_ms * 1e-3);
    else
      s.tokens_per_s = kNaN;
  }
  for (RecipeSummary& s : out) {
    if (s.failed_rows > 0) continue;
    if (const RecipeSummary* b = bf16_for(out, s.mode); b && b->failed_rows == 0)
      s.model_speedup_vs_bf16 = ratio(b->blocks_ms, s.blocks_ms);
    if (result.interval.present()) {
      s.layer_ms_low = s.layer_ms * result.interval.low;
      s.layer_ms_high = s.layer_ms * result.interval.high;
      s.model_ms_low = s.model_ms * result.interval.low;
      s.model_ms_high = s.model_ms * result.interval.high;
      s.tokens_per_s_low = s.tokens_per_s / result.interval.high;
      s.tokens_per_s_high = s.tokens_per_s / result.interval.low;
    }
  }
  return out;
}

double sequence_parts_ms(const BenchResult& result, const SequenceTiming& sequence) {
  double sum = 0;
  bool any = false;
  for (const Row& r : result.rows) {
    if (r.layer != sequence.layer || r.recipe != sequence.recipe || r.mode != sequence.mode ||
        !(linear_shape(r) == LinearShape{sequence.t, sequence.i, sequence.o}))
      continue;
    if (!r.ok()) return kNaN;
    sum += r.total_ms;
    any = true;
  }
  return any ? sum : kNaN;
}

std::vector<LinearLayerSum> per_linear_layer(const BenchResult& result) {
  std::vector<LinearLayerSum> out;
  for (const Row& r : result.rows) {
    if (!r.ok()) continue;
    auto it = std::find_if(out.begin(), out.end(), [&](const LinearLayerSum& l) {
      return l.layer == r.layer && l.shape == linear_shape(r) && l.recipe == r.recipe && l.mode == r.mode;
    });
    if (it == out.end()) {
      out.push_back({r.layer, r.recipe, r.mode, {}, linear_shape(r)});
      it = out.end() - 1;
    }
    add_to_pass(it->ms, r.pass, r.total_ms * static_cast<double>(r.count));
  }
  return out;
}

double bf16_twin_spread(const BenchResult& result) {
  std::map<std::tuple<std::string, std::string, int64_t, int64_t, int64_t>, double> pre;  // (layer, pass, m, k, n)
  for (const auto& r : result.rows)
    if (r.recipe == "bf16" && r.mode == Mode::pre_quantized && r.ok() && r.gemm.median_ms > 0)
      pre[{r.layer, r.pass, r.m, r.k, r.n}] = r.gemm.median_ms;
  double spread = kNaN;
  for (const auto& r : result.rows) {
    if (r.recipe != "bf16" || r.mode != Mode::step || !r.ok() || !(r.gemm.median_ms > 0)) continue;
    const auto it = pre.find({r.layer, r.pass, r.m, r.k, r.n});
    if (it == pre.end()) continue;
    const double d = std::fabs(r.gemm.median_ms / it->second - 1);
    spread = std::isnan(spread) ? d : std::max(spread, d);
  }
  return spread;
}

RunVariation run_variation(const BenchResult& result) {
  return {bf16_twin_spread(result), result.clocks, result.sweeps > 1 ? result.sweep_summaries : std::vector<SweepSummary>{}};
}

std::vector<Asymmetry> fprop_dgrad_asymmetry(const BenchResult& result) {
  std::vector<Asymmetry> out;
  for (const Row& f : result.rows) {
    if (!f.ok() || f.pass != "fprop") continue;
    for (const Row& d : result.rows) {
      if (!d.ok() || d.pass != "dgrad" || d.layer != f.layer || d.recipe != f.recipe ||
          d.mode != f.mode || !(linear_shape(d) == linear_shape(f)))
        continue;
      out.push_back({f.layer, f.recipe, f.mode, f.total_ms, d.total_ms, ratio(d.total_ms, f.total_ms), linear_shape(f)});
      break;
    }
  }
  return out;
}

double moe_expert_ms(const BenchResult& result, const std::string& recipe, Mode mode) {
  double sum = 0;
  bool any = false;
  for (const Row& r : result.rows) {
    if (r.moe_path.empty() || r.recipe != recipe || r.mode != mode) continue;
    if (!r.ok()) return kNaN;
    sum += r.total_ms * static_cast<double>(r.count);
    any = true;
  }
  return any ? sum : kNaN;
}

std::vector<MoeComparison> compare_moe_paths(const BenchResult& grouped, const BenchResult& per_expert) {
  std::vector<MoeComparison> out;
  for (Mode mode : modes_in(grouped))
    for (const std::string& recipe : recipes_in(grouped)) {
      MoeComparison c{recipe, mode, moe_expert_ms(grouped, recipe, mode), moe_expert_ms(per_expert, recipe, mode), kNaN};
      if (std::isnan(c.grouped_ms) && std::isnan(c.per_expert_ms)) continue;
      c.ratio = ratio(c.grouped_ms, c.per_expert_ms);
      out.push_back(c);
    }
  return out;
}

double training_speedup(double sp_fw, double sp_bw) {
  if (!(sp_fw > 0) || !(sp_bw > 0)) return kNaN;
  return 1.0 / (1.0 / (3.0 * sp_fw) + 2.0 / (3.0 * sp_bw));
}

}  // namespace nibble::bench
