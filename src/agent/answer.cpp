#include "agent/answer.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "util/strings.h"

namespace kope::agent {

namespace {

struct Block {
  std::string info;     // the language tag
  std::string content;  // '\n'-terminated lines
  bool closed = false;
  size_t first_line = 0;
  size_t last_line = 0;  // the closing fence (or the last line when unclosed)
};

std::string normalise_newlines(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\r') {
      out += '\n';
      if (i + 1 < text.size() && text[i + 1] == '\n') ++i;
    } else {
      out += text[i];
    }
  }
  return out;
}

// A fence line: optional indentation (up to 3 spaces, as in CommonMark, but models indent more
// inside lists, so any), then 3+ backticks or tildes. Returns the fence char and length.
bool fence_of(std::string_view line, char& ch, size_t& len, size_t& indent, std::string_view& rest) {
  size_t i = 0;
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  if (i >= line.size() || (line[i] != '`' && line[i] != '~')) return false;
  char c = line[i];
  size_t j = i;
  while (j < line.size() && line[j] == c) ++j;
  if (j - i < 3) return false;
  ch = c;
  len = j - i;
  indent = i;
  rest = line.substr(j);
  return true;
}

// True when `code` contains `kope_kernel(...)` followed by a body, not just a declaration.
bool defines_kernel(std::string_view code) {
  size_t pos = 0;
  while ((pos = code.find("kope_kernel", pos)) != std::string_view::npos) {
    size_t i = pos + 11;
    bool ident_before = pos > 0 && (std::isalnum(static_cast<unsigned char>(code[pos - 1])) || code[pos - 1] == '_');
    pos = i;
    if (ident_before) continue;
    while (i < code.size() && std::isspace(static_cast<unsigned char>(code[i]))) ++i;
    if (i >= code.size() || code[i] != '(') continue;
    int depth = 0;
    for (; i < code.size(); ++i) {
      if (code[i] == '(') ++depth;
      if (code[i] == ')' && --depth == 0) break;
    }
    if (i >= code.size()) return false;
    ++i;
    // Skip qualifiers such as `noexcept` or `__attribute__((...))` before the body.
    while (i < code.size() && code[i] != '{' && code[i] != ';') ++i;
    if (i < code.size() && code[i] == '{') return true;
  }
  return false;
}

// Brace balance ignoring comments, string and character literals.
bool braces_balance(std::string_view code) {
  int depth = 0;
  for (size_t i = 0; i < code.size(); ++i) {
    char c = code[i];
    if (c == '/' && i + 1 < code.size() && code[i + 1] == '/') {
      while (i < code.size() && code[i] != '\n') ++i;
    } else if (c == '/' && i + 1 < code.size() && code[i + 1] == '*') {
      size_t end = code.find("*/", i + 2);
      if (end == std::string_view::npos) return false;
      i = end + 1;
    } else if (c == '"' || c == '\'') {
      for (++i; i < code.size() && code[i] != c; ++i) {
        if (code[i] == '\\') ++i;
        if (code[i] == '\n') break;
      }
    } else if (c == '{') {
      ++depth;
    } else if (c == '}') {
      if (--depth < 0) return false;
    }
  }
  return depth == 0;
}

std::string strip_decoration(std::string_view s) {
  s = util::trim(s);
  // Markdown list/heading/quote markers and emphasis around a header.
  while (!s.empty() && (s.front() == '#' || s.front() == '>' || s.front() == '-' || s.front() == '*' ||
                        s.front() == '_' || s.front() == '`')) {
    s.remove_prefix(1);
    s = util::trim(s);
  }
  while (!s.empty() && (s.back() == '*' || s.back() == '_' || s.back() == '`')) {
    s.remove_suffix(1);
    s = util::trim(s);
  }
  return std::string(s);
}

std::string clean_value(std::string_view v) {
  std::string s = strip_decoration(v);
  while (!s.empty() && (s.front() == '"' || s.front() == '\'' || s.front() == ':')) s.erase(0, 1);
  while (!s.empty() && (s.back() == '"' || s.back() == '\'' || s.back() == ',')) s.pop_back();
  s = std::string(util::trim(s));
  // A runaway header is shortened at a clause or a word, and says so (never cut mid-word).
  if (s.size() > k_max_optimisation) s = util::shorten_at_clause(s, k_max_optimisation);
  return s;
}

// "OPTIMISATION: x", "**Optimization:** x", "optimisation - x", "optimisation applied: x".
std::optional<std::string> header_value(std::string_view line) {
  std::string plain = strip_decoration(line);
  std::string lower = util::to_lower(plain);
  for (std::string_view key : {"optimisation", "optimization"}) {
    if (!lower.starts_with(key)) continue;
    size_t i = key.size();
    // Allow a short qualifier such as " applied" or "s" before the separator.
    size_t sep = lower.find_first_of(":-=", i);
    if (sep == std::string::npos || sep > i + 12) continue;
    std::string value = clean_value(std::string_view(plain).substr(sep + 1));
    if (value.empty()) continue;
    return value;
  }
  return std::nullopt;
}

