// Training runs to fit the law on: one row per run, read from a CSV with a header and at least the
// columns scheme, n (non-embedding parameters), d (tokens) and loss (final validation loss). Other
// columns are kept as metadata so a fit report can show them next to each run's residual.
#pragma once
#include <istream>
#include <map>
#include <string>
#include <vector>

namespace nibble::law {

struct Run {
  std::string scheme;
  double n = 0, d = 0, loss = 0;
  std::map<std::string, std::string> metadata;  // every other column, by header name
  int line = 0;                                 // 1-based line in the CSV, for messages
};

// Parses CSV text (comma separated; fields may be double-quoted; '#' lines and blank lines are
// skipped). `origin` names the source in error messages. Throws std::invalid_argument on missing
// columns, unparsable or non-positive n/d/loss, or no data rows.
std::vector<Run> parse_runs_csv(std::istream& in, const std::string& origin = "runs CSV");
std::vector<Run> read_runs_csv(const std::string& path);

}  // namespace nibble::law
