// Layer: report. Renders a BenchResult (measured or predicted) as terminal tables, CSV and a
// self-contained HTML page, compares two results, and writes files atomically. The renderings are
// pure (a result in, text out); writing is at the end: atomically (a reader never sees half a file),
// and checked for writability before a long run starts, so a typo in --json does not cost a
// two-minute sweep.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "nibble/results/aggregate.hpp"
#include "nibble/results/result.hpp"

namespace nibble::report {

// Everything a user reads at a glance: the resolved model and T; per mode and pass a table of
// GEMMs x recipes (ms and TFLOP/s); per-pass, per-layer and full-model totals; speedups over bf16
// and the baseline; quantization overhead; fprop versus dgrad; memory; the path per recipe; and
// interpretation lines. A predicted result opens and closes with a "PREDICTED" banner.
std::string render_terminal(const bench::BenchResult& result);

// One row per (GEMM, recipe, mode), header = the JSON row field names plus gpu and predicted.
std::string to_csv(const bench::BenchResult& result);

// One self-contained HTML file (inline CSS and SVG, no script, no external reference): the speedup
// chart and a per-recipe summary above the fold, then what it means, the model and the run; the
// per-block and per-GEMM tables collapsed (docs/bench-output.md, "HTML").
std::string to_html(const bench::BenchResult& result);

// Two results side by side (two GPUs, two configs): per (recipe, mode) layer_ms of each, the
// ratio B/A and both speedups over bf16.
std::string render_comparison(const bench::BenchResult& a, const bench::BenchResult& b);

// The loud label of predicted numbers: "PREDICTED for <gpu> (no measurement)".
std::string predicted_banner(const bench::BenchResult& result);

// What a benchmark's numbers mean, in words: the lines the terminal table and the HTML report both show
// under "what this means" (the fastest recipe and its training speedup, recipes slower than BF16 or far
// from their bandwidth bound, emulated formats, sequences off their parts, recipes closer than the run's
// timing variation, failed rows). variation: bench::run_variation of the result (default: unknown). When
// the fastest two recipes of the fastest mode differ by less than its timing spread, a line says one run
// cannot order them; when the clocks moved (bench::clocks_varied), a line says how.
std::vector<std::string> interpretation_lines(const std::vector<bench::RecipeSummary>& sums,
                                              const bench::RunVariation& variation = {});

// The notes of a result as a reader sees them. The engine writes one path note per (recipe, layer),
// "<recipe> <layer>: <path>", and most layers of a recipe run the same path, so a 4-layer model's
// raw notes repeat each path four times (and a 32-expert MoE's 34 times). Renderings group the
// notes that differ only in the layer into one line, "<recipe> <layer>, <layer>, ...: <path>", in the
// order of first appearance; every other note passes unchanged. The JSON keeps the raw notes.
// A note is per-layer only when it starts with "<recipe> <layer>: " for a recipe and a layer that
// some row of `result` has.
std::vector<std::string> grouped_notes(const bench::BenchResult& result);

// Writing report files.

// Throws std::runtime_error naming the path and the reason when `path` cannot be written (missing
// folder, no permission, a directory of that name). Creates nothing that remains.
void check_writable(const std::string& path);
// check_writable on every non-empty path, and rejects the same path given twice.
void check_output_paths(const std::vector<std::string>& paths);

// Writes `content` to a temporary name in the same folder, then renames it over `path`.
void write_file_atomic(const std::string& path, std::string_view content);

void write_json(const std::string& path, const bench::BenchResult& result);
void write_csv(const std::string& path, const bench::BenchResult& result);
void write_html(const std::string& path, const bench::BenchResult& result);

}  // namespace nibble::report
