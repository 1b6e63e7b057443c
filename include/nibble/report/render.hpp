// Renderings of a benchmark result. All pure: a result in, text out (writing is files.hpp).
#pragma once
#include "nibble/results/result.hpp"

#include <string>

namespace nibble::report {

// Everything a user reads at a glance: the resolved model and T; per mode and pass a table of
// GEMMs x recipes (ms and TFLOP/s); per-pass, per-layer and full-model totals; speedups over bf16
// and the baseline; quantization overhead; fprop versus dgrad; memory; the path per recipe; and
// interpretation lines. A predicted result opens and closes with a "PREDICTED" banner.
std::string render_terminal(const bench::BenchResult& result);

// One row per (GEMM, recipe, mode), header = the JSON row field names plus gpu and predicted.
std::string to_csv(const bench::BenchResult& result);

// One self-contained HTML file: tables plus inline SVG charts (stacked per-layer time per recipe
// split by pass and quantization, speedups over bf16, TFLOP/s per shape). No external references.
std::string to_html(const bench::BenchResult& result);

// Two results side by side (two GPUs, two configs): per (recipe, mode) layer_ms of each, the
// ratio B/A and both speedups over bf16.
std::string render_comparison(const bench::BenchResult& a, const bench::BenchResult& b);

// The loud label of predicted numbers: "PREDICTED for <gpu> (no measurement)".
std::string predicted_banner(const bench::BenchResult& result);

}  // namespace nibble::report
