#include "util/diff.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace kope::util {
namespace {

// Applies a diff's hunks to `before` (a check that the hunks are exact).
std::string apply_diff(const std::string& before, const Diff& d) {
  std::vector<std::string> a;
  size_t start = 0;
  while (start < before.size()) {
    size_t nl = before.find('\n', start);
    a.push_back(before.substr(start, nl - start));
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  std::vector<std::string> out;
  size_t ai = 0;
  for (const auto& l : d.lines) {
    if (l.kind == DiffLine::Kind::hunk) {
      int from = 0, len = 0;
      EXPECT_EQ(std::sscanf(l.text.c_str(), "@@ -%d,%d", &from, &len), 2) << l.text;
      size_t target = len ? static_cast<size_t>(from - 1) : static_cast<size_t>(from);
      while (ai < target) out.push_back(a[ai++]);
    } else if (l.kind == DiffLine::Kind::context) {
      EXPECT_EQ(a[ai], l.text);
      out.push_back(a[ai++]);
    } else if (l.kind == DiffLine::Kind::removed) {
      EXPECT_EQ(a[ai], l.text);
      ++ai;
    } else {
      out.push_back(l.text);
    }
  }
  while (ai < a.size()) out.push_back(a[ai++]);
  std::string s;
  for (const auto& l : out) s += l + "\n";
  return s;
}

TEST(Diff, IdenticalTextsHaveNoHunks) {
  Diff d = line_diff("a\nb\n", "a\nb\n");
  EXPECT_TRUE(d.identical());
  EXPECT_TRUE(d.lines.empty());
}

TEST(Diff, OneChangedLineWithContext) {
  std::string a = "1\n2\n3\n4\n5\n6\n7\n8\n9\n";
  std::string b = "1\n2\n3\n4\nfive\n6\n7\n8\n9\n";
  Diff d = line_diff(a, b);
  EXPECT_EQ(d.added, 1);
  EXPECT_EQ(d.removed, 1);
  EXPECT_EQ(unified_text(d), "@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n");
  EXPECT_EQ(apply_diff(a, d), b);
}

TEST(Diff, FromNothingIsTheWholeSource) {
  Diff d = line_diff("", "x\ny\n");
  EXPECT_EQ(d.added, 2);
  EXPECT_EQ(unified_text(d), "@@ -0,0 +1,2 @@\n+x\n+y\n");
}

TEST(Diff, DistantChangesMakeSeparateHunksAndApplyExactly) {
  std::string a, b;
  for (int i = 0; i < 40; ++i) {
    a += fmt::format("line {}\n", i);
    if (i == 3) b += "inserted\n";
    if (i != 20) b += fmt::format("line {}\n", i);
    if (i == 35) b += fmt::format("line {} changed\n", i);
  }
  Diff d = line_diff(a, b);
  int hunks = 0;
  for (const auto& l : d.lines) hunks += l.kind == DiffLine::Kind::hunk;
  EXPECT_EQ(hunks, 3);
  EXPECT_EQ(d.added, 2);
  EXPECT_EQ(d.removed, 1);
  EXPECT_TRUE(d.minimal);
  EXPECT_EQ(apply_diff(a, d), b);
}

TEST(Diff, EditLimitFallsBackToReplaceAllAndTruncates) {
  std::string a, b;
  for (int i = 0; i < 50; ++i) {
    a += fmt::format("a{}\n", i);
    b += fmt::format("b{}\n", i);
  }
  DiffOptions o;
  o.max_edits = 10;
  o.max_lines = 20;
  Diff d = line_diff(a, b, o);
  EXPECT_FALSE(d.minimal);
  EXPECT_EQ(d.added, 50);
  EXPECT_EQ(d.removed, 50);
  EXPECT_TRUE(d.truncated);
  EXPECT_EQ(d.lines.size(), 20u);
  o.max_lines = 1000;
  EXPECT_EQ(apply_diff(a, line_diff(a, b, o)), b);
}

}  // namespace
}  // namespace kope::util
