// Inline SVG charts for the HTML report. Drawn by hand (no library, no script, no network): a bar
// chart is rectangles and text, and that keeps the report one file that opens anywhere.
#pragma once
#include <string>
#include <vector>

#include "nibble/io/xml_text.hpp"

namespace nibble::report::svg {

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
                         const std::vector<StackedBar>& bars);

struct Bar {
  std::string label;
  double value = 0;  // NaN: drawn as "n/a"
};

// Horizontal bars with a reference line at `reference` (e.g. 1.0x for speedups; NaN for none).
std::string bars(const std::string& title, const std::string& unit, const std::vector<Bar>& bars,
                 double reference);

struct Group {
  std::string label;            // e.g. one GEMM shape
  std::vector<double> values;   // one per series; NaN: missing
};

// Grouped horizontal bars: groups down, one bar per series inside each group.
std::string grouped_bars(const std::string& title, const std::string& unit,
                         const std::vector<std::string>& series, const std::vector<Group>& groups);

using io::escape_xml;  // for HTML text and attributes

}  // namespace nibble::report::svg
