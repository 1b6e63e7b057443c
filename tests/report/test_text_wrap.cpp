// report::wrap_text: paragraphs for a terminal of a given width.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "nibble/report.hpp"

namespace nibble::report {
namespace {

TEST(WrapText, BreaksAtSpacesWithinTheWidthKeepingEveryWord) {
  std::string text;
  for (int i = 0; i < 60; ++i) text += "word" + std::to_string(i) + (i % 7 ? " " : "  ");
  const std::string w = wrap_text(text, "  ", "    ", 40);
  std::istringstream lines(w);
  int n = 0;
  std::string joined;
  for (std::string line; std::getline(lines, line); ++n) {
    EXPECT_LE(line.size(), 40u) << line;
    EXPECT_EQ(line.rfind(n == 0 ? "  word0" : "    word", 0), 0u) << line;
    joined += line.substr(line.find_first_not_of(' ')) + " ";
  }
  EXPECT_GT(n, 5);
  std::string words;
  std::istringstream in(text);
  for (std::string word; in >> word;) words += word + " ";
  EXPECT_EQ(joined, words);
}

TEST(WrapText, LineThatFitsIsKeptAsWritten) {
  EXPECT_EQ(wrap_text("A: H200  T=1024", "", "  ", 20), "A: H200  T=1024\n");
  EXPECT_EQ(wrap_text("", "", "", 20), "");
  EXPECT_EQ(wrap_text("averyveryverylongword x", "", "", 10), "averyveryverylongword\nx\n");  // never cut a word
}

}  // namespace
}  // namespace nibble::report
