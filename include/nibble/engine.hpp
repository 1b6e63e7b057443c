// Layer: engine. Measures a workload's GEMMs on the local GPU for every requested recipe and mode:
// the quantization kernels and cuBLASLt GEMMs a training step runs, timed with CUDA events.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "nibble/results/result.hpp"
#include "nibble/workload/gemm_list.hpp"

namespace nibble::engine {

struct EngineOptions {
  std::vector<std::string> recipes;
  std::vector<bench::Mode> modes;
  int warmup = 3;
  double warmup_ms = 0;  // per row, after the warm-up runs: see TimingOptions::warmup_ms
  int iters = 20;
  bool autotune = false;
  bool flush_l2 = true;
  // Also time each linear layer's passes back to back as one unit (bench::SequenceTiming).
  bool time_sequences = true;
  // per-gemm mode uses Transformer Engine's benchmark settings: E4M3 only, fast accumulation.
  bool te_settings_for_per_gemm = true;
  std::string baseline = "fp8-delayed";
  std::string command_line;
  // Micro-batches per optimizer step: the step mode times the weight quantization apart and counts it once
  // per grad_accum micro-batches (bench::amortise_weight_quant).
  int grad_accum = 1;
  // Called after each (layer, recipe) with a fraction done, for a progress bar.
  std::function<void(double, const std::string&)> progress;
};

// True when a CUDA device is present.
bool gpu_available();

// Measures; throws std::runtime_error when no GPU is present. Rows that fail (out of memory, a
// shape cuBLASLt rejects) carry their error and the run goes on.
bench::BenchResult run_bench(const workload::Workload& workload, const EngineOptions& options);

// `sweeps` whole runs of run_bench, sweep k with options.recipes rotated by k places (bench::sweep_order),
// merged by bench::merge_sweeps (medians per row, each sweep's per-layer result kept). The progress
// callback sees the fraction of all sweeps. sweeps = 1 is run_bench itself.
bench::BenchResult run_bench_sweeps(const workload::Workload& workload, const EngineOptions& options, int sweeps);

}  // namespace nibble::engine
