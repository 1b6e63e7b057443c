// Runs the built `nibble` binary with its output captured, inside a fresh working directory whose
// contents the tests inspect (a failed command must leave no output file behind).
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

namespace nibble::cli::testing {

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

class CliSandbox {
 public:
  CliSandbox() {
    const auto base = std::filesystem::temp_directory_path() /
                      ("nibble-cli-" + std::to_string(::getpid()) + "-" + std::to_string(std::random_device{}()));
    work_ = base / "work";
    logs_ = base / "logs";  // captured streams live outside work/, so work/ holds only real outputs
    std::filesystem::create_directories(work_);
    std::filesystem::create_directories(logs_);
    base_ = base;
  }
  ~CliSandbox() {
    std::error_code ec;
    std::filesystem::remove_all(base_, ec);
  }
  CliSandbox(const CliSandbox&) = delete;
  CliSandbox& operator=(const CliSandbox&) = delete;

  std::filesystem::path operator/(const std::string& name) const { return work_ / name; }
  std::string path(const std::string& name) const { return (work_ / name).string(); }

  CliResult run(const std::string& args) const {
    const auto out = logs_ / "stdout", err = logs_ / "stderr";
    const std::string cmd = std::string(NIBBLE_BINARY) + " " + args + " >" + out.string() + " 2>" + err.string();
    const int status = std::system(cmd.c_str());
    CliResult r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
  }

  // Names of everything in the work directory, sorted, space-separated.
  std::string listing() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(work_)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    std::string s;
    for (const auto& n : names) s += (s.empty() ? "" : " ") + n;
    return s;
  }

 private:
  static std::string slurp(const std::filesystem::path& p) {
    std::ifstream f(p);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  std::filesystem::path base_, work_, logs_;
};

}  // namespace nibble::cli::testing
