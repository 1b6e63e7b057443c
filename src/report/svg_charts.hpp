// Inline SVG charts for the HTML report. Drawn by hand (no library, no script, no network): a bar
// chart is rectangles and text, and that keeps the report one file that opens anywhere.
#pragma once
#include <limits>
#include <string>
#include <vector>

#include "nibble/io/xml_text.hpp"

namespace nibble::report::svg {

// The drawing's size in CSS pixels: the page shrinks it (never widens it) to fit its column.
struct Frame {
  int width = 900;
  int label_width = 260;  // left margin for the bar labels
};

struct Segment {
  std::string label;  // legend entry; segments with the same label share a colour
  double value = 0;
};

struct StackedBar {
  std::string label;
  std::vector<Segment> segments;
};

// Horizontal stacked bars (one per entry), a shared value axis and a legend.
std::string stacked_bars(const std::string& title, const std::string& unit,
                         const std::vector<StackedBar>& bars, const Frame& frame = {});

struct Group {
  std::string label;            // e.g. one GEMM shape
  std::vector<double> values;   // one per series; NaN: missing
  // Optional interval per series (same length as values, NaN: none), drawn as a whisker.
  std::vector<double> low, high;
};

struct GroupedStyle {
  Frame frame;
  int bar_height = 10;
  double reference = std::numeric_limits<double>::quiet_NaN();  // dashed line at this value (NaN: none)
  std::string reference_label;  // written at the top of the dashed line
  std::string value_suffix;     // after each bar's value label, e.g. "x" for a speedup
  int decimals = -1;            // of the value labels (-1: three significant digits)
};

// Grouped horizontal bars: groups down, one bar per series inside each group, legend on top.
std::string grouped_bars(const std::string& title, const std::string& unit,
                         const std::vector<std::string>& series, const std::vector<Group>& groups,
                         const GroupedStyle& style = {});

using io::escape_xml;  // for HTML text and attributes

}  // namespace nibble::report::svg
