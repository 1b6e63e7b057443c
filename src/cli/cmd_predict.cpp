// `nibble predict`: the performance model on its own: predict a GPU's benchmark, optionally
// recalibrated on a measured result, and report the prediction error against a measurement.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "command_registry.hpp"
#include "usage.hpp"
#include "nibble/quant/recipe_list.hpp"
#include "nibble/results/aggregate.hpp"
#include "nibble/predict.hpp"
#include "nibble/report.hpp"
#include "nibble/workload.hpp"

namespace {

using nibble::bench::Mode;

struct PredictArgs {
  nibble::workload::ModelCliOptions model;
  nibble::workload::WorkloadOptions workload;
  std::string gpu = "H200 SXM";
  std::vector<std::string> recipes;
  std::string baseline = "fp8-delayed";
  std::string calibrate_on, against, json, csv, html;
  std::string moe = "grouped";  // the routed experts' path, as `nibble bench --moe`
  bool list_gpus = false;
  bool details = false;  // every table instead of the one-screen summary
  const CLI::App* app = nullptr;  // to ask which options the command line gave
  bool given(const char* option) const { return app != nullptr && app->count(option) > 0; }
};

// The model and workload options of the prediction. With --against, what the command line leaves out comes
// from the measurement: its model (when no model option is given), LM head and attention GEMMs, MoE path and
// token imbalance, so that the prediction is of the workload that was measured.
struct PredictedWorkload {
  nibble::workload::ModelConfig model;
  nibble::workload::WorkloadOptions options;
  std::vector<std::string> taken;  // what came from the measurement, for a note
};

PredictedWorkload predicted_workload(const PredictArgs& a, const nibble::bench::BenchResult* measured) {
  namespace wl = nibble::workload;
  PredictedWorkload p;
  p.options = a.workload;
  p.options.moe_path = wl::moe_path_from_string(a.moe);
  if (measured == nullptr || !measured->model.is_object()) {
    p.model = wl::resolve_model(a.model);
    return p;
  }
  const nlohmann::json& m = measured->model;
  if (wl::any_model_option(a.model)) {
    p.model = wl::resolve_model(a.model);
  } else {
    if (!m.contains("model") || !m["model"].is_object())
      throw std::invalid_argument(fmt::format("--against {}: the file records no model to predict; give the model "
                                              "options it was measured with (--model, --hf-config, --mbs, --seq)",
                                              a.against));
    p.model = wl::model_from_json(m["model"], "--against " + a.against + " (its model)");
    p.taken.push_back("model " + p.model.name);
  }
  auto has_role = [&m](const char* role) {
    if (!m.contains("gemms") || !m["gemms"].is_array()) return false;
    for (const auto& g : m["gemms"])
      if (g.value("role", std::string()) == role) return true;
    return false;
  };
  if (!a.given("--lm-head") && has_role("lm_head")) {
    p.options.lm_head = true;
    p.taken.emplace_back("--lm-head");
  }
  if (!a.given("--attention") && has_role("attention")) {
    p.options.attention = true;
    p.taken.emplace_back("--attention");
  }
  if (m.contains("moe") && m["moe"].is_object()) {
    const auto& moe = m["moe"];
    if (!a.given("--moe") && moe.contains("path") && moe["path"].is_string()) {
      p.options.moe_path = wl::moe_path_from_string(moe["path"].get<std::string>());
      p.taken.push_back("--moe " + moe["path"].get<std::string>());
    }
    if (!a.given("--token-imbalance") && moe.contains("imbalance") && moe["imbalance"].is_number()) {
      p.options.token_imbalance = moe["imbalance"].get<double>();
      p.taken.push_back(fmt::format("--token-imbalance {:g}", p.options.token_imbalance));
    }
  }
  return p;
}

int run_predict(const PredictArgs& a) {
  namespace pr = nibble::predict;
  if (a.list_gpus) {
    for (const auto& g : pr::load_gpu_database()) {
      fmt::print("{:<10} {:>4} SMs  bf16 {:>6.0f}  fp8 {:>6.0f}  fp4 {:>6}  {:>5.0f} GB/s\n", g.name, g.sm_count,
                 g.bf16_tflops, g.fp8_tflops, g.fp4_tflops > 0 ? fmt::format("{:.0f}", g.fp4_tflops) : "-",
                 g.memory_bandwidth_gbs);
      if (a.details) fmt::print("{}", nibble::report::wrap_text("source: " + g.source, "  ", "  "));
    }
    if (!a.details) fmt::print("(dense TFLOP/s and memory bandwidth; each figure's source: --list-gpus --details)\n");
    return 0;
  }
  nibble::report::check_output_paths({a.json, a.csv, a.html});
  std::optional<nibble::bench::BenchResult> measured;
  if (!a.against.empty()) measured = nibble::bench::read_result_file(a.against);
  const PredictedWorkload pw = predicted_workload(a, measured ? &*measured : nullptr);
  const auto w = nibble::workload::derive_workload(pw.model, pw.options);
  const auto recipes = a.recipes.empty() ? nibble::quant::recipe_names() : a.recipes;
  pr::PredictOptions opt;
  opt.baseline_recipe = a.baseline;
  opt.command_line = nibble::cli::invocation();
  if (measured) opt.grad_accum = measured->grad_accum;  // as measured: predict has no --grad-accum of its own
  pr::Calibration calibration;
  if (!a.calibrate_on.empty()) {
    const auto calibration_run = nibble::bench::read_result_file(a.calibrate_on);
    const auto gpus = pr::load_gpu_database();
    calibration = pr::calibration_from_result(calibration_run, pr::find_gpu(gpus, calibration_run.gpu.name));
    opt.calibration = &calibration;
  }
  auto result = pr::predict_bench(w, recipes, {Mode::pre_quantized, Mode::step, Mode::per_gemm}, a.gpu, opt);
  if (!pw.taken.empty())
    result.notes.push_back(fmt::format("workload of {} (as measured): {}", a.against, fmt::join(pw.taken, ", ")));
  if (measured && measured->grad_accum != 1)
    result.notes.push_back(fmt::format("--grad-accum {} as in {}", measured->grad_accum, a.against));
  // Refuse before printing anything when the prediction cannot be compared with the measurement.
  const auto errors = measured ? pr::compare_prediction(result, *measured) : std::vector<pr::PredictionError>{};
  if (w.is_moe())
    result.notes.push_back(fmt::format("MoE routed tokens, {}; path: {}", nibble::workload::describe(w.expert_tokens),
                                       nibble::workload::to_string(w.moe_path)));
  fmt::print("{}", a.details ? nibble::report::render_terminal(result)
                             : nibble::report::render_summary(result, nibble::cli::invocation() + " --details"));
  if (measured) {
    fmt::print("\n{}", nibble::report::wrap_text(
                           fmt::format("prediction error against {} ({}):", a.against, measured->gpu.name), "", "  "));
    for (const auto& e : errors)
      fmt::print("  {:<13}{:<14} predicted {:>9.3f} ms  measured {:>9.3f} ms  {:+6.1f}%{}\n", e.recipe,
                 nibble::bench::to_string(e.mode), e.predicted_ms, e.measured_ms, 100 * e.relative_error,
                 std::fabs(e.relative_error) > 0.10 ? "  (outside 10%)" : "");
  }
  nibble::report::write_result_files(result, a.json, a.csv, a.html);
  return 0;
}

const bool registered = nibble::cli::register_command(
    {"predict", "Predict the benchmark of a named GPU from nibble's performance model",
     [](CLI::App& sub) {
       auto args = std::make_shared<PredictArgs>();
       args->app = &sub;
       nibble::workload::add_model_options(sub, args->model);
       nibble::workload::add_workload_options(sub, args->workload);
       sub.add_option("--gpu", args->gpu, "GPU name from data/gpus.json (see --list-gpus)")
           ->check(nibble::cli::gpu_check())
           ->capture_default_str();
       sub.add_option("--recipes", args->recipes, "recipes to predict (default: all)")
           ->delimiter(',')
           ->check(nibble::cli::recipe_check());
       sub.add_option("--baseline", args->baseline, "recipe the speedups are also compared against")
           ->check(nibble::cli::recipe_check())
           ->capture_default_str();
       sub.add_option("--calibrate-on", args->calibrate_on, "refit the model on a measured bench JSON first");
       sub.add_option("--against", args->against,
                      "a measured bench JSON: print the prediction error; what the command line leaves out of the "
                      "workload (model, --lm-head, --attention, --moe, --token-imbalance; --grad-accum always) is "
                      "taken from it, and a different workload is refused");
       sub.add_option("--moe", args->moe,
                      "MoE routed experts: grouped (one quantization launch per operand for all experts, their GEMMs "
                      "issued as one unit) or per-expert (separate launches per expert), as in `nibble bench --moe`; "
                      "with --against, the measured file's path unless given")
           ->check(CLI::IsMember({"grouped", "per-expert"}))
           ->capture_default_str();
       sub.add_option("--json", args->json, "write the predicted result as JSON");
       sub.add_option("--csv", args->csv, "write CSV");
       sub.add_option("--html", args->html, "write a self-contained HTML report");
       sub.add_flag("--list-gpus", args->list_gpus, "list the GPU database and exit");
       sub.add_flag("--details", args->details,
                    "print every table of the prediction (and each GPU's source with --list-gpus) instead of the "
                    "one-screen summary");
       return [args] { return run_predict(*args); };
     }});

}  // namespace
