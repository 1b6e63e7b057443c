// FP4-over-FP8 speedups read from a `nibble bench` JSON (docs/bench-output.md). Kept in one small file
// so it is easy to adapt when the bench JSON evolves. Read: top-level `gemms` rows {layer, pass,
// recipe, mode, count, per_model, total_ms, error} and `summary` entries {recipe, mode, path}. A row
// costs total_ms x count (total_ms = gemm_ms + the quantization its mode attributes to it); rows run
// once per model (per_model: the LM head) are left out, as in the summary's layer_ms. Forward speedup
// = (FP8 fprop sum) / (FP4 fprop sum); backward = (FP8 dgrad + wgrad sum) / (FP4 dgrad + wgrad sum).
#pragma once
#include <nlohmann/json_fwd.hpp>

#include <string>

#include "nibble/law/planner.hpp"

namespace nibble::law {

struct BenchSpeedupOptions {
  std::string fp8_recipe;              // empty: fp8-current, else fp8-delayed
  std::string fp4_recipe = "quartet";
  std::string mode;                    // empty: step, else per-gemm, else pre-quantized
};

struct BenchSpeedups {
  Speedups speedups;  // source names the file, GPU, mode, recipes and their execution paths
  std::string fp8_recipe, fp4_recipe, mode, gpu;
  std::string fp8_path, fp4_path;  // execution path per recipe, from `summary` ("" when absent)
  bool predicted = false;          // the bench numbers came from the performance model
  double fp8_fprop_ms = 0, fp8_backward_ms = 0, fp4_fprop_ms = 0, fp4_backward_ms = 0;
};

// Throws std::invalid_argument naming what is missing: no `gemms`, a recipe or mode absent (with the
// ones present), a row without a time, or mismatched GEMM sets between the two recipes.
BenchSpeedups speedups_from_bench_json(const nlohmann::json& bench, const BenchSpeedupOptions& options = {},
                                       const std::string& origin = "bench JSON");
BenchSpeedups read_bench_speedups(const std::string& path, const BenchSpeedupOptions& options = {});

// The workload a bench JSON timed, for the sources printed next to its speedups ("llama-3-8b, 8192 tokens";
// "" when the file does not say): speedups are those of that model's GEMMs, whatever N a plan asks about.
std::string bench_workload_text(const nlohmann::json& bench);

}  // namespace nibble::law
