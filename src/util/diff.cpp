#include "util/diff.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

namespace kope::util {

namespace {

std::vector<std::string_view> split_lines(std::string_view s) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start < s.size()) {
    size_t nl = s.find('\n', start);
    if (nl == std::string_view::npos) {
      out.push_back(s.substr(start));
      break;
    }
    size_t end = nl > start && s[nl - 1] == '\r' ? nl - 1 : nl;
    out.push_back(s.substr(start, end - start));
    start = nl + 1;
  }
  return out;
}

enum class Op { equal, insert, remove };
struct Edit {
  Op op;
  int a;  // index in before (equal, remove)
  int b;  // index in after (equal, insert)
};

// Myers' greedy algorithm with a trace of the furthest-reaching paths for backtracking.
// Returns false when more than `max_edits` edits are needed.
bool myers(const std::vector<int>& a, const std::vector<int>& b, int max_edits,
           std::vector<Edit>& out) {
  const int n = static_cast<int>(a.size()), m = static_cast<int>(b.size());
  const int max = n + m;
  const int offset = max + 1;
  std::vector<int> v(static_cast<size_t>(2 * max + 3), 0);
  std::vector<std::vector<int>> trace;  // trace[d]: v[-d..d] before step d
  int found = -1;
  for (int d = 0; d <= std::min(max, max_edits); ++d) {
    trace.emplace_back(v.begin() + (offset - d), v.begin() + (offset + d + 1));
    for (int k = -d; k <= d; k += 2) {
      int x;
      if (k == -d || (k != d && v[static_cast<size_t>(offset + k - 1)] <
                                    v[static_cast<size_t>(offset + k + 1)])) {
        x = v[static_cast<size_t>(offset + k + 1)];
      } else {
        x = v[static_cast<size_t>(offset + k - 1)] + 1;
      }
      int y = x - k;
      while (x < n && y < m && a[static_cast<size_t>(x)] == b[static_cast<size_t>(y)]) ++x, ++y;
      v[static_cast<size_t>(offset + k)] = x;
      if (x >= n && y >= m) {
        found = d;
        break;
      }
    }
    if (found >= 0) break;
  }
  if (found < 0) return false;
  std::vector<Edit> rev;
  int x = n, y = m;
  for (int d = found; d > 0; --d) {
    const std::vector<int>& t = trace[static_cast<size_t>(d)];
    auto at = [&](int k) { return t[static_cast<size_t>(k + d)]; };
    int k = x - y;
    int prev_k = (k == -d || (k != d && at(k - 1) < at(k + 1))) ? k + 1 : k - 1;
    int prev_x = at(prev_k);
    int prev_y = prev_x - prev_k;
    while (x > prev_x && y > prev_y) {
      --x, --y;
      rev.push_back({Op::equal, x, y});
    }
    if (x == prev_x) {
      rev.push_back({Op::insert, x, prev_y});
    } else {
      rev.push_back({Op::remove, prev_x, y});
    }
    x = prev_x;
    y = prev_y;
  }
  while (x > 0 && y > 0) {
    --x, --y;
    rev.push_back({Op::equal, x, y});
  }
  out.assign(rev.rbegin(), rev.rend());
  return true;
}

// The edit script from `a` to `b`: Myers' minimal one, or (beyond max_edits) every line of `a`
// removed and every line of `b` inserted, with diff.minimal false.
std::vector<Edit> edit_script(const std::vector<int>& a, const std::vector<int>& b, int max_edits, Diff& diff) {
  std::vector<Edit> edits;
  if (myers(a, b, max_edits, edits)) return edits;
  diff.minimal = false;
  edits.clear();
  for (int i = 0; i < static_cast<int>(a.size()); ++i) edits.push_back({Op::remove, i, 0});
  for (int j = 0; j < static_cast<int>(b.size()); ++j) edits.push_back({Op::insert, static_cast<int>(a.size()), j});
  return edits;
}

// The end of the hunk whose first change is edits[first]: changes closer than 2·ctx lines
// share a hunk, and the hunk ends ctx lines of context after its last change.
size_t hunk_end(const std::vector<Edit>& edits, size_t first, size_t ctx) {
  const size_t n = edits.size();
  size_t end = first;
  for (;;) {
    while (end < n && edits[end].op != Op::equal) ++end;
    size_t eq = end;
    while (eq < n && edits[eq].op == Op::equal) ++eq;
    if (eq < n && eq - end <= 2 * ctx) {
      end = eq;
      continue;
    }
    return std::min(n, end + ctx);
  }
}