// `"optimisation": "..."` anywhere (a JSON header).
std::optional<std::string> json_header(std::string_view text) {
  std::string lower = util::to_lower(text);
  for (std::string_view key : {"\"optimisation\"", "\"optimization\""}) {
    size_t pos = lower.find(key);
    if (pos == std::string::npos) continue;
    size_t i = pos + key.size();
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    if (i >= text.size() || text[i] != ':') continue;
    ++i;
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    if (i >= text.size() || text[i] != '"') continue;
    std::string value;
    for (++i; i < text.size() && text[i] != '"'; ++i) {
      if (text[i] == '\\' && i + 1 < text.size()) ++i;
      value += text[i];
    }
    value = clean_value(value);
    if (!value.empty()) return value;
  }
  return std::nullopt;
}

bool looks_like_code_start(std::string_view line) {
  std::string_view t = util::trim(line);
  for (std::string_view p : {"#include", "#pragma", "#define", "extern \"C\"", "extern\"C\"", "static ", "inline ",
                             "template", "namespace", "typedef", "using ", "//", "/*"}) {
    if (t.starts_with(p)) return true;
  }
  return false;
}

// Every fenced block of `lines` (an unclosed last one runs to the end); marks the lines they
// cover in `in_block`.
std::vector<Block> fenced_blocks(const std::vector<std::string>& lines, std::vector<bool>& in_block) {
  std::vector<Block> blocks;
  for (size_t i = 0; i < lines.size(); ++i) {
    char ch;
    size_t len, indent;
    std::string_view rest;
    if (!fence_of(lines[i], ch, len, indent, rest)) continue;
    Block b;
    b.info = std::string(util::trim(rest));
    b.first_line = i;
    in_block[i] = true;
    size_t j = i + 1;
    for (; j < lines.size(); ++j) {
      char ch2;
      size_t len2, indent2;
      std::string_view rest2;
      in_block[j] = true;
      if (fence_of(lines[j], ch2, len2, indent2, rest2) && ch2 == ch && len2 >= len && util::trim(rest2).empty()) {
        b.closed = true;
        break;
      }
      std::string_view l = lines[j];
      size_t strip = 0;
      while (strip < indent && strip < l.size() && l[strip] == ' ') ++strip;
      b.content += l.substr(strip);
      b.content += '\n';
    }
    b.last_line = std::min(j, lines.size() - 1);
    blocks.push_back(std::move(b));
    i = j;
  }
  return blocks;
}

bool is_marker(std::string_view line, std::string_view marker) { return util::trim(line) == marker; }

// True when some line of `content` is a SEARCH marker: the block holds edits, not a kernel.
bool holds_edits(std::string_view content) {
  for (const auto& l : util::split(content, '\n')) {
    if (is_marker(l, k_edit_search)) return true;
  }
  return false;
}

// The block holding the kernel: the last closed one defining kope_kernel, else an unclosed last
// block whose code is complete. Null when none; sets out.problem when the kernel was cut off.
// Blocks holding edit markers are never the kernel.
const Block* kernel_block(const std::vector<Block>& blocks, ParsedAnswer& out) {
  const Block* chosen = nullptr;
  for (const auto& b : blocks) {
    if (b.closed && defines_kernel(b.content) && !holds_edits(b.content)) chosen = &b;
  }
  if (!chosen && !blocks.empty() && !blocks.back().closed && !holds_edits(blocks.back().content)) {
    const Block& last = blocks.back();
    if (defines_kernel(last.content) && braces_balance(last.content)) {
      chosen = &last;
    } else if (last.content.find("kope_kernel") != std::string::npos) {
      out.problem = "the answer was cut off inside the code block";
    }
  }
  return chosen;
}

// No fences: the answer from its first line of code on, when that is a complete kernel (its
// lines then count as code in `in_block`).
void take_unfenced_code(const std::vector<std::string>& lines, ParsedAnswer& out, std::vector<bool>& in_block) {
  size_t start = 0;
  while (start < lines.size() && !looks_like_code_start(lines[start])) ++start;
  if (start >= lines.size()) return;
  std::string code;
  for (size_t i = start; i < lines.size(); ++i) {
    code += lines[i];
    code += '\n';
  }
  if (defines_kernel(code) && braces_balance(code)) {
    out.has_code = true;
    out.code = std::move(code);
    for (size_t i = start; i < lines.size(); ++i) in_block[i] = true;
  }
}

