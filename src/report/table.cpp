#include "report/table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace kope::report {

using nlohmann::json;

void Table::add(std::vector<Value> row) {
  if (row.size() != columns.size()) {
    throw std::logic_error(
        fmt::format("table {}: row with {} values for {} columns", id, row.size(), columns.size()));
  }
  rows.push_back(std::move(row));
}

int Table::column(std::string_view key) const {
  for (size_t i = 0; i < columns.size(); ++i) {
    if (columns[i].key == key) return static_cast<int>(i);
  }
  return -1;
}

Value opt_value(const std::optional<double>& v) {
  return v ? Value(*v) : Value();
}
Value opt_value(const std::optional<int>& v) {
  return v ? Value(int64_t{*v}) : Value();
}

std::string_view column_type_name(ColumnType t) {
  switch (t) {
    case ColumnType::text:
      return "text";
    case ColumnType::integer:
      return "integer";
    case ColumnType::real:
      return "real";
    case ColumnType::speedup:
      return "speedup";
    case ColumnType::percent:
      return "percent";
    case ColumnType::points:
      return "points";
    case ColumnType::usd:
      return "usd";
    case ColumnType::boolean:
      return "boolean";
  }
  return "text";
}

namespace {

double as_double(const Value& v) {
  if (auto d = std::get_if<double>(&v)) return *d;
  if (auto i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  if (auto b = std::get_if<bool>(&v)) return *b ? 1 : 0;
  return std::nan("");
}

// Thousands separators for big integers make token counts readable.
std::string group_digits(int64_t v) {
  std::string s = fmt::format("{}", v < 0 ? -v : v);
  std::string out;
  int n = 0;
  for (size_t i = s.size(); i-- > 0;) {
    out.insert(out.begin(), s[i]);
    if (++n % 3 == 0 && i > 0) out.insert(out.begin(), ',');
  }
  return v < 0 ? "-" + out : out;
}

bool right_aligned(ColumnType t) {
  return t != ColumnType::text && t != ColumnType::boolean;
}

std::vector<size_t> brief_columns(const Table& t) {
  std::vector<size_t> out;
  for (size_t i = 0; i < t.columns.size(); ++i) {
    if (t.columns[i].brief) out.push_back(i);
  }
  return out;
}

// Display width: counts UTF-8 code points (the tables hold ASCII plus a few symbols).
size_t display_width(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string pad(const std::string& s, size_t width, bool right) {
  size_t w = display_width(s);
  if (w >= width) return s;
  std::string fill(width - w, ' ');
  return right ? fill + s : s + fill;
}

std::string wrap(std::string_view text, int width, std::string_view indent) {
  std::string out, line;
  size_t start = 0;
  while (start <= text.size()) {
    size_t sp = text.find(' ', start);
    std::string_view word =
        text.substr(start, sp == std::string_view::npos ? std::string_view::npos : sp - start);
    if (!line.empty() &&
        static_cast<int>(display_width(line) + 1 + display_width(word) + indent.size()) > width) {
      out += std::string(indent) + line + "\n";
      line.clear();
    }
    if (!line.empty()) line += ' ';
    line += word;
    if (sp == std::string_view::npos) break;
    start = sp + 1;
  }
  if (!line.empty()) out += std::string(indent) + line + "\n";
  return out;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

json raw_json(const Value& v) {
  return std::visit(
      [](const auto& x) -> json {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          return nullptr;
        } else if constexpr (std::is_same_v<T, double>) {
          return std::isfinite(x) ? json(x) : json(nullptr);
        } else {
          return json(x);
        }
      },
      v);
}

}  // namespace

std::string format_cell(const Value& v, const Column& c) {
  if (std::holds_alternative<std::monostate>(v)) return "-";
  if (auto s = std::get_if<std::string>(&v)) return *s;
  if (auto b = std::get_if<bool>(&v); b && c.type == ColumnType::boolean) return *b ? "yes" : "no";
  double d = as_double(v);
  if (!std::isfinite(d)) return "-";
  switch (c.type) {
    case ColumnType::text:
    case ColumnType::boolean:
      if (auto i = std::get_if<int64_t>(&v)) return fmt::format("{}", *i);
      return fmt::format("{:.{}f}", d, c.digits);
    case ColumnType::integer:
      if (auto i = std::get_if<int64_t>(&v)) return group_digits(*i);
      return group_digits(static_cast<int64_t>(std::llround(d)));
    case ColumnType::real:
      return fmt::format("{:.{}f}", d, c.digits);
    case ColumnType::speedup:
      return fmt::format("{:.{}f}x", d, c.digits);
    case ColumnType::percent:
      return fmt::format("{:.{}f}%", 100 * d, c.digits);
    case ColumnType::points:
      return fmt::format("{:+.{}f} pp", 100 * d, c.digits);
    case ColumnType::usd:
      return fmt::format("${:.4f}", d);
  }
  return "-";
}

std::string print_console(const std::vector<Table>& tables, int width) {
  std::string out;
  for (const auto& t : tables) {
    if (!out.empty()) out += "\n";
    out += t.title + "\n";
    if (!t.caption.empty()) out += wrap(t.caption, width, "  ");
    std::vector<size_t> cols = brief_columns(t);
    if (t.rows.empty()) {
      out += "  (none)\n";
      continue;
    }
    std::vector<size_t> w(cols.size());
    for (size_t j = 0; j < cols.size(); ++j) w[j] = display_width(t.columns[cols[j]].title);
    std::vector<std::vector<std::string>> cells;
    for (const auto& row : t.rows) {
      std::vector<std::string> line;
      for (size_t j = 0; j < cols.size(); ++j) {
        line.push_back(format_cell(row[cols[j]], t.columns[cols[j]]));
        w[j] = std::max(w[j], display_width(line.back()));
      }
      cells.push_back(std::move(line));
    }
    std::string header = " ", rule = " ";
    for (size_t j = 0; j < cols.size(); ++j) {
      const Column& c = t.columns[cols[j]];
      header += " " + pad(c.title, w[j], right_aligned(c.type)) + " ";
      rule += " " + std::string(w[j], '-') + " ";
    }
    while (!header.empty() && header.back() == ' ') header.pop_back();
    while (!rule.empty() && rule.back() == ' ') rule.pop_back();
    out += header + "\n" + rule + "\n";
    for (const auto& line : cells) {
      std::string s = " ";
      for (size_t j = 0; j < cols.size(); ++j) {
        s += " " + pad(line[j], w[j], right_aligned(t.columns[cols[j]].type)) + " ";
      }
      while (!s.empty() && s.back() == ' ') s.pop_back();
      out += s + "\n";
    }
  }
  return out;
}

std::string print_markdown(const std::vector<Table>& tables) {
  auto esc = [](std::string s) {
    std::string out;
    for (char c : s) {
      if (c == '|') out += '\\';
      out += c == '\n' ? ' ' : c;
    }
    return out;
  };
  std::string out;
  for (const auto& t : tables) {
    if (!out.empty()) out += "\n";
    out += "### " + t.title + "\n\n";
    if (!t.caption.empty()) out += t.caption + "\n\n";
    std::vector<size_t> cols = brief_columns(t);
    if (t.rows.empty()) {
      out += "(none)\n";
      continue;
    }
    std::string header = "|", rule = "|";
    for (size_t j : cols) {
      header += " " + esc(t.columns[j].title) + " |";
      rule += right_aligned(t.columns[j].type) ? " ---: |" : " --- |";
    }
    while (!header.empty() && header.back() == ' ') header.pop_back();
    while (!rule.empty() && rule.back() == ' ') rule.pop_back();
    out += header + "\n" + rule + "\n";
    for (const auto& row : t.rows) {
      std::string line = "|";
      for (size_t j : cols) line += " " + esc(format_cell(row[j], t.columns[j])) + " |";
      out += line + "\n";
    }
  }
  return out;
}

std::string print_csv(const Table& t) {
  std::string out;
  for (size_t j = 0; j < t.columns.size(); ++j) out += (j ? "," : "") + csv_field(t.columns[j].key);
  out += "\n";
  for (const auto& row : t.rows) {
    for (size_t j = 0; j < row.size(); ++j) {
      if (j) out += ",";
      const Value& v = row[j];
      if (std::holds_alternative<std::monostate>(v)) continue;
      if (auto s = std::get_if<std::string>(&v)) {
        out += csv_field(*s);
      } else if (auto b = std::get_if<bool>(&v)) {
        out += *b ? "true" : "false";
      } else if (auto i = std::get_if<int64_t>(&v)) {
        out += fmt::format("{}", *i);
      } else if (double d = as_double(v); std::isfinite(d)) {
        out += fmt::format("{}", d);
      }
    }
    out += "\n";
  }
  return out;
}

json table_json(const Table& t) {
  json cols = json::array();
  for (const auto& c : t.columns) {
    json col{{"key", c.key}, {"title", c.title}, {"type", std::string(column_type_name(c.type))}};
    if (!c.help.empty()) col["help"] = c.help;
    cols.push_back(std::move(col));
  }
  json rows = json::array();
  for (const auto& row : t.rows) {
    json r = json::object();
    for (size_t j = 0; j < row.size(); ++j) r[t.columns[j].key] = raw_json(row[j]);
    rows.push_back(std::move(r));
  }
  return json{
      {"id", t.id}, {"title", t.title}, {"caption", t.caption}, {"columns", cols}, {"rows", rows}};
}

}  // namespace kope::report
