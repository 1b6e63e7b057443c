// Files in and out. read_json_file: every way a JSON data file can be wrong gives a message naming the
// file, what it is and where it went wrong; a valid file parses to the document written. Documents and
// error positions are drawn fresh each run. Then the typed field reads (json_fields) of those files, and
// binary files: staged atomic writes and range-checked reads.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>

#include "nibble/io/binary_file.hpp"
#include "nibble/io/json_file.hpp"
#include "nibble/io/tensor.hpp"
#include "scratch_file.hpp"
#include "test_seed.hpp"

using nibble::io::OpenError;
using nibble::io::read_json_file;
using nibble::io::text_position;
using nibble::io::testing::TempDir;

namespace {

void write(const std::filesystem::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

// A random document of `lines` members, one per line, so positions in it are easy to state.
nlohmann::json random_document(std::mt19937_64& rng, int lines) {
  nlohmann::json j = nlohmann::json::object();
  for (int i = 0; i < lines; ++i) {
    std::string key = "k";
    key += std::to_string(i);
    switch (rng() % 3) {
      case 0: j[key] = static_cast<double>(rng() % 100000) / 7.0; break;
      case 1: j[key] = "text " + std::to_string(rng()); break;
      default: j[key] = nlohmann::json::array({rng() % 50, rng() % 2 == 0}); break;
    }
  }
  return j;
}

// The message of the exception `read` throws as type E; fails the test for any other outcome.
template <class E, class F>
std::string message_of(F&& read) {
  try {
    read();
    ADD_FAILURE() << "no exception";
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
  return {};
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST(JsonFile, ValidFileParsesToTheDocumentWritten) {
  auto rng = nibble::testing::fresh_rng();
  TempDir dir;
  const nlohmann::json doc = random_document(rng, 1 + static_cast<int>(rng() % 20));
  write(dir / "doc.json", doc.dump(static_cast<int>(rng() % 4)));
  EXPECT_EQ(read_json_file((dir / "doc.json").string(), "test document"), doc);
  // Surrounding whitespace and a top-level array are fine too.
  write(dir / "array.json", "\n  [1, 2.5, \"x\"]  \n");
  EXPECT_EQ(read_json_file((dir / "array.json").string(), "test document"), nlohmann::json::parse("[1, 2.5, \"x\"]"));
}

TEST(JsonFile, MissingFileNamesThePathWhatAndFix) {
  TempDir dir;
  const std::string path = (dir / "absent.json").string();
  std::string msg = message_of<std::runtime_error>([&] { (void)read_json_file(path, "GPU database"); });
  EXPECT_TRUE(has(msg, path)) << msg;
  EXPECT_TRUE(has(msg, "GPU database")) << msg;
  EXPECT_TRUE(has(msg, "check the path")) << msg;
  msg = message_of<std::invalid_argument>(
      [&] { (void)read_json_file(path, "fit JSON", OpenError::invalid_argument); });
  EXPECT_TRUE(has(msg, path) && has(msg, "fit JSON")) << msg;
  // A folder is not a file.
  msg = message_of<std::runtime_error>([&] { (void)read_json_file(dir.path().string(), "preset file"); });
  EXPECT_TRUE(has(msg, "folder") && has(msg, dir.path().string())) << msg;
}

TEST(JsonFile, UnreadableFileIsAnOpenError) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads files whatever their permissions";
  TempDir dir;
  const std::string path = (dir / "locked.json").string();
  write(path, "{}");
  ASSERT_EQ(::chmod(path.c_str(), 0), 0);
  const std::string msg = message_of<std::invalid_argument>(
      [&] { (void)read_json_file(path, "calibration file", OpenError::invalid_argument); });
  EXPECT_TRUE(has(msg, path) && has(msg, "permissions")) << msg;
}

TEST(JsonFile, EmptyOrBlankFileIsRefused) {
  auto rng = nibble::testing::fresh_rng();
  TempDir dir;
  const char blanks[] = {' ', '\n', '\t', '\r'};
  std::string blank;
  for (size_t i = rng() % 12; i > 0; --i) blank += blanks[rng() % 4];  // sometimes zero bytes
  write(dir / "blank.json", blank);
  const std::string path = (dir / "blank.json").string();
  const std::string msg = message_of<std::invalid_argument>([&] { (void)read_json_file(path, "result file"); });
  EXPECT_TRUE(has(msg, path) && has(msg, "result file") && has(msg, "empty")) << msg;
}

TEST(JsonFile, SyntaxErrorGivesLineAndColumn) {
  auto rng = nibble::testing::fresh_rng();
  TempDir dir;
  for (int trial = 0; trial < 8; ++trial) {
    const int lines = 2 + static_cast<int>(rng() % 30);
    const int bad = static_cast<int>(rng() % lines);
    std::string text = "{\n";
    size_t bad_line = 0, bad_column = 0;
    for (int i = 0; i < lines; ++i) {
      std::string line = std::string(1 + rng() % 6, ' ') + "\"k" + std::to_string(i) + "\": ";
      if (i == bad) {
        bad_line = 2 + static_cast<size_t>(i);  // line 1 is "{"
        bad_column = line.size() + 1;
        line += "@";  // no JSON value starts with '@'
      } else {
        line += std::to_string(rng() % 1000);
      }
      text += line + (i + 1 < lines ? ",\n" : "\n");
    }
    text += "}\n";
    const std::string path = (dir / "bad.json").string();
    write(path, text);
    SCOPED_TRACE(text);
    const std::string msg = message_of<std::invalid_argument>([&] { (void)read_json_file(path, "preset file"); });
    EXPECT_TRUE(has(msg, path) && has(msg, "preset file") && has(msg, "not valid JSON")) << msg;
    EXPECT_TRUE(has(msg, "line " + std::to_string(bad_line) + ", column " + std::to_string(bad_column))) << msg;
    EXPECT_FALSE(has(msg, "[json.exception")) << msg;
  }
}

TEST(JsonFile, TruncatedFileSaysItEndsEarly) {
  auto rng = nibble::testing::fresh_rng();
  TempDir dir;
  const std::string text = random_document(rng, 2 + static_cast<int>(rng() % 10)).dump(2);
  const std::string path = (dir / "cut.json").string();
  write(path, text.substr(0, 1 + rng() % (text.size() - 2)));  // keep at least "{", drop at least "}"
  const std::string msg = message_of<std::invalid_argument>([&] { (void)read_json_file(path, "bench JSON"); });
  EXPECT_TRUE(has(msg, path) && has(msg, "not valid JSON") && has(msg, "truncated")) << msg;
}

TEST(JsonFile, NumberPastDoubleNamesTheFile) {
  auto rng = nibble::testing::fresh_rng();
  TempDir dir;
  const std::string path = (dir / "huge.json").string();
  write(path, "{\"x\": " + std::to_string(1 + rng() % 9) + "e" + std::to_string(400 + rng() % 100000) + "}");
  const std::string msg = message_of<std::invalid_argument>([&] { (void)read_json_file(path, "fit JSON"); });
  EXPECT_TRUE(has(msg, path) && has(msg, "fit JSON") && has(msg, "double")) << msg;
}

TEST(JsonFile, TextPositionCountsLinesAndColumnsFromOne) {
  auto rng = nibble::testing::fresh_rng();
  std::string text;
  for (int i = 0; i < 200; ++i) text += rng() % 5 == 0 ? '\n' : static_cast<char>('a' + rng() % 26);
  size_t line = 1, column = 1;
  for (size_t offset = 0; offset <= text.size() + 2; ++offset) {
    const auto p = text_position(text, offset);
    ASSERT_EQ(p.line, line) << offset;
    ASSERT_EQ(p.column, column) << offset;
    if (offset < text.size()) {
      if (text[offset] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
  }
  EXPECT_EQ(text_position("", 0).line, 1u);
  EXPECT_EQ(text_position("", 0).column, 1u);
}

// Typed field reads: absent optional fields give the fallback, present ones of the wrong type (drawn at
// random) are refused naming "<where>.<key>", whole numbers outside their range or fractional are
// refused.
namespace fields = nibble::io::json_fields;

namespace {

// A value that is none of the types in `not_these` ("string", "number", "boolean").
nlohmann::json wrong_value(std::mt19937_64& rng, const std::string& not_these) {
  const nlohmann::json all[] = {nullptr,
                                nlohmann::json::array({1, 2}),
                                nlohmann::json::object({{"a", 1}}),
                                nlohmann::json("s" + std::to_string(rng() % 100)),
                                nlohmann::json(static_cast<double>(rng() % 977) / 3),
                                nlohmann::json(rng() % 2 == 0)};
  for (;;) {
    const nlohmann::json& v = all[rng() % std::size(all)];
    if (not_these.find(v.type_name()) == std::string::npos) return v;
  }
}

template <class F>
void expect_refusal_naming(const std::string& needle, F&& read) {
  try {
    read();
    ADD_FAILURE() << "accepted; expected a refusal naming " << needle;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(JsonFields, OptionalFieldsFallBackWhenAbsentAndRefuseTheWrongType) {
  auto rng = nibble::testing::fresh_rng();
  const std::string where = "file 'x.json': items[" + std::to_string(rng() % 9) + "]";
  const double number = static_cast<double>(rng() % 100000) / 8;
  const std::string text = "t" + std::to_string(rng());
  const nlohmann::json j = {{"n", number}, {"s", text}, {"b", true}, {"c", 1 + rng() % 1000}};
  EXPECT_EQ(fields::number_or(j, "n", -1, where), number);
  EXPECT_EQ(fields::number_or(j, "absent", -2.5, where), -2.5);
  EXPECT_EQ(fields::text_or(j, "s", "fallback", where), text);
  EXPECT_EQ(fields::text_or(j, "absent", "fallback", where), "fallback");
  EXPECT_TRUE(fields::flag_or(j, "b", false, where));
  EXPECT_TRUE(fields::flag_or(j, "absent", true, where));
  EXPECT_EQ(fields::count_or(j, "c", 7, where), j["c"].get<int64_t>());
  EXPECT_EQ(fields::count_or(j, "absent", 7, where), 7);
  EXPECT_EQ(fields::text(j, "s", where), text);
  EXPECT_EQ(fields::number(j, "n", where), number);
  for (int trial = 0; trial < 16; ++trial) {
    nlohmann::json bad = j;
    bad["n"] = wrong_value(rng, "number");
    bad["s"] = wrong_value(rng, "string");
    bad["b"] = wrong_value(rng, "boolean");
    SCOPED_TRACE(bad.dump());
    expect_refusal_naming(where + ".n", [&] { (void)fields::number_or(bad, "n", 0, where); });
    expect_refusal_naming(where + ".n", [&] { (void)fields::number(bad, "n", where); });
    expect_refusal_naming(where + ".s", [&] { (void)fields::text_or(bad, "s", "", where); });
    expect_refusal_naming(where + ".s", [&] { (void)fields::text(bad, "s", where); });
    expect_refusal_naming(where + ".b", [&] { (void)fields::flag_or(bad, "b", false, where); });
  }
  expect_refusal_naming(where + ".absent", [&] { (void)fields::text(j, "absent", where); });
  expect_refusal_naming(where + ".absent", [&] { (void)fields::number(j, "absent", where); });
}

TEST(JsonFields, WholeNumbersStayInRange) {
  auto rng = nibble::testing::fresh_rng();
  const int max = 2 + static_cast<int>(rng() % 5000);
  const int ok = 1 + static_cast<int>(rng() % static_cast<uint64_t>(max));
  EXPECT_EQ(fields::whole_number({{"k", ok}}, "k", max, "w"), ok);
  EXPECT_EQ(fields::whole_number({{"k", static_cast<double>(max)}}, "k", max, "w"), max);
  const double bad[] = {0.0, -1.0 - static_cast<double>(rng() % 50), static_cast<double>(max) + 1,
                        static_cast<double>(ok) + 0.5, std::ldexp(1.0, 31 + static_cast<int>(rng() % 900))};
  for (double v : bad) expect_refusal_naming("w.k", [&] { (void)fields::whole_number({{"k", v}}, "k", max, "w"); });
  expect_refusal_naming("w.k", [&] { (void)fields::whole_number({{"k", "12"}}, "k", max, "w"); });
  expect_refusal_naming("w.k", [&] { (void)fields::count_or({{"k", -3}}, "k", 1, "w"); });
}

TEST(JsonFields, RequireObjectNamesWhatItFound) {
  expect_refusal_naming("top: expected a JSON object, found array",
                        [] { fields::require_object(nlohmann::json::array(), "top"); });
  EXPECT_NO_THROW(fields::require_object(nlohmann::json::object(), "top"));
}

// Atomic output: nothing appears under the final name until commit, and an abandoned or failed write
// leaves no file at all; binary reads are range-checked before they allocate.
using namespace nibble::io;

TEST(StagedFile, CommitRenamesIntoPlace) {
  TempDir dir;
  const std::vector<uint8_t> bytes = {7, 1, 9, 200};
  StagedFile f(dir / "out.bin");
  f.write(bytes);
  EXPECT_FALSE(std::filesystem::exists(dir / "out.bin"));
  EXPECT_TRUE(std::filesystem::exists(f.temp_path()));
  EXPECT_NE(f.temp_path().string().find("out.bin.tmp-"), std::string::npos);
  f.commit();
  EXPECT_EQ(read_whole_file(dir / "out.bin"), bytes);
  EXPECT_EQ(dir.entries(), 1u);
}

TEST(StagedFile, AbandonedWriteLeavesNothing) {
  TempDir dir;
  {
    StagedFile f(dir / "out.bin");
    f.write(std::vector<uint8_t>{1, 2, 3});
  }
  EXPECT_EQ(dir.entries(), 0u);
}

TEST(StagedFile, MissingDirectoryFailsCleanly) {
  TempDir dir;
  EXPECT_THROW(write_file_atomic(dir / "no" / "such" / "dir.bin", std::vector<uint8_t>{1}), std::runtime_error);
  EXPECT_EQ(dir.entries(), 0u);
}

TEST(BinaryFile, RangeChecks) {
  TempDir dir;
  write_file_atomic(dir / "f.bin", std::vector<uint8_t>{1, 2, 3, 4, 5});
  EXPECT_EQ(read_file_range(dir / "f.bin", 1, 3), (std::vector<uint8_t>{2, 3, 4}));
  EXPECT_THROW(read_file_range(dir / "f.bin", 3, 3), std::runtime_error);
  EXPECT_THROW(read_file_range(dir / "f.bin", UINT64_MAX, 2), std::runtime_error);
  EXPECT_THROW(file_size_of(dir.path()), std::runtime_error);  // a directory is not a tensor file
}

// A sparse file holds twice this machine's memory without using the disk: reading it must be
// refused with the numbers before any allocation (an allocation of that size would fail or be
// killed), while small reads of the same file still work.
TEST(BinaryFile, RefusesReadsLargerThanTheMachineBeforeAllocating) {
  const uint64_t ram = host_memory_bytes();
  ASSERT_GT(ram, 0u);
  const uint64_t big = 2 * ram;
  TempDir dir;
  write_file_atomic(dir / "sparse.bin", std::vector<uint8_t>{5, 6, 7, 8});
  std::filesystem::resize_file(dir / "sparse.bin", big + 64);
  try {
    (void)read_file_range(dir / "sparse.bin", 64, big);
    FAIL() << "expected a refusal";
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(std::to_string(big) + " bytes"), std::string::npos) << m;
    EXPECT_NE(m.find("GiB of RAM"), std::string::npos) << m;
    EXPECT_NE(m.find("sparse.bin"), std::string::npos) << m;
  }
  EXPECT_EQ(read_file_range(dir / "sparse.bin", 0, 4), (std::vector<uint8_t>{5, 6, 7, 8}));
  EXPECT_NO_THROW(require_host_memory(ram, "all of it"));
  EXPECT_THROW(require_host_memory(ram + 1, "one byte more"), std::runtime_error);

  // The same through the .npy reader: a valid header whose data (float32, rounded up past 2x RAM)
  // is all present in the file.
  const uint64_t n = big / 4 + 1;
  nibble::io::testing::write_sparse_f32_npy(dir / "huge.npy", n);
  try {
    (void)read_npy(dir / "huge.npy");
    FAIL() << "expected a refusal";
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(std::to_string(4 * n) + " bytes"), std::string::npos) << m;
    EXPECT_NE(m.find("GiB of RAM"), std::string::npos) << m;
  }
}