// The "@@ -a,len +b,len @@" line of edits[start, end) (unified format: a range of length 0
// names the line before it).
std::string hunk_header(const std::vector<Edit>& edits, size_t start, size_t end) {
  int a_start = -1, b_start = -1, a_len = 0, b_len = 0;
  for (size_t j = start; j < end; ++j) {
    const Edit& e = edits[j];
    if (e.op != Op::insert) {
      if (a_start < 0) a_start = e.a;
      ++a_len;
    }
    if (e.op != Op::remove) {
      if (b_start < 0) b_start = e.b;
      ++b_len;
    }
  }
  if (a_start < 0) a_start = edits[start].a;
  if (b_start < 0) b_start = edits[start].b;
  return fmt::format("@@ -{},{} +{},{} @@", a_len ? a_start + 1 : a_start, a_len, b_len ? b_start + 1 : b_start, b_len);
}

// Appends lines to a diff up to options.max_lines, then marks it truncated.
class DiffWriter {
 public:
  DiffWriter(Diff& diff, size_t max_lines) : m_diff(diff), m_max_lines(max_lines) {}
  void push(DiffLine::Kind kind, std::string text) {
    if (m_diff.lines.size() >= m_max_lines) {
      m_diff.truncated = true;
      return;
    }
    m_diff.lines.push_back({kind, std::move(text)});
  }

 private:
  Diff& m_diff;
  size_t m_max_lines;
};

}  // namespace

Diff line_diff(std::string_view before, std::string_view after, const DiffOptions& options) {
  std::vector<std::string_view> la = split_lines(before), lb = split_lines(after);
  std::unordered_map<std::string_view, int> ids;
  auto intern = [&](const std::vector<std::string_view>& lines) {
    std::vector<int> out;
    out.reserve(lines.size());
    for (auto l : lines)
      out.push_back(ids.try_emplace(l, static_cast<int>(ids.size())).first->second);
    return out;
  };
  std::vector<int> a = intern(la), b = intern(lb);

  Diff diff;
  const std::vector<Edit> edits = edit_script(a, b, options.max_edits, diff);
  for (const auto& e : edits) {
    diff.added += e.op == Op::insert;
    diff.removed += e.op == Op::remove;
  }
  if (diff.identical()) return diff;

  const size_t ctx = static_cast<size_t>(std::max(0, options.context));
  const size_t n = edits.size();
  DiffWriter out(diff, options.max_lines);
  size_t i = 0;
  while (i < n) {
    while (i < n && edits[i].op == Op::equal) ++i;
    if (i >= n) break;
    // The previous hunk ended more than `ctx` lines before this change, so hunks never overlap.
    const size_t start = i >= ctx ? i - ctx : 0;
    const size_t end = hunk_end(edits, i, ctx);
    out.push(DiffLine::Kind::hunk, hunk_header(edits, start, end));
    for (size_t j = start; j < end; ++j) {
      const Edit& e = edits[j];
      switch (e.op) {
        case Op::equal: out.push(DiffLine::Kind::context, std::string(la[static_cast<size_t>(e.a)])); break;
        case Op::remove: out.push(DiffLine::Kind::removed, std::string(la[static_cast<size_t>(e.a)])); break;
        case Op::insert: out.push(DiffLine::Kind::added, std::string(lb[static_cast<size_t>(e.b)])); break;
      }
    }
    i = end;
  }
  return diff;
}

std::string unified_text(const Diff& diff) {
  std::string out;
  for (const auto& l : diff.lines) {
    switch (l.kind) {
      case DiffLine::Kind::context:
        out += ' ';
        break;
      case DiffLine::Kind::added:
        out += '+';
        break;
      case DiffLine::Kind::removed:
        out += '-';
        break;
      case DiffLine::Kind::hunk:
        break;
    }
    out += l.text;
    out += '\n';
  }
  if (diff.truncated) out += "... (diff truncated)\n";
  return out;
}

}  // namespace kope::util
