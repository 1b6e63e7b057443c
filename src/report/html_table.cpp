// HTML tables without blank columns (see html_table.hpp).
#include "html_table.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace nibble::report::html {

bool blank_cell(const std::string& html) {
  if (html.empty() || html == "-") return true;
  bool digit = false;
  for (size_t i = 0; i < html.size(); ++i) {
    const char c = html[i];
    if (c == '0') digit = true;
    else if (c == '.') continue;
    else if (i == html.size() - 1 && (c == 'x' || c == '%')) continue;
    else return false;
  }
  return digit;
}

void Table::add_row(std::vector<std::string> cells, std::string row_class) {
  if (cells.size() != columns_.size())
    throw std::logic_error(fmt::format("html table: a row of {} cells for {} columns", cells.size(), columns_.size()));
  rows_.push_back({std::move(cells), std::move(row_class)});
}

std::string Table::render(const std::string& table_class) const {
  std::vector<size_t> shown;
  for (size_t c = 0; c < columns_.size(); ++c)
    for (const Row& r : rows_)
      if (!blank_cell(r.cells[c])) {
        shown.push_back(c);
        break;
      }
  if (shown.empty()) return "";
  std::string out = table_class.empty() ? "<div class=wide><table>\n"
                                        : fmt::format("<div class=wide><table class={}>\n", table_class);
  bool grouped = false;
  for (size_t c : shown) grouped = grouped || !columns_[c].group.empty();
  if (grouped) {
    out += "<tr>";
    for (size_t i = 0; i < shown.size();) {
      const std::string& g = columns_[shown[i]].group;
      size_t j = i + 1;
      while (!g.empty() && j < shown.size() && columns_[shown[j]].group == g) ++j;
      out += g.empty() ? "<th class=blank></th>" : fmt::format("<th colspan={} class=group>{}</th>", j - i, g);
      i = j;
    }
    out += "</tr>\n";
  }
  out += "<tr>";
  for (size_t c : shown) out += fmt::format("<th{}>{}</th>", columns_[c].left ? " class=l" : "", columns_[c].header);
  out += "</tr>\n";
  for (const Row& r : rows_) {
    out += r.row_class.empty() ? "<tr>" : fmt::format("<tr class={}>", r.row_class);
    for (size_t c : shown) out += fmt::format("<td{}>{}</td>", columns_[c].left ? " class=l" : "", r.cells[c]);
    out += "</tr>\n";
  }
  return out + "</table></div>\n";
}

std::string facts_table(const std::vector<std::pair<std::string, std::string>>& facts, const std::string& caption) {
  std::string rows;
  for (const auto& [name, value] : facts)
    if (!blank_cell(value)) rows += fmt::format("<tr><th class=l>{}</th><td class=l>{}</td></tr>\n", name, value);
  if (rows.empty()) return "";
  return fmt::format("<table class=facts><caption>{}</caption>\n{}</table>\n", caption, rows);
}

}  // namespace nibble::report::html
