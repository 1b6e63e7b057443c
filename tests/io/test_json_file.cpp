// read_json_file: every way a JSON data file can be wrong gives a message naming the file, what it is
// and where it went wrong; a valid file parses to the document written. Documents and error
// positions are drawn fresh each run.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>

#include "nibble/io/json_file.hpp"
#include "temp_dir.hpp"
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
