// util/diff.h — line diffs: a candidate against the kernel it began from (the lineage view), a
// fix against the failure it fixed and an attempt against the incumbent (the prompts).
//
// Myers' O((N+M)·D) algorithm over interned lines, rendered as unified-diff hunks. Pure and
// thread-safe. Large, very different inputs degrade gracefully: beyond `max_edits` edits the
// diff is "everything removed, everything added" (still correct, just not minimal).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace kope::util {

struct DiffLine {
  enum class Kind { context, added, removed, hunk };
  Kind kind = Kind::context;
  std::string text;  // the line without its newline; for a hunk, "@@ -a,b +c,d @@"
};

struct Diff {
  std::vector<DiffLine> lines;
  int added = 0;  // over the whole diff, also when `lines` was truncated
  int removed = 0;
  bool truncated = false;  // `lines` stops at max_lines
  bool minimal = true;     // false when the edit limit forced the fallback
  bool identical() const { return added == 0 && removed == 0; }
};

struct DiffOptions {
  int context = 3;          // unchanged lines around each change
  size_t max_lines = 2000;  // lines kept in Diff::lines
  int max_edits = 4000;     // D beyond which the fallback is used
};

// The edits that turn `before` into `after`, as unified hunks.
Diff line_diff(std::string_view before, std::string_view after, const DiffOptions& options = {});

// Diff::lines as unified-diff text ("+", "-", " " prefixes, hunk headers as they are).
std::string unified_text(const Diff& diff);

}  // namespace kope::util
