// Atomic writes and the up-front writability check.
#include "results/handmade_result.hpp"
#include "nibble/report.hpp"
#include "test_seed.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace nibble::report {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir() {
  fs::path d = fs::temp_directory_path() / fmt::format("nibble_report_test_{}", std::random_device{}());
  fs::create_directories(d);
  return d;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(Files, AtomicWriteReplacesAndLeavesNoTemp) {
  const fs::path d = fresh_dir();
  const fs::path p = d / "out.json";
  std::ofstream(p) << "old poison content";
  std::mt19937_64 rng = nibble::testing::fresh_rng();
  auto r = bench::testing::handmade_result(rng);
  write_json(p.string(), r);
  auto back = bench::read_result_file(p.string());
  EXPECT_EQ(back.rows.size(), r.rows.size());
  write_csv((d / "out.csv").string(), r);
  write_html((d / "out.html").string(), r);
  EXPECT_EQ(slurp(d / "out.csv"), to_csv(r));
  size_t files = 0;
  for (auto& e : fs::directory_iterator(d)) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 3u);  // no temporaries left behind
  fs::remove_all(d);
}

TEST(Files, WritabilityCheckedUpFront) {
  const fs::path d = fresh_dir();
  EXPECT_NO_THROW(check_writable((d / "a.json").string()));
  EXPECT_FALSE(fs::exists(d / "a.json"));
  EXPECT_TRUE(fs::is_empty(d));
  try {
    check_writable((d / "missing" / "a.json").string());
    ADD_FAILURE();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
  }
  EXPECT_THROW(check_writable(d.string()), std::runtime_error);
  EXPECT_THROW(check_output_paths({(d / "x").string(), "", (d / "x").string()}), std::runtime_error);
  EXPECT_NO_THROW(check_output_paths({(d / "x.json").string(), "", (d / "x.csv").string()}));
  EXPECT_THROW(write_file_atomic((d / "no" / "x").string(), "abc"), std::runtime_error);
  fs::remove_all(d);
}

}  // namespace
}  // namespace nibble::report
