// `nibble shapes`: the exact GEMMs one training step of a model runs (docs/spec.md §5).
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>

#include "command_registry.hpp"
#include "nibble/report.hpp"
#include "nibble/workload.hpp"

namespace {

struct ShapesArgs {
  nibble::workload::ModelCliOptions model;
  nibble::workload::WorkloadOptions workload;
  std::string format = "table";
};

// The table's prose lines (the model and its source) wrapped to the terminal; the table rows fit already.
std::string fit_terminal(const std::string& table) {
  std::string out;
  size_t start = 0;
  while (start < table.size()) {
    size_t end = table.find('\n', start);
    if (end == std::string::npos) end = table.size();
    const std::string line = table.substr(start, end - start);
    out += line.size() > nibble::report::kTerminalColumns ? nibble::report::wrap_text(line, "", "  ") : line + "\n";
    start = end + 1;
  }
  return out;
}

std::function<int()> setup_shapes(CLI::App& sub) {
  auto args = std::make_shared<ShapesArgs>();
  nibble::workload::add_model_options(sub, args->model);
  nibble::workload::add_workload_options(sub, args->workload);
  sub.add_option("--format", args->format, "output format")
      ->check(CLI::IsMember({"table", "json", "csv"}))
      ->capture_default_str();
  return [args] {
    const auto model = nibble::workload::resolve_model(args->model);
    const auto w = nibble::workload::derive_workload(model, args->workload);
    std::string out;
    if (args->format == "json")
      out = nibble::workload::to_json(w).dump(2) + "\n";
    else if (args->format == "csv")
      out = nibble::workload::to_csv(w);
    else
      out = fit_terminal(nibble::workload::to_table(w));
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
  };
}

const bool registered = nibble::cli::register_command(
    {"shapes", "list the GEMMs (M x K x N per pass) of one training step of a model", setup_shapes});

}  // namespace
