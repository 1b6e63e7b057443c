// `nibble bench`: measure (or, without a GPU, predict) every recipe's GEMMs of one training step.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <stdexcept>

#include "command_registry.hpp"
#include "usage.hpp"
#include "nibble/results/aggregate.hpp"
#include "nibble/results/result.hpp"
#include "nibble/predict.hpp"
#include "nibble/quant/recipe_list.hpp"
#include "nibble/report.hpp"
#include "nibble/workload.hpp"
#ifdef NIBBLE_WITH_ENGINE
#include "nibble/engine.hpp"
#endif

namespace {

using nibble::bench::Mode;

const std::vector<std::string> kAllRecipes = nibble::quant::recipe_names();

struct BenchArgs {
  nibble::workload::ModelCliOptions model;
  nibble::workload::WorkloadOptions workload;
  std::vector<std::string> recipes;
  bool pre_quantize_only = false;
  std::string mode = "step";
  bool no_fp8 = false, no_fp4 = false;
  std::string baseline;  // empty: fp8-delayed when benchmarked, else bf16, else the first recipe
  int iters = 20, warmup = 3;
  int repeat = 1;  // sweeps, the recipes rotated each time (results/sweeps.hpp)
  int grad_accum = 1;     // micro-batches per optimizer step
  std::string keep_bf16;  // layer plan: "first:K,last:L[,lm_head]"
  std::string moe = "grouped";  // grouped | per-expert | both
  double warmup_ms = 0;
  std::string json, csv, html, gpu;
  bool autotune = false;
  bool no_sequences = false;
  bool quiet = false;
  bool details = false;  // every table (report::render_terminal) instead of the one-screen summary
  std::string command_line;
};

bool is_fp8(const std::string& r) { return r.rfind("fp8", 0) == 0 || r == "mxfp8"; }
bool is_fp4(const std::string& r) { return r == "nvfp4" || r == "mxfp4" || r == "quartet"; }

std::vector<std::string> chosen_recipes(const BenchArgs& a) {
  std::vector<std::string> rs = a.recipes.empty() ? kAllRecipes : a.recipes;  // names checked by the parser
  std::vector<std::string> out;
  if (std::find(rs.begin(), rs.end(), "bf16") == rs.end()) out.push_back("bf16");  // speedups need it
  for (const auto& r : rs) {
    if ((a.no_fp8 && is_fp8(r)) || (a.no_fp4 && is_fp4(r))) continue;
    out.push_back(r);
  }
  return out;
}

std::vector<Mode> chosen_modes(const BenchArgs& a) {
  if (a.pre_quantize_only) return {Mode::pre_quantized};
  if (a.mode == "all") return {Mode::pre_quantized, Mode::step, Mode::per_gemm};
  return {Mode::pre_quantized, nibble::bench::mode_from_string(a.mode)};
}

#ifdef NIBBLE_WITH_ENGINE  // the progress bar is the measuring engine's (builds without CUDA only predict)
void progress_bar(double fraction, const std::string& what) {
  const int width = 30;
  const int filled = static_cast<int>(fraction * width + 0.5);
  std::fprintf(stderr, "\r[%s%s] %3d%% %-40s", std::string(filled, '#').c_str(),
               std::string(width - filled, '.').c_str(), static_cast<int>(fraction * 100 + 0.5), what.c_str());
  if (fraction >= 1.0) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}
#endif

// The routed experts' path the rows ran (several joined when they differ).
std::string moe_path_of(const nibble::bench::BenchResult& r) {
  std::vector<std::string> paths;
  for (const auto& row : r.rows)
    if (!row.moe_path.empty() && std::find(paths.begin(), paths.end(), row.moe_path) == paths.end())
      paths.push_back(row.moe_path);
  return fmt::format("{}", fmt::join(paths, " | "));
}

// Measured on the local GPU, or predicted (for --gpu, or without a GPU). `announce`: say so on stderr (once per
// command, though --moe both runs two workloads).
nibble::bench::BenchResult measure_or_predict(const BenchArgs& a, const nibble::workload::Workload& w,
                                              const std::vector<std::string>& recipes, const std::vector<Mode>& modes,
                                              const std::string& baseline, bool announce = true) {
  nibble::bench::BenchResult result;
  bool measured = false;
#ifdef NIBBLE_WITH_ENGINE
  if (a.gpu.empty() && nibble::engine::gpu_available()) {
    nibble::engine::EngineOptions opt;
    opt.recipes = recipes;
    opt.modes = modes;
    opt.iters = a.iters;
    opt.warmup = a.warmup;
    opt.warmup_ms = a.warmup_ms;
    opt.autotune = a.autotune;
    opt.time_sequences = !a.no_sequences;
    opt.baseline = baseline;
    opt.command_line = a.command_line;
    opt.grad_accum = a.grad_accum;
    if (!a.quiet) opt.progress = progress_bar;
    result = nibble::engine::run_bench_sweeps(w, opt, a.repeat);
    measured = true;
  }
#endif
  if (!measured) {
    const std::string gpu = a.gpu.empty() ? "H200 SXM" : a.gpu;
    if (a.gpu.empty() && announce) {
      std::fprintf(stderr, "%s",
                   nibble::report::wrap_text(fmt::format("nibble: no CUDA GPU found here: PREDICTING times for {} "
                                                         "from the performance model (use --gpu NAME to pick another "
                                                         "GPU)",
                                                         gpu),
                                             "", "  ")
                       .c_str());
    }
    if (a.repeat > 1 && announce)
      std::fprintf(stderr, "nibble: --repeat %d ignored: a prediction has no run-to-run variation to average\n", a.repeat);
    nibble::predict::PredictOptions popt;
    popt.grad_accum = a.grad_accum;
    result = nibble::predict::predict_bench(w, recipes, modes, gpu, popt);
    result.command_line = a.command_line;
    result.baseline_recipe = baseline;
  }
  return result;
}

int run_bench(const BenchArgs& a) {
  nibble::report::check_output_paths({a.json, a.csv, a.html});  // before the long run
  const auto model = nibble::workload::resolve_model(a.model);
  auto workload_options = a.workload;
  workload_options.moe_path = nibble::workload::moe_path_from_string(a.moe == "both" ? "grouped" : a.moe);
  const auto w = nibble::workload::derive_workload(model, workload_options);
  nibble::bench::LayerPlan plan;
  if (!a.keep_bf16.empty()) {
    try {
      plan = nibble::bench::parse_layer_plan(a.keep_bf16, w.layers);
    } catch (const std::invalid_argument& e) {
      throw nibble::cli::UsageError(e.what());
    }
  }
  const auto recipes = chosen_recipes(a);
  const auto modes = chosen_modes(a);
  const auto has = [&](const std::string& r) { return std::find(recipes.begin(), recipes.end(), r) != recipes.end(); };
  std::string baseline = a.baseline;
  if (baseline.empty()) baseline = has("fp8-delayed") ? "fp8-delayed" : has("bf16") ? "bf16" : recipes.front();
  if (!has(baseline)) {
    throw nibble::cli::UsageError(fmt::format("--baseline {} is not among the recipes benchmarked ({}); add it to --recipes or "
                                            "pick one of those", baseline,
                                            fmt::join(recipes, ", ")));
  }
  nibble::bench::BenchResult result;
  if (a.moe == "both" && !w.is_moe())
    throw nibble::cli::UsageError("--moe both: the model has no routed experts (a dense model); drop --moe or give "
                                "--experts");
  result = measure_or_predict(a, w, recipes, modes, baseline);
  if (w.is_moe()) {
    result.notes.push_back(fmt::format("MoE routed tokens, {}; path: {}", nibble::workload::describe(w.expert_tokens),
                                       moe_path_of(result)));
    if (a.moe == "both") {
      auto other_options = a.workload;
      other_options.moe_path = nibble::workload::MoePath::per_expert;
      const auto other = measure_or_predict(a, nibble::workload::derive_workload(model, other_options), recipes, modes,
                                            baseline, /*announce=*/false);
      result.moe_comparison = nibble::bench::compare_moe_paths(result, other);
      result.notes.push_back("--moe both: grouped / per-expert time of the routed experts of one block (per-expert: " +
                             moe_path_of(other) + "):");
      for (const auto& c : result.moe_comparison)
        result.notes.push_back(fmt::format("  {} {}: grouped {:.4f} ms, per-expert {:.4f} ms, ratio {:.3f}", c.recipe,
                                           nibble::bench::to_string(c.mode), c.grouped_ms, c.per_expert_ms, c.ratio));
    }
  }
  result.layer_plan = plan;
  if (a.grad_accum > 1)
    result.notes.push_back(fmt::format(
        "--grad-accum {0}: step-mode weight quantization (W and its transposed copy, in fprop) is counted once per {0} "
        "micro-batches, as frameworks cache quantized weights over an optimizer step; activations and gradients "
        "are quantized every micro-batch. Times are per micro-batch; the per-gemm mode re-quantizes every GEMM's "
        "operands by definition and is not amortised", a.grad_accum));
  if (plan.bf16_blocks() > 0)
    result.notes.push_back(fmt::format(
        "--keep-bf16 {}: blocks 1..{} and {}..{} of {} run BF16 whatever the recipe; model and tokens/s sum the "
        "blocks with each block's plan (the per-layer columns are one block under the recipe)",
        nibble::bench::to_string(plan), plan.bf16_first, w.layers - plan.bf16_last + 1, w.layers, w.layers));
  if (plan.bf16_lm_head)
    result.notes.push_back("--keep-bf16 lm_head: the LM head runs BF16 in every recipe already (docs/spec.md §3)");
  const std::string table = a.details ? nibble::report::render_terminal(result)
                                      : nibble::report::render_summary(result, a.command_line + " --details");
  std::fwrite(table.data(), 1, table.size(), stdout);
  nibble::report::write_result_files(result, a.json, a.csv, a.html);
  return 0;
}

std::function<int()> setup_bench(CLI::App& sub) {
  auto a = std::make_shared<BenchArgs>();
  nibble::workload::add_model_options(sub, a->model);
  nibble::workload::add_workload_options(sub, a->workload);
  sub.add_option("--recipes", a->recipes, "recipes to run (default: all): " + fmt::format("{}", fmt::join(kAllRecipes, ", ")))
      ->delimiter(',')
      ->check(nibble::cli::recipe_check());
  sub.add_flag("--pre-quantize", a->pre_quantize_only, "only the pre-quantized (GEMM-only) mode");
  sub.add_option("--mode", a->mode, "autocast attribution: step (step-faithful), per-gemm (Transformer Engine's), all")
      ->check(CLI::IsMember({"step", "per-gemm", "all"}))
      ->capture_default_str();
  sub.add_flag("--no-fp8", a->no_fp8, "skip the FP8 recipes");
  sub.add_flag("--no-fp4", a->no_fp4, "skip the FP4 recipes");
  sub.add_option("--baseline", a->baseline,
                 "recipe the speedups are also quoted against (default: fp8-delayed when benchmarked, else bf16)")
      ->check(nibble::cli::recipe_check());
  sub.add_option("--iters", a->iters, "timed runs per row")->check(CLI::Range(1, 100000))->capture_default_str();
  sub.add_option("--warmup", a->warmup, "warm-up runs per row")->check(CLI::Range(0, 100000))->capture_default_str();
  sub.add_option("--warmup-ms", a->warmup_ms,
                 "then keep running each row's own work for at least this many ms of GPU time before timing it, so "
                 "every row is timed at the clocks the GPU settles at under that work (0: off)")
      ->check(CLI::Range(0.0, 60000.0))
      ->capture_default_str();
  sub.add_option("--repeat", a->repeat,
                 "run the whole sweep this many times, the recipes in a rotated order each time, and report the "
                 "median of every row over the sweeps plus each sweep's per-layer times (on a power-capped GPU the "
                 "order recipes run in moves their times by several percent: docs/timing-noise.md)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  sub.add_option("--grad-accum", a->grad_accum,
                 "micro-batches per optimizer step: step-mode weight quantization is counted once per this many "
                 "micro-batches (frameworks cache quantized weights), activations and gradients every micro-batch")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  sub.add_option("--keep-bf16", a->keep_bf16,
                 "layer plan: keep the first K and last L transformer blocks in BF16 whatever the recipe, e.g. "
                 "first:2,last:2 (lm_head accepted: the LM head is BF16 in every recipe already)");
  sub.add_option("--moe", a->moe,
                 "MoE routed experts: grouped (all experts' work as one unit: predicted with one quantization launch "
                 "per operand; measured with per-expert launches issued back to back in one stream sequence, labelled "
                 "so), per-expert (separate launches per expert), or both (the grouped result plus the grouped / "
                 "per-expert ratio)")
      ->check(CLI::IsMember({"grouped", "per-expert", "both"}))
      ->capture_default_str();
  sub.add_option("--json", a->json, "write the full result as JSON");
  sub.add_option("--csv", a->csv, "write one row per (GEMM, recipe, mode) as CSV");
  sub.add_option("--html", a->html, "write a self-contained HTML report");
  sub.add_option("--gpu", a->gpu, "predict for this GPU from the performance model instead of measuring (names: "
                                  "nibble predict --list-gpus)")
      ->check(nibble::cli::gpu_check());
  sub.add_flag("--autotune", a->autotune, "time the top cuBLASLt heuristics per GEMM and keep the fastest");
  sub.add_flag("--no-sequences", a->no_sequences,
               "skip timing each linear layer's passes back to back as one unit (the rows, timed piece by piece, "
               "still run)");
  sub.add_flag("--quiet", a->quiet, "no progress bar");
  sub.add_flag("--details", a->details,
               "print every table (per-GEMM times per pass, per-layer sums, per model, quantization overhead, "
               "fprop vs dgrad, memory, notes) instead of the one-screen summary");
  return [a] {
    a->command_line = nibble::cli::invocation();
    return run_bench(*a);
  };
}

const bool registered = nibble::cli::register_command(
    {"bench", "benchmark (or predict) every recipe's GEMMs of one training step of a model", setup_bench});

}  // namespace
