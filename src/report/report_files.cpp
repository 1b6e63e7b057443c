// Atomic writes and up-front writability checks.

#include "nibble/report.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>

#include <unistd.h>

namespace nibble::report {

namespace fs = std::filesystem;

namespace {

fs::path folder_of(const std::string& path) {
  fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

// A name next to `path` that no concurrent writer will pick.
fs::path temp_name_for(const std::string& path) {
  std::random_device rd;
  fs::path p(path);
  return folder_of(path) / fmt::format(".{}.tmp-{}-{:08x}", p.filename().string(), ::getpid(), rd());
}

}  // namespace

void check_writable(const std::string& path) {
  if (path.empty()) throw std::runtime_error("output path is empty: give a file name");
  std::error_code ec;
  if (fs::is_directory(path, ec))
    throw std::runtime_error(fmt::format("output '{}' is a directory: give a file name inside it", path));
  const fs::path folder = folder_of(path);
  if (!fs::is_directory(folder, ec))
    throw std::runtime_error(fmt::format(
        "cannot write '{}': folder '{}' does not exist (create it first)", path, folder.string()));
  if (fs::exists(path, ec) && ::access(path.c_str(), W_OK) != 0)
    throw std::runtime_error(fmt::format("cannot write '{}': {}", path, std::strerror(errno)));
  // Creating a file is the only reliable test (permissions, read-only mounts, ACLs).
  const fs::path probe = temp_name_for(path);
  std::FILE* f = std::fopen(probe.c_str(), "w");
  if (!f)
    throw std::runtime_error(fmt::format("cannot write '{}': folder '{}': {}", path, folder.string(),
                                         std::strerror(errno)));
  std::fclose(f);
  fs::remove(probe, ec);
}

void check_output_paths(const std::vector<std::string>& paths) {
  for (size_t i = 0; i < paths.size(); ++i) {
    if (paths[i].empty()) continue;
    for (size_t j = 0; j < i; ++j)
      if (!paths[j].empty() && fs::weakly_canonical(paths[j]) == fs::weakly_canonical(paths[i]))
        throw std::runtime_error(
            fmt::format("output '{}' is given twice: each output format needs its own file", paths[i]));
    check_writable(paths[i]);
  }
}

void write_file_atomic(const std::string& path, std::string_view content) {
  const fs::path tmp = temp_name_for(path);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      throw std::runtime_error(fmt::format("cannot write '{}': cannot create '{}': {}", path,
                                           tmp.string(), std::strerror(errno)));
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.flush();
    if (!out) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw std::runtime_error(fmt::format("writing '{}' failed (disk full?)", path));
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw std::runtime_error(fmt::format("cannot replace '{}': {}", path, ec.message()));
  }
}

void write_json(const std::string& path, const bench::BenchResult& result) {
  write_file_atomic(path, bench::to_json(result).dump(2) + "\n");
}

void write_csv(const std::string& path, const bench::BenchResult& result) {
  write_file_atomic(path, to_csv(result));
}

void write_html(const std::string& path, const bench::BenchResult& result) {
  write_file_atomic(path, to_html(result));
}

void say_written(const std::vector<std::string>& paths) {
  std::vector<std::string> written;
  for (const auto& p : paths)
    if (!p.empty()) written.push_back(p);
  if (!written.empty()) std::fprintf(stderr, "wrote %s\n", fmt::format("{}", fmt::join(written, ", ")).c_str());
}

void write_result_files(const bench::BenchResult& result, const std::string& json, const std::string& csv,
                        const std::string& html) {
  if (!json.empty()) write_json(json, result);
  if (!csv.empty()) write_csv(csv, result);
  if (!html.empty()) write_html(html, result);
  say_written({json, csv, html});
}

}  // namespace nibble::report
