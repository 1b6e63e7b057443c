// HTML tables of the report that never show an empty column: a column whose every cell is blank ("-",
// empty) or zero ("0.000") says nothing about this result and is left out.
#pragma once
#include <string>
#include <vector>

namespace nibble::report::html {

struct Column {
  std::string header;      // HTML (already escaped)
  bool left = false;       // text columns align left, numbers right
  std::string group = {};  // consecutive columns of one non-empty group share a header cell above theirs
};

class Table {
 public:
  explicit Table(std::vector<Column> columns) : columns_(std::move(columns)) {}
  // One cell per column, HTML (already escaped). row_class: the <tr>'s class ("" for none).
  void add_row(std::vector<std::string> cells, std::string row_class = {});
  // The table without its blank columns, inside a block that scrolls sideways rather than widening the page
  // (class "wide"; `table_class` on the <table>). Empty when no row or no column has anything to show.
  std::string render(const std::string& table_class = {}) const;

 private:
  struct Row {
    std::vector<std::string> cells;
    std::string row_class;
  };
  std::vector<Column> columns_;
  std::vector<Row> rows_;
};

// True for a cell that shows nothing: empty, "-", or a number that is zero ("0", "0.000", "0.00x").
bool blank_cell(const std::string& html);

// A two-column table of (name, value) facts; pairs with a blank value are left out.
std::string facts_table(const std::vector<std::pair<std::string, std::string>>& facts, const std::string& caption);

}  // namespace nibble::report::html
