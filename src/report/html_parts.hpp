// The sections of the HTML report (html_report.cpp assembles them into one page). Every section takes
// the result and its summaries and returns HTML; none writes an empty field or an all-blank column.
#pragma once
#include "nibble/results/aggregate.hpp"
#include "nibble/results/result.hpp"

#include <string>
#include <vector>

namespace nibble::report::html {

using Summaries = std::vector<bench::RecipeSummary>;

// `text`, and on a predicted result " — PREDICTED for <gpu>": every chart title and table caption goes
// through it, so a predicted number says so wherever it is shown.
std::string predicted_title(const bench::BenchResult& r, const std::string& text);

// The mode whose time and throughput the summary quotes: step, else per-gemm, else pre-quantized.
bench::Mode main_mode(const bench::BenchResult& r);

// Above the fold (html_headline.cpp): speedup over bf16 per recipe and mode, with the prediction
// interval as whiskers when the result has one; and one row per recipe (speedups per mode, the main
// mode's time per block and tokens/s, the path).
std::string headline_chart(const bench::BenchResult& r, const Summaries& sums);
std::string summary_table(const bench::BenchResult& r, const Summaries& sums);

// The model and the run as small tables of known facts (html_run_facts.cpp), and the model's name
// ("model" when the result does not say).
std::string model_name(const bench::BenchResult& r);
std::string model_facts(const bench::BenchResult& r);
std::string run_facts(const bench::BenchResult& r);

// Collapsed detail (html_details.cpp): per (recipe, mode) sums with the time-per-pass chart; every GEMM
// with the TFLOP/s chart; memory; each sweep; the notes. Empty when the result has nothing for it.
std::string per_layer_details(const bench::BenchResult& r, const Summaries& sums);
std::string gemm_details(const bench::BenchResult& r);
std::string memory_details(const bench::BenchResult& r);
std::string sweep_details(const bench::BenchResult& r);
std::string notes_details(const bench::BenchResult& r);

}  // namespace nibble::report::html
