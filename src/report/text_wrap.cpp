// Text for a terminal: paragraphs broken at spaces to the default width (report::wrap_text).
#include "nibble/report.hpp"

#include <sstream>

namespace nibble::report {

std::string wrap_text(std::string_view text, std::string_view first_indent, std::string_view indent, size_t width) {
  // A line that fits stays as written (its column alignment, its double spaces).
  if (first_indent.size() + text.size() <= width && text.find('\n') == std::string_view::npos &&
      !text.empty() && text.find_first_not_of(' ') != std::string_view::npos)
    return std::string(first_indent) + std::string(text) + "\n";
  std::string out, line(first_indent);
  bool line_has_word = false;
  std::istringstream words{std::string(text)};
  for (std::string word; words >> word;) {
    if (line_has_word && line.size() + 1 + word.size() > width) {
      out += line + "\n";
      line = std::string(indent);
      line_has_word = false;
    }
    if (line_has_word) line += ' ';
    line += word;  // a word longer than the width stays whole on its own line
    line_has_word = true;
  }
  if (line_has_word) out += line + "\n";
  return out;
}

}  // namespace nibble::report