// Some models put the header as a comment at the top of the code.
std::optional<std::string> header_in_code_comment(const std::string& code) {
  for (const auto& l : util::split(code, '\n')) {
    std::string_view t = util::trim(l);
    if (!t.starts_with("//")) continue;
    if (auto v = header_value(t.substr(2))) return v;
  }
  return std::nullopt;
}

// The first line of prose outside code with at least 3 characters, shortened to 120 bytes.
std::optional<std::string> header_from_prose(const std::vector<std::string>& lines, const std::vector<bool>& in_block) {
  for (size_t i = 0; i < lines.size(); ++i) {
    if (in_block[i]) continue;
    std::string s = clean_value(lines[i]);
    if (s.size() >= 3) return s.size() > 120 ? util::shorten_at_clause(s, 120) : s;
  }
  return std::nullopt;
}

// The header: an explicit line outside code blocks first, then a JSON field, then a comment in
// the chosen code, then prose; "unspecified" when there is none.
void find_header(const std::string& text, const std::vector<std::string>& lines, const std::vector<bool>& in_block,
                 const Block* chosen, ParsedAnswer& out) {
  std::optional<std::string> v;
  for (size_t i = 0; i < lines.size() && !v; ++i) {
    if (!in_block[i]) v = header_value(lines[i]);
  }
  if (!v) v = json_header(text);
  if (!v && chosen) v = header_in_code_comment(chosen->content);
  out.header_found = v.has_value();
  if (!v) v = header_from_prose(lines, in_block);
  out.optimisation = v && !v->empty() ? *v : "unspecified";
}

size_t indent_of(std::string_view line) {
  size_t i = 0;
  while (i < line.size() && line[i] == ' ') ++i;
  return i;
}

// Every edit block of `lines`, fenced or not, into out.edits (marking their lines in
// `in_block`); the first malformed block ends the scan with out.edit_problem set. A block's
// lines lose the indentation of its SEARCH marker (as a fenced block's lose the fence's).
void find_edits(const std::vector<std::string>& lines, ParsedAnswer& out, std::vector<bool>& in_block) {
  for (size_t i = 0; i < lines.size(); ++i) {
    if (!is_marker(lines[i], k_edit_search)) continue;
    out.form = AnswerForm::edits;
    int number = static_cast<int>(out.edits.size()) + 1;
    Edit e;
    e.line = static_cast<int>(i) + 1;
    size_t indent = indent_of(lines[i]);
    auto take = [&](std::string& part, size_t j) {
      std::string_view l = lines[j];
      l.remove_prefix(std::min(indent, indent_of(l)));
      part += l;
      part += '\n';
    };
    in_block[i] = true;
    size_t j = i + 1;
    for (; j < lines.size() && !is_marker(lines[j], k_edit_divider); ++j) {
      if (is_marker(lines[j], k_edit_search) || is_marker(lines[j], k_edit_replace)) break;
      in_block[j] = true;
      take(e.search, j);
    }
    if (j >= lines.size() || !is_marker(lines[j], k_edit_divider)) {
      out.edit_problem = describe_edit(number, e) + (j >= lines.size() ? " is cut off before its ======= line"
                                                                       : " has no ======= line before the next marker");
      return;
    }
    in_block[j] = true;
    for (++j; j < lines.size() && !is_marker(lines[j], k_edit_replace); ++j) {
      if (is_marker(lines[j], k_edit_search) || is_marker(lines[j], k_edit_divider)) break;
      in_block[j] = true;
      take(e.replace, j);
    }
    if (j >= lines.size() || !is_marker(lines[j], k_edit_replace)) {
      out.edit_problem = describe_edit(number, e) + (j >= lines.size() ? " is cut off before its >>>>>>> REPLACE line"
                                                                       : " has no >>>>>>> REPLACE line before the next marker");
      return;
    }
    in_block[j] = true;
    out.edits.push_back(std::move(e));
    i = j;
  }
}

}  // namespace


std::string describe_edit(int number, const Edit& e) {
  std::string first;
  for (const auto& l : util::split(e.search, '\n')) {
    std::string_view t = util::trim(l);
    if (t.empty()) continue;
    first = t.size() > 60 ? std::string(t.substr(0, 57)) + "..." : std::string(t);
    break;
  }
  if (first.empty()) return fmt::format("edit {} (empty SEARCH)", number);
  return fmt::format("edit {} (SEARCH `{}`)", number, first);
}

