// report/table.h — the report's one record schema and the printers generated from it.
//
// Every figure a report shows is a cell of a Table: named, typed columns (key, title, type,
// help) and rows of values. The console, markdown, CSV, JSON and HTML printers all walk the
// same tables (as llama-bench's printers walk its one test record), so a figure cannot differ
// between formats. Each table carries a caption that states, in words, the set its aggregates
// are over. Pure and thread-safe.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

namespace kope::report {

enum class ColumnType {
  text,
  integer,
  real,     // plain number, `digits` decimals
  speedup,  // "2.41x"
  percent,  // a share in [0, 1] shown as "78.6%"
  points,   // a difference of shares shown in percentage points ("+12.5 pp")
  usd,      // "$0.0123"
  boolean,  // "yes"/"no"
};

struct Column {
  std::string key;    // JSON key (snake_case), stable
  std::string title;  // header for people
  ColumnType type = ColumnType::text;
  int digits = 2;     // decimals for real/speedup/percent
  bool brief = true;  // shown by the console and markdown printers (JSON/CSV/HTML show all)
  std::string help;   // what the column means (HTML tooltip, JSON schema)
};

// null (monostate) prints as "-" and as JSON null.
using Value = std::variant<std::monostate, bool, int64_t, double, std::string>;

struct Table {
  std::string id;  // "runs", "ops", "levels", ... (JSON key, HTML anchor)
  std::string title;
  std::string caption;  // the sets the aggregates are over, in words
  std::vector<Column> columns;
  std::vector<std::vector<Value>> rows;

  // Appends a row; it must have one value per column (checked: throws std::logic_error, a bug).
  void add(std::vector<Value> row);
  int column(std::string_view key) const;  // index, or -1
};

// Helpers for optional figures.
Value opt_value(const std::optional<double>& v);
Value opt_value(const std::optional<int>& v);

// A cell as people read it ("2.41x", "78.6%", "-").
std::string format_cell(const Value& v, const Column& c);

// Aligned plain-text tables (brief columns), each with its title and caption, for a terminal
// of `width` columns (captions wrap at it).
std::string print_console(const std::vector<Table>& tables, int width = 100);
// GitHub-flavoured markdown (brief columns; '|' in cells escaped).
std::string print_markdown(const std::vector<Table>& tables);
// RFC 4180 CSV of one table, all columns, raw numbers (a header row of keys).
std::string print_csv(const Table& table);
// {"id","title","caption","columns":[{key,title,type,help}],"rows":[{key: raw value}]}.
nlohmann::json table_json(const Table& table);
std::string_view column_type_name(ColumnType t);

}  // namespace kope::report
