// CSV reader for training runs; see include/nibble/law/fit.hpp.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "nibble/io/printable.hpp"
#include "nibble/law/fit.hpp"

namespace nibble::law {
namespace {

std::string trim(std::string s) {
  const auto not_space = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  return s;
}

// RFC-4180-ish: commas split fields, double quotes group them, "" inside quotes is a quote.
std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else if (c != '\r') {
      fields.back() += c;
    }
  }
  for (auto& f : fields) f = trim(f);
  return fields;
}

double parse_positive(const std::string& text, const char* column, int line, const std::string& origin) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size())
    throw std::invalid_argument(fmt::format("{} line {}: column '{}' value '{}' is not a number", origin,
                                            line, column, io::printable(text)));
  if (!(std::isfinite(v) && v > 0))
    throw std::invalid_argument(fmt::format("{} line {}: column '{}' = {} must be positive and finite "
                                            "(a run with no parameters, tokens or loss cannot be fitted)",
                                            origin, line, column, io::printable(text)));
  return v;
}

}  // namespace

std::vector<Run> parse_runs_csv(std::istream& in, const std::string& origin) {
  std::string line;
  int line_no = 0;
  std::vector<std::string> header;
  while (header.empty() && std::getline(in, line)) {
    ++line_no;
    const std::string t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    header = split_csv_line(t);
  }
  if (header.empty()) throw std::invalid_argument(fmt::format("{} is empty: expected a header line "
                                                              "'scheme,n,d,loss' and one row per run", origin));
  for (auto& h : header) std::transform(h.begin(), h.end(), h.begin(), ::tolower);
  auto column = [&](const char* name) -> int {
    auto it = std::find(header.begin(), header.end(), name);
    return it == header.end() ? -1 : static_cast<int>(it - header.begin());
  };
  const int c_scheme = column("scheme"), c_n = column("n"), c_d = column("d"), c_loss = column("loss");
  std::vector<std::string> missing;
  if (c_scheme < 0) missing.push_back("scheme");
  if (c_n < 0) missing.push_back("n");
  if (c_d < 0) missing.push_back("d");
  if (c_loss < 0) missing.push_back("loss");
  if (!missing.empty())
    throw std::invalid_argument(fmt::format(
        "{}: missing column(s) {} in header '{}': the CSV needs scheme, n (non-embedding parameters), "
        "d (tokens) and loss (final validation loss)",
        origin, fmt::join(missing, ", "), io::printable(fmt::format("{}", fmt::join(header, ",")))));

  std::vector<Run> runs;
  while (std::getline(in, line)) {
    ++line_no;
    const std::string t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    const auto fields = split_csv_line(t);
    if (fields.size() != header.size())
      throw std::invalid_argument(fmt::format("{} line {}: {} fields, but the header has {}", origin, line_no,
                                              fields.size(), header.size()));
    Run r;
    r.line = line_no;
    r.scheme = fields[c_scheme];
    if (r.scheme.empty())
      throw std::invalid_argument(fmt::format("{} line {}: empty scheme name", origin, line_no));
    r.n = parse_positive(fields[c_n], "n", line_no, origin);
    r.d = parse_positive(fields[c_d], "d", line_no, origin);
    r.loss = parse_positive(fields[c_loss], "loss", line_no, origin);
    for (size_t i = 0; i < header.size(); ++i) {
      const int c = static_cast<int>(i);
      if (c != c_scheme && c != c_n && c != c_d && c != c_loss) r.metadata[header[i]] = fields[i];
    }
    runs.push_back(std::move(r));
  }
  if (runs.empty()) throw std::invalid_argument(fmt::format("{} has a header but no runs", origin));
  return runs;
}

std::vector<Run> read_runs_csv(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status))
    throw std::invalid_argument(fmt::format("cannot open the runs CSV '{}': no such file; check the path", path));
  if (std::filesystem::is_directory(status))
    throw std::invalid_argument(fmt::format("cannot open the runs CSV '{}': it is a folder; give the CSV file", path));
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(fmt::format("cannot open the runs CSV '{}': {}", path, std::strerror(errno)));
  return parse_runs_csv(in, path);
}

}  // namespace nibble::law
