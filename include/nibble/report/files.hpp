// Writing report files: atomically (a reader never sees half a file), and checked for writability
// before a long run starts, so a typo in --json does not cost a two-minute sweep.
#pragma once
#include "nibble/results/result.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace nibble::report {

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
