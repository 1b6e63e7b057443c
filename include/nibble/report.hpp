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

// Everything, for `--details`: the resolved model and T; per mode and pass a table of
// GEMMs x recipes (ms and TFLOP/s); per-pass, per-layer and full-model totals; speedups over bf16
// and the baseline; quantization overhead; fprop versus dgrad; memory; the path per recipe; and
// interpretation lines. A predicted result opens and closes with a "PREDICTED" banner.
std::string render_terminal(const bench::BenchResult& result);

// The width every default terminal rendering fits (the wide tables are behind --details).
inline constexpr size_t kTerminalColumns = 100;

// The answer a user came for, in one screen (at most kTerminalColumns wide, about 40 lines): the GPU (the
// PREDICTED banner when predicted), the model, per recipe one row (its execution path, speedups over bf16
// pre-quantized and in the autocast mode, with the prediction interval when the result has one, and tokens/s),
// then the few interpretation lines that matter most (summary_findings). `details_command` is the command
// that prints everything (render_terminal), named in the last line.
std::string render_summary(const bench::BenchResult& result, std::string_view details_command);

// The summary's "what this means" lines, at most five, each a sentence to wrap: the fastest recipe in the
// autocast mode and its runner-up, the recipes whose quantization eats the GEMM gain or makes them slower than
// bf16, the emulated paths and what they mean, and for a measured run whether its clocks moved.
std::vector<std::string> summary_findings(const bench::BenchResult& result);

// `text` broken at spaces into lines of at most `width` columns: the first line starts with `first_indent`,
// the others with `indent`; every line ends in a newline. Text that fits on one line is kept as written; text
// that does not has its runs of spaces collapsed where it breaks.
std::string wrap_text(std::string_view text, std::string_view first_indent = "", std::string_view indent = "",
                      size_t width = kTerminalColumns);

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
// The outputs a command asked for (empty paths skipped), then "wrote bench.json, bench.html" on stderr.
void write_result_files(const bench::BenchResult& result, const std::string& json, const std::string& csv,
                        const std::string& html);
// "wrote <path>, <path>" on stderr for the non-empty paths (nothing when all are empty): every command that
// writes files says where, after writing them.
void say_written(const std::vector<std::string>& paths);

}  // namespace nibble::report
