// JSON data files: read whole, parsed by nlohmann::json, every failure turned into a message that names
// the file, what it is, where it went wrong and what to do.
#include "nibble/io/json_file.hpp"

#include "nibble/io/printable.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace nibble::io {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void throw_open_error(OpenError kind, const std::string& message) {
  if (kind == OpenError::invalid_argument) throw std::invalid_argument(message);
  throw std::runtime_error(message);
}

bool json_whitespace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace

std::string json_error_detail(const nlohmann::json::exception& e) {
  std::string_view s = e.what();
  if (!s.empty() && s.front() == '[') {
    if (const size_t close = s.find("] "); close != std::string_view::npos) s.remove_prefix(close + 2);
  }
  if (s.starts_with("parse error")) {
    if (const size_t colon = s.find(": "); colon != std::string_view::npos) s.remove_prefix(colon + 2);
  }
  return printable(s);  // "last read: '...'" quotes the file's bytes
}

TextPosition text_position(std::string_view text, size_t offset) {
  const std::string_view before = text.substr(0, std::min(offset, text.size()));
  TextPosition p;
  p.line = 1 + static_cast<size_t>(std::count(before.begin(), before.end(), '\n'));
  const size_t last_newline = before.rfind('\n');
  p.column = 1 + (last_newline == std::string_view::npos ? before.size() : before.size() - last_newline - 1);
  return p;
}

nlohmann::json read_json_file(const std::string& path, std::string_view what, OpenError open_error) {
  const std::string named = std::string(what) + " '" + path + "'";
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status))
    throw_open_error(open_error, "cannot open the " + named + ": no such file; check the path");
  if (fs::is_directory(status))
    throw_open_error(open_error, "cannot open the " + named + ": it is a folder; give the path of the file itself");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw_open_error(open_error, "cannot open the " + named + ": " + std::strerror(errno) +
                                     "; check the file's permissions");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad())
    throw_open_error(open_error, "cannot read the " + named + ": " + std::strerror(errno) +
                                     "; check the file system");
  if (std::all_of(text.begin(), text.end(), json_whitespace))
    throw std::invalid_argument(named + " is empty, not valid JSON: write the file again (it holds no document)");
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte counts from 1; one past the text means the parser met the end of the file.
    const size_t offset = e.byte == 0 ? 0 : static_cast<size_t>(e.byte) - 1;
    const TextPosition at = text_position(text, offset);
    const std::string where =
        "line " + std::to_string(at.line) + ", column " + std::to_string(at.column) + " (byte " +
        std::to_string(e.byte) + ")";
    if (offset >= text.size())
      throw std::invalid_argument(named + " is not valid JSON: it ends early, at " + where + " (" + json_error_detail(e) +
                                  "); the file is truncated (was its write interrupted?): write it again");
    throw std::invalid_argument(named + " is not valid JSON at " + where + ": " + json_error_detail(e) +
                                "; correct the file there or write it again");
  } catch (const nlohmann::json::out_of_range& e) {
    // "1e999": valid JSON syntax, but past the range of a double, the type nlohmann reads numbers into.
    throw std::invalid_argument(named + " is not valid JSON for nibble: " + json_error_detail(e) +
                                " (a number past the range of a double, about 1.8e308); correct that number");
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(named + " is not valid JSON: " + json_error_detail(e) + "; correct the file or write it again");
  }
}

}  // namespace nibble::io
