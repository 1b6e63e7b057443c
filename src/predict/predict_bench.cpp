// The benchmark a named GPU would produce, from the performance model.
#include "nibble/results/aggregate.hpp"
#include "nibble/predict/operand_memory.hpp"
#include "nibble/predict.hpp"
#include "nibble/quant/layer_shape_rule.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>

namespace nibble::predict {

int quant_launches(std::string_view recipe, const std::string& pass, bench::Mode mode) {
  if (recipe == "bf16" || mode == bench::Mode::pre_quantized) return 0;
  if (mode == bench::Mode::per_gemm) return 2;  // both operands of every GEMM
  return pass == "fprop" ? 2 : pass == "dgrad" ? 1 : 0;  // step: X and W; dY; wgrad reuses them
}

MoeGroupTime grouped_moe_time(const workload::Gemm& g, const std::string& recipe, bench::Mode mode,
                              const Execution& exec, const GpuSpec& gpu, double efficiency, bool quantized) {
  MoeGroupTime t;
  int launches = 0;
  for (int64_t tokens : g.group_tokens) {
    if (tokens <= 0) continue;  // an expert without tokens runs nothing
    // The token dimension is M in fprop and dgrad, K in wgrad (docs/spec.md §5).
    const Shape s = g.pass == "wgrad" ? Shape{g.m, tokens, g.n, 1} : Shape{tokens, g.k, g.n, 1};
    t.gemm_ms += gemm_ms(s, exec, gpu, efficiency);
    ++launches;
    if (quantized) {
      t.quant_bytes += quant_bytes(recipe, g.pass, mode, s, gpu);
      t.weight_quant_bytes += weight_quant_bytes(recipe, g.pass, mode, s, gpu);
    }
  }
  // Issued back to back with no host work between them, the GEMMs overlap their launch costs: one is paid.
  if (launches > 1) t.gemm_ms -= (launches - 1) * kernel_launch_ms();
  return t;
}

bench::BenchResult predict_bench(const workload::Workload& w, const std::vector<std::string>& recipes,
                                 const std::vector<bench::Mode>& modes, const std::string& gpu_name,
                                 const PredictOptions& options) {
  const auto gpus = load_gpu_database();
  const GpuSpec& gpu = find_gpu(gpus, gpu_name);
  if (recipes.empty()) throw std::invalid_argument("recipes: empty; give at least one (e.g. bf16)");
  if (modes.empty()) throw std::invalid_argument("modes: empty; give pre-quantized, step or per-gemm");
  for (const auto& r : recipes) execution_for(r, gpu);  // unknown names fail before any work
  Calibration calibration = options.calibration ? *options.calibration : calibration_for(gpu.name);
  // A Blackwell GPU without its own measurement: the efficiencies of the families public measurements cover come
  // from them, and every time gets their leave-one-out interval (predict::fit_public, predict.hpp).
  std::optional<PublicFit> public_fit;
  if (!options.calibration && gpu.compute_capability >= 100 && calibration.gpu != gpu.name) {
    public_fit = fit_public(load_public_data(), gpus, efficiency_of(calibration_for("H100 SXM"), "fp8-tensor"));
    for (const auto& [family, e] : public_fit->efficiency) calibration.efficiency[family] = e;
  }

  bench::BenchResult out;
  out.predicted = true;
  out.gpu.name = gpu.name;
  out.gpu.sm_count = gpu.sm_count;
  out.gpu.compute_capability = gpu.compute_capability;
  out.gpu.sm_clock_mhz = gpu.boost_clock_mhz;
  out.gpu.memory_bandwidth_gbs = gpu.memory_bandwidth_gbs;
  out.command_line = options.command_line;
  out.date = bench::utc_now_iso8601();
  out.model = workload::to_json(w);
  out.tokens = w.tokens;
  out.layers = w.layers;
  out.baseline_recipe = options.baseline_recipe;
  out.copy_bandwidth_gbs = gpu.copy_bandwidth_gbs();
  if (options.grad_accum < 1)
    throw std::invalid_argument(fmt::format("grad_accum: {} must be at least 1 (micro-batches per optimizer step)",
                                            options.grad_accum));
  out.grad_accum = options.grad_accum;
  out.notes.push_back(fmt::format("PREDICTED by nibble's performance model for {} ({}); calibration: {}",
                                  gpu.name, gpu.source, calibration.label));
  for (const auto& n : calibration.notes) out.notes.push_back("calibration: " + n);
  if (public_fit) {
    for (const auto& n : public_fit->notes) out.notes.push_back("calibration: " + n);
    out.interval.low = public_fit->low;
    out.interval.high = public_fit->high;
    out.interval.method = fmt::format(
        "x{:.2f} .. x{:.2f}: the extremes over {} public Blackwell measurements, each predicted from the others of its "
        "format (leave one out, docs/predict.md); families {}; bf16 keeps the Hopper efficiency, inside the same "
        "interval", public_fit->low, public_fit->high, public_fit->left_out_points,
        [&] {
          std::string f;
          for (const auto& [family, n] : public_fit->points_per_family)
            f += fmt::format("{}{} ({} points)", f.empty() ? "" : ", ", family, n);
          return f;
        }());
  }
  if (!calibration.gpu.empty() && calibration.gpu != gpu.name) {
    // Efficiencies and quantization fractions come from another GPU: say how far that carries.
    out.notes.push_back(fmt::format(
        "uncalibrated for {}: the GEMM efficiencies and quantization speeds were fitted on {}{}", gpu.name,
        calibration.gpu,
        gpu.compute_capability / 10 != 9 ? " (a Hopper GPU); this architecture's kernels and libraries may differ a lot"
                                         : ""));
  }

  for (bench::Mode mode : modes)
    for (const std::string& recipe : recipes)
      for (const workload::Gemm& g : w.gemms) {
        bench::Row row = bench::row_from_gemm(g, recipe, mode);
        // lm_head and attention GEMMs stay in bf16 in every recipe (docs/spec.md §3).
        const bool quantized = workload::is_block_linear(g.layer);
        const std::string run_as = quantized ? recipe : "bf16";
        Execution exec = execution_for(run_as, gpu);
        // Per-gemm mode runs Transformer Engine's settings, fast accumulation everywhere: the engine labels
        // Hopper's re-encoded MXFP4 GEMMs emulated-approximate then (the exact label needs split
        // accumulation), so the prediction says the same. Their time keeps the fp8-rowwise efficiency:
        // fast accumulation makes them 19% faster on an H100 but 6% on an H200 (docs/predict.md), too
        // unlike for one factor, and no calibration file holds per-gemm rows.
        if (mode == bench::Mode::per_gemm && exec.family == "fp8-rowwise")
          exec.path = std::string(bench::path::emulated_approximate);
        // A row the measurement would reject gets no time either: a layer the recipe's blocks do not
        // divide (the engine refuses it), or a BF16 GEMM whose K breaks 16-byte rows (the LM head with
        // an unpadded vocabulary: cuda::gemm refuses it).
        std::string e;
        if (quantized) {
          const bench::LinearShape l = bench::linear_shape(row);
          e = quant::layer_shape_error(run_as, g.layer, l.t, l.i, l.o);
        } else if (const std::string k_error = quant::bf16_gemm_k_error(g.k); !k_error.empty()) {
          e = fmt::format("{} {}: {}{}", g.layer, g.pass, k_error,
                          g.layer == "lm_head" ? "; K is the vocabulary here: pass --vocab with a multiple of 8, as "
                                                 "frameworks pad it (Megatron to a multiple of 128)"
                                               : "");
        }
        if (!e.empty()) {
          row.error = std::move(e);
          row.path = std::string(bench::path::predicted);
          row.predicted_path = exec.path;
          out.rows.push_back(std::move(row));
          continue;
        }
        const double quant_bandwidth = out.copy_bandwidth_gbs * 1e9 * calibration.quant_fraction(recipe);  // bytes/s
        const double eff = efficiency_of(calibration, exec.family);
        if (g.group_tokens.empty()) {
          const Shape shape{g.m, g.k, g.n, 1};
          const double ms = gemm_ms(shape, exec, gpu, eff);
          row.gemm = {ms, ms, ms, ms, ms, 0};
          row.quant_bytes = quantized ? quant_bytes(recipe, g.pass, mode, shape, gpu) : 0;
          row.weight_quant_bytes = quantized ? weight_quant_bytes(recipe, g.pass, mode, shape, gpu) : 0;
          row.quant_ms = row.quant_bytes / quant_bandwidth * 1e3;
          row.weight_quant_ms = row.weight_quant_bytes / quant_bandwidth * 1e3;
          // A routed expert launched on its own pays its quantizers' launches, which a grouped launch shares.
          if (g.role == "expert" && row.quant_bytes > 0) {
            row.quant_ms += quant_launches(recipe, g.pass, mode) * kernel_launch_ms();
            if (row.weight_quant_bytes > 0) row.weight_quant_ms += kernel_launch_ms();
          }
        } else {
          const MoeGroupTime t = grouped_moe_time(g, recipe, mode, exec, gpu, eff, quantized);
          row.gemm = {t.gemm_ms, t.gemm_ms, t.gemm_ms, t.gemm_ms, t.gemm_ms, 0};
          row.quant_bytes = t.quant_bytes;
          row.weight_quant_bytes = t.weight_quant_bytes;
          row.quant_ms = row.quant_bytes / quant_bandwidth * 1e3;
          row.weight_quant_ms = row.weight_quant_bytes / quant_bandwidth * 1e3;
          if (row.quant_bytes > 0) row.quant_ms += quant_launches(recipe, g.pass, mode) * kernel_launch_ms();
          if (row.weight_quant_bytes > 0) row.weight_quant_ms += kernel_launch_ms();
        }
        bench::amortise_weight_quant(row, out.grad_accum);
        row.path = std::string(bench::path::predicted);
        row.predicted_path = exec.path;
        bench::finish_row(row, exec.peak_tflops);
        out.rows.push_back(std::move(row));
      }
  bench::fill_bounds(out);
  // Blackwell's FP8 GEMMs take any layout: one per-tensor FP8 copy (quant_traffic.hpp counts the same).
  const bool fp8_tn_only = gpu.compute_capability < 100;
  for (const std::string& recipe : recipes) out.memory.push_back(recipe_memory(recipe, out.rows, fp8_tn_only));
  return out;
}

namespace {

// "qkv fprop 8192x4096x6144 x1" for a GEMM entry of a result's workload JSON.
std::string gemm_text(const nlohmann::json& g) {
  return fmt::format("{} {} {}x{}x{} x{}", g.value("layer", std::string("?")), g.value("pass", std::string("?")),
                     g.value("m", int64_t{0}), g.value("k", int64_t{0}), g.value("n", int64_t{0}),
                     g.value("count", int64_t{1}));
}

const nlohmann::json* gemm_list(const bench::BenchResult& r) {
  if (!r.model.is_object()) return nullptr;
  const auto it = r.model.find("gemms");
  return it != r.model.end() && it->is_array() ? &*it : nullptr;
}

}  // namespace

std::string workload_difference(const bench::BenchResult& a, const bench::BenchResult& b) {
  if (a.layers != b.layers) return fmt::format("{} blocks vs {}", a.layers, b.layers);
  if (a.tokens != b.tokens) return fmt::format("{} tokens per micro-batch vs {}", a.tokens, b.tokens);
  if (a.grad_accum != b.grad_accum)
    return fmt::format("{} micro-batches per optimizer step (--grad-accum) vs {}", a.grad_accum, b.grad_accum);
  const nlohmann::json* ma = a.model.is_object() && a.model.contains("moe") ? &a.model["moe"] : nullptr;
  const nlohmann::json* mb = b.model.is_object() && b.model.contains("moe") ? &b.model["moe"] : nullptr;
  if (ma != nullptr && mb != nullptr && ma->is_object() && mb->is_object()) {
    const std::string pa = ma->value("path", std::string()), pb = mb->value("path", std::string());
    if (!pa.empty() && !pb.empty() && pa != pb) return fmt::format("routed experts {} vs {} (--moe)", pa, pb);
    if (ma->contains("tokens") && mb->contains("tokens") && (*ma)["tokens"] != (*mb)["tokens"])
      return fmt::format("routed tokens per expert {} vs {} (--token-imbalance)", (*ma)["tokens"].dump(),
                         (*mb)["tokens"].dump());
  }
  const nlohmann::json* ga = gemm_list(a);
  const nlohmann::json* gb = gemm_list(b);
  if (ga == nullptr || gb == nullptr) return "";  // a file without a GEMM list: blocks and tokens are all there is
  const size_t n = std::min(ga->size(), gb->size());
  for (size_t i = 0; i < n; ++i) {
    const std::string x = gemm_text((*ga)[i]), y = gemm_text((*gb)[i]);
    if (x != y) return fmt::format("GEMM {} is {} vs {}", i + 1, x, y);
  }
  if (ga->size() != gb->size())
    return fmt::format("{} GEMMs vs {} (the first extra one: {})", ga->size(), gb->size(),
                       gemm_text(ga->size() > n ? (*ga)[n] : (*gb)[n]));
  return "";
}

std::vector<PredictionError> compare_prediction(const bench::BenchResult& predicted,
                                                const bench::BenchResult& measured) {
  if (const std::string d = workload_difference(predicted, measured); !d.empty())
    throw std::invalid_argument(fmt::format(
        "the prediction and the measurement are of different workloads ({}, prediction first); predict the "
        "measured workload: the same model, micro batch and sequence, --lm-head / --attention, MoE path and "
        "--token-imbalance, and --grad-accum",
        d));
  std::vector<PredictionError> out;
  const auto p = bench::summarize(predicted);
  const auto m = bench::summarize(measured);
  for (const auto& s : p)
    if (const auto* x = bench::find_summary(m, s.recipe, s.mode); x && x->failed_rows == 0 && x->layer_ms > 0)
      out.push_back({s.recipe, s.mode, s.layer_ms, x->layer_ms, s.layer_ms / x->layer_ms - 1});
  return out;
}

}  // namespace nibble::predict
