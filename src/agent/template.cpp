#include "agent/template.h"

#include <cctype>
#include <vector>

namespace kope::agent {

namespace {

struct Tag {
  char kind = 0;  // 0 variable, '#', '^', '/', '!'
  std::string name;
  size_t begin = 0;  // of "{{"
  size_t end = 0;    // past "}}"
  int line = 1;
};

bool valid_name(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.') return false;
  }
  return true;
}

Result<std::vector<Tag>> scan(std::string_view text, std::string_view name) {
  std::vector<Tag> tags;
  int line = 1;
  size_t counted = 0;
  size_t pos = 0;
  while ((pos = text.find("{{", pos)) != std::string_view::npos) {
    for (; counted < pos; ++counted) {
      if (text[counted] == '\n') ++line;
    }
    size_t close = text.find("}}", pos + 2);
    if (close == std::string_view::npos) return fail(ErrorKind::config, "{}:{}: '{{{{' without a closing '}}}}'", name, line);
    Tag t;
    t.begin = pos;
    t.end = close + 2;
    t.line = line;
    std::string_view inner = text.substr(pos + 2, close - pos - 2);
    while (!inner.empty() && inner.front() == ' ') inner.remove_prefix(1);
    while (!inner.empty() && inner.back() == ' ') inner.remove_suffix(1);
    if (!inner.empty() && (inner.front() == '#' || inner.front() == '^' || inner.front() == '/' || inner.front() == '!')) {
      t.kind = inner.front();
      inner.remove_prefix(1);
      while (!inner.empty() && inner.front() == ' ') inner.remove_prefix(1);
    }
    t.name = std::string(inner);
    if (t.kind != '!' && !valid_name(t.name)) {
      return fail(ErrorKind::config, "{}:{}: bad template tag '{{{{{}}}}}' (names are letters, digits, '_' and '.')", name,
                  line, std::string(text.substr(pos + 2, close - pos - 2)));
    }
    tags.push_back(std::move(t));
    pos = close + 2;
  }
  return tags;
}

// A section/comment tag alone on its line swallows the line: widen [begin, end) to cover the
// indentation before it and the newline after it.
void standalone(std::string_view text, Tag& t) {
  if (t.kind == 0) return;
  size_t b = t.begin;
  while (b > 0 && (text[b - 1] == ' ' || text[b - 1] == '\t')) --b;
  if (b > 0 && text[b - 1] != '\n') return;
  size_t e = t.end;
  while (e < text.size() && (text[e] == ' ' || text[e] == '\t')) ++e;
  if (e < text.size() && text[e] != '\n') return;
  if (e < text.size()) ++e;
  t.begin = b;
  t.end = e;
}

struct Renderer {
  std::string_view text;
  const std::vector<Tag>& tags;
  const TemplateVars* vars;  // null: syntax check only
  std::string_view name;

  // Renders tags [i, ...) from text offset `from` until the closing tag of `section` (or the
  // end). Returns the index past the closing tag.
  Result<size_t> render(size_t i, size_t from, const std::string* section, int section_line, bool emit, std::string& out) {
    size_t cursor = from;
    while (i < tags.size()) {
      const Tag& t = tags[i];
      if (emit) out.append(text.substr(cursor, t.begin - cursor));
      cursor = t.end;
      if (t.kind == '/') {
        if (!section) return fail(ErrorKind::config, "{}:{}: '{{{{/{}}}}}' closes no open section", name, t.line, t.name);
        if (t.name != *section) {
          return fail(ErrorKind::config, "{}:{}: '{{{{/{}}}}}' closes section '{}' opened on line {}", name, t.line,
                      t.name, *section, section_line);
        }
        return i + 1;
      }
      if (t.kind == '!') {
        ++i;
        continue;
      }
      const std::string* value = nullptr;
      if (vars) {
        auto it = vars->find(t.name);
        if (it == vars->end()) return fail(ErrorKind::config, "{}:{}: unknown template variable '{}'", name, t.line, t.name);
        value = &it->second;
      }
      if (t.kind == 0) {
        if (emit && value) out += *value;
        ++i;
        continue;
      }
      bool non_empty = value && !value->empty();
      bool inner_emit = emit && (vars == nullptr || (t.kind == '#' ? non_empty : !non_empty));
      KOPE_ASSIGN(size_t next, render(i + 1, t.end, &t.name, t.line, inner_emit, out));
      i = next;
      cursor = tags[i - 1].end;
    }
    if (section) return fail(ErrorKind::config, "{}:{}: section '{}' is never closed", name, section_line, *section);
    if (emit) out.append(text.substr(cursor));
    return i;
  }
};

}  // namespace

Result<std::string> render_template(std::string_view text, const TemplateVars& vars, std::string_view name) {
  KOPE_ASSIGN(std::vector<Tag> tags, scan(text, name));
  for (auto& t : tags) standalone(text, t);
  std::string out;
  out.reserve(text.size() * 2);
  Renderer r{text, tags, &vars, name};
  KOPE_TRY(r.render(0, 0, nullptr, 0, true, out));
  return out;
}

Status check_template(std::string_view text, std::string_view name) {
  KOPE_ASSIGN(std::vector<Tag> tags, scan(text, name));
  for (auto& t : tags) standalone(text, t);
  std::string out;
  Renderer r{text, tags, nullptr, name};
  KOPE_TRY(r.render(0, 0, nullptr, 0, false, out));
  return {};
}

}  // namespace kope::agent
