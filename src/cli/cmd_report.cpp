// `nibble report RESULT.json [--html FILE] [--csv FILE] [--compare OTHER.json]`: re-render a saved
// result, or put two side by side (two GPUs, two configs).
#include <fmt/format.h>

#include <string>

#include "command_registry.hpp"
#include "nibble/results/result.hpp"
#include "nibble/report.hpp"

namespace {

struct ReportArgs {
  std::string result, html, csv, compare;
  bool details = false;  // every table instead of the one-screen summary
};

int run_report(const ReportArgs& a) {
  nibble::report::check_output_paths({a.html, a.csv});
  const auto result = nibble::bench::read_result_file(a.result);
  if (!a.compare.empty()) {
    const auto other = nibble::bench::read_result_file(a.compare);
    fmt::print("{}", nibble::report::render_comparison(result, other));
  } else if (a.details) {
    fmt::print("{}", nibble::report::render_terminal(result));
  } else {
    fmt::print("{}", nibble::report::render_summary(result, "nibble report " + a.result + " --details"));
  }
  nibble::report::write_result_files(result, "", a.csv, a.html);
  return 0;
}

const bool registered = nibble::cli::register_command(
    {"report", "Re-render a `nibble bench --json` result, or compare two results",
     [](CLI::App& sub) {
       auto args = std::make_shared<ReportArgs>();
       sub.add_option("result", args->result, "RESULT.json written by nibble bench --json")->required();
       sub.add_option("--html", args->html, "write a self-contained HTML report");
       sub.add_option("--csv", args->csv, "write one CSV row per (GEMM, recipe, mode)");
       sub.add_option("--compare", args->compare, "a second result: per recipe layer_ms side by side");
       sub.add_flag("--details", args->details, "print every table of the result instead of the one-screen summary");
       return [args] { return run_report(*args); };
     }});

}  // namespace
