// `nibble predict`: the performance model on its own: predict a GPU's benchmark, optionally
// recalibrated on a measured result, and report the prediction error against a measurement.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "command_registry.hpp"
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
};

// --against compares like with like only when both ran the routed experts the same way on the same tokens.
void warn_if_moe_differs(const nibble::workload::Workload& w, const nibble::bench::BenchResult& measured,
                         const std::string& file) {
  if (!w.is_moe() || !measured.model.is_object() || !measured.model.contains("moe")) return;
  const auto& m = measured.model["moe"];
  if (!m.is_object()) return;
  const std::string path = m.value("path", std::string());
  if (!path.empty() && path != nibble::workload::to_string(w.moe_path))
    fmt::print(stderr, "nibble: {} ran the routed experts {}, this prediction {}: pass --moe {} to compare like with "
               "like\n", file, path, nibble::workload::to_string(w.moe_path), path);
  if (m.contains("tokens") && m["tokens"].is_array() && m["tokens"] != nlohmann::json(w.expert_tokens.tokens))
    fmt::print(stderr, "nibble: {} spread its routed tokens differently ({}); give the same model, tokens and "
               "--token-imbalance\n", file, m.value("distribution", m["tokens"].dump()));
}

int run_predict(const PredictArgs& a) {
  namespace pr = nibble::predict;
  if (a.list_gpus) {
    for (const auto& g : pr::load_gpu_database())
      fmt::print("{:<10} {:>4} SMs  bf16 {:>6.0f}  fp8 {:>6.0f}  fp4 {:>6}  {:>5.0f} GB/s  ({})\n", g.name,
                 g.sm_count, g.bf16_tflops, g.fp8_tflops, g.fp4_tflops > 0 ? fmt::format("{:.0f}", g.fp4_tflops) : "-",
                 g.memory_bandwidth_gbs, g.source);
    return 0;
  }
  nibble::report::check_output_paths({a.json, a.csv, a.html});
  auto workload_options = a.workload;
  workload_options.moe_path = nibble::workload::moe_path_from_string(a.moe);
  const auto w = nibble::workload::derive_workload(nibble::workload::resolve_model(a.model), workload_options);
  const auto recipes = a.recipes.empty() ? nibble::quant::recipe_names() : a.recipes;
  pr::PredictOptions opt;
  opt.baseline_recipe = a.baseline;
  opt.command_line = nibble::cli::invocation();
  pr::Calibration calibration;
  if (!a.calibrate_on.empty()) {
    const auto measured = nibble::bench::read_result_file(a.calibrate_on);
    const auto gpus = pr::load_gpu_database();
    calibration = pr::calibration_from_result(measured, pr::find_gpu(gpus, measured.gpu.name));
    opt.calibration = &calibration;
  }
  auto result = pr::predict_bench(w, recipes, {Mode::pre_quantized, Mode::step, Mode::per_gemm}, a.gpu, opt);
  if (w.is_moe())
    result.notes.push_back(fmt::format("MoE routed tokens, {}; path: {}", nibble::workload::describe(w.expert_tokens),
                                       nibble::workload::to_string(w.moe_path)));
  fmt::print("{}", nibble::report::render_terminal(result));
  if (!a.against.empty()) {
    const auto measured = nibble::bench::read_result_file(a.against);
    fmt::print("\nprediction error against {} ({}):\n", a.against, measured.gpu.name);
    warn_if_moe_differs(w, measured, a.against);
    for (const auto& e : pr::compare_prediction(result, measured))
      fmt::print("  {:<13}{:<14} predicted {:>9.3f} ms  measured {:>9.3f} ms  {:+6.1f}%{}\n", e.recipe,
                 nibble::bench::to_string(e.mode), e.predicted_ms, e.measured_ms, 100 * e.relative_error,
                 std::fabs(e.relative_error) > 0.10 ? "  (outside 10%)" : "");
  }
  if (!a.json.empty()) nibble::report::write_json(a.json, result);
  if (!a.csv.empty()) nibble::report::write_csv(a.csv, result);
  if (!a.html.empty()) nibble::report::write_html(a.html, result);
  return 0;
}

const bool registered = nibble::cli::register_command(
    {"predict", "Predict the benchmark of a named GPU from nibble's performance model",
     [](CLI::App& sub) {
       auto args = std::make_shared<PredictArgs>();
       nibble::workload::add_model_options(sub, args->model);
       nibble::workload::add_workload_options(sub, args->workload);
       sub.add_option("--gpu", args->gpu, "GPU name from data/gpus.json (see --list-gpus)");
       sub.add_option("--recipes", args->recipes, "recipes to predict (default: all)")->delimiter(',');
       sub.add_option("--baseline", args->baseline, "recipe the speedups are also compared against");
       sub.add_option("--calibrate-on", args->calibrate_on, "refit the model on a measured bench JSON first");
       sub.add_option("--against", args->against, "a measured bench JSON: print the prediction error");
       sub.add_option("--moe", args->moe,
                      "MoE routed experts: grouped (one quantization launch per operand for all experts, their GEMMs "
                      "issued as one unit) or per-expert (separate launches per expert), as in `nibble bench --moe`")
           ->check(CLI::IsMember({"grouped", "per-expert"}))
           ->capture_default_str();
       sub.add_option("--json", args->json, "write the predicted result as JSON");
       sub.add_option("--csv", args->csv, "write CSV");
       sub.add_option("--html", args->html, "write a self-contained HTML report");
       sub.add_flag("--list-gpus", args->list_gpus, "list the GPU database and exit");
       return [args] { return run_predict(*args); };
     }});

}  // namespace