namespace {

// Where a SEARCH part that matches nothing stops matching: ": its first N lines match, its line
// N+1 (`...`) does not" when its first N >= 1 lines match somewhere in `src` (at a line start),
// else "". Both end in newlines. The first line alone is what describe_edit names, so without this
// a SEARCH that goes wrong further down would seem to fail on a line that is there.
std::string first_mismatch(const std::string& src, const std::string& search) {
  std::vector<size_t> ends;  // the end of each line of `search`, past its newline
  for (size_t pos = search.find('\n'); pos != std::string::npos; pos = search.find('\n', pos + 1)) ends.push_back(pos + 1);
  auto found = [&](size_t len) {
    std::string_view prefix(search.data(), len);
    for (size_t pos = src.find(prefix); pos != std::string::npos; pos = src.find(prefix, pos + 1)) {
      if (pos == 0 || src[pos - 1] == '\n') return true;
    }
    return false;
  };
  for (size_t k = ends.size() - 1; k >= 1; --k) {  // the longest prefix of k whole lines that matches
    if (!found(ends[k - 1])) continue;
    std::string_view line(search.data() + ends[k - 1], ends[k] - ends[k - 1] - 1);
    std::string shown(util::trim(line));
    if (shown.size() > 60) shown = shown.substr(0, 57) + "...";
    return fmt::format(": its first {} line{} match, its line {} (`{}`) does not", k, k == 1 ? "" : "s", k + 1, shown);
  }
  return "";
}

}  // namespace

Result<std::string> apply_edits(std::string_view source, const std::vector<Edit>& edits) {
  std::string src = normalise_newlines(source);
  if (!src.empty() && src.back() != '\n') src += '\n';
  auto whole_lines = [](std::string_view part) {
    std::string s = normalise_newlines(part);
    if (!s.empty() && s.back() != '\n') s += '\n';
    return s;
  };
  struct Region {
    size_t begin = 0, end = 0;
    int edit = 0;
    std::string replace;
  };
  std::vector<Region> regions;
  for (size_t n = 0; n < edits.size(); ++n) {
    int number = static_cast<int>(n) + 1;
    std::string search = whole_lines(edits[n].search);
    if (util::trim(search).empty()) {
      return fail(ErrorKind::config, "{} has an empty SEARCH part", describe_edit(number, edits[n]));
    }
    std::vector<size_t> at;
    for (size_t pos = src.find(search); pos != std::string::npos; pos = src.find(search, pos + 1)) {
      if (pos == 0 || src[pos - 1] == '\n') at.push_back(pos);
    }
    if (at.empty()) {
      return fail(ErrorKind::config,
                  "{} matches nothing in the incumbent's source (SEARCH lines must be copied exactly, "
                  "whitespace included){}",
                  describe_edit(number, edits[n]), first_mismatch(src, search));
    }
    if (at.size() > 1) {
      return fail(ErrorKind::config,
                  "{} is ambiguous: it matches {} places in the incumbent's source (include neighbouring lines "
                  "so that it matches one)",
                  describe_edit(number, edits[n]), at.size());
    }
    Region r{at[0], at[0] + search.size(), number, whole_lines(edits[n].replace)};
    for (const auto& o : regions) {
      if (r.begin < o.end && o.begin < r.end) {
        return fail(ErrorKind::config, "{} overlaps edit {} (edits must change separate lines)",
                    describe_edit(number, edits[n]), o.edit);
      }
    }
    regions.push_back(std::move(r));
  }
  std::sort(regions.begin(), regions.end(), [](const Region& a, const Region& b) { return a.begin < b.begin; });
  std::string out;
  out.reserve(src.size());
  size_t at = 0;
  for (const auto& r : regions) {
    out.append(src, at, r.begin - at);
    out += r.replace;
    at = r.end;
  }
  out.append(src, at, std::string::npos);
  return out;
}

ParsedAnswer parse_answer(std::string_view raw) {
  ParsedAnswer out;
  std::string text = normalise_newlines(raw);
  std::vector<std::string> lines = util::split(text, '\n');
  std::vector<bool> in_block(lines.size(), false);
  std::vector<Block> blocks = fenced_blocks(lines, in_block);
  out.code_blocks = static_cast<int>(blocks.size());
  find_edits(lines, out, in_block);

  const Block* chosen = kernel_block(blocks, out);
  if (chosen) {
    out.has_code = true;
    out.code = chosen->content;
  } else if (blocks.empty() && out.form == AnswerForm::whole && defines_kernel(text)) {
    take_unfenced_code(lines, out, in_block);
  }
  if (!out.has_code && out.problem.empty()) {
    out.problem = blocks.empty() ? "no code in answer" : "no code block in the answer defines kope_kernel";
  }
  // Trailing blank lines in the block are noise; keep exactly one final newline.
  while (out.code.size() >= 2 && out.code[out.code.size() - 1] == '\n' && out.code[out.code.size() - 2] == '\n') {
    out.code.pop_back();
  }
  find_header(text, lines, in_block, chosen, out);
  return out;
}

}  // namespace kope::agent
