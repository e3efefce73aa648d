#include "util/strings.h"

#include <fnmatch.h>

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace kope::util {

std::string_view trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t pos = s.find(sep, start);
    if (pos == std::string_view::npos) {
      out.emplace_back(s.substr(start));
      return out;
    }
    out.emplace_back(s.substr(start, pos - start));
    start = pos + 1;
  }
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.starts_with(prefix); }
bool ends_with(std::string_view s, std::string_view suffix) { return s.ends_with(suffix); }

std::string to_lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  if (from.empty()) return s;
  size_t pos = 0;
  while ((pos = s.find(from, pos)) != std::string::npos) {
    s.replace(pos, from.size(), to);
    pos += to.size();
  }
  return s;
}

std::string shell_quote(std::string_view s) { return "'" + replace_all(std::string(s), "'", "'\\''") + "'"; }

std::string truncate_text(std::string_view s, size_t max_bytes, size_t max_lines) {
  size_t lines = 0, end = 0;
  while (end < s.size() && end < max_bytes) {
    if (s[end] == '\n' && ++lines >= max_lines) {
      ++end;
      break;
    }
    ++end;
  }
  if (end >= s.size()) return std::string(s);
  size_t rest = s.size() - end;
  return fmt::format("{}\n[... {} more bytes cut ...]\n", s.substr(0, end), rest);
}

std::string shorten_at_clause(std::string_view text, size_t max_bytes) {
  constexpr std::string_view k_marker = " (shortened)";
  text = trim(text);
  if (text.size() <= max_bytes) return std::string(text);
  // The end of the longest run of whole clauses that fits.
  size_t clause_end = 0;
  for (std::string_view sep : {"; ", ", ", ". ", " - "}) {
    for (size_t pos = text.find(sep); pos != std::string_view::npos; pos = text.find(sep, pos + 1)) {
      size_t end = sep == ". " ? pos + 1 : pos;
      if (end > max_bytes) break;
      clause_end = std::max(clause_end, end);
    }
  }
  if (clause_end > 0 && clause_end >= max_bytes / 3) {
    std::string_view kept = trim(text.substr(0, clause_end));
    if (!kept.empty()) return std::string(kept);
  }
  // Whole words and the marker.
  if (max_bytes > k_marker.size()) {
    size_t room = max_bytes - k_marker.size();
    size_t cut = room;
    while (cut > 0 && !std::isspace(static_cast<unsigned char>(text[cut]))) --cut;
    std::string_view kept = trim(text.substr(0, cut));
    while (!kept.empty() && std::string_view(",;:-").find(kept.back()) != std::string_view::npos) {
      kept = trim(kept.substr(0, kept.size() - 1));
    }
    if (!kept.empty()) return std::string(kept) + std::string(k_marker);
  }
  std::string_view alone = k_marker.substr(1);
  return max_bytes >= alone.size() ? std::string(alone) : std::string();
}

bool glob_match(std::string_view pattern, std::string_view text) {
  std::string p(pattern), t(text);
  return fnmatch(p.c_str(), t.c_str(), 0) == 0;
}

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} {}", bytes, units[u]) : fmt::format("{:.1f} {}", bytes, units[u]);
}

}  // namespace kope::util
