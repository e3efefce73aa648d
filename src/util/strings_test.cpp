#include "util/strings.h"

#include <gtest/gtest.h>

namespace kope::util {
namespace {

TEST(ShortenAtClause, TextThatFitsIsKeptTrimmed) {
  EXPECT_EQ(shorten_at_clause("  tile by 8  ", 70), "tile by 8");
  EXPECT_EQ(shorten_at_clause("exactly ten", 11), "exactly ten");
  EXPECT_EQ(shorten_at_clause("", 10), "");
}

TEST(ShortenAtClause, CutsAtTheLastClauseBoundaryThatFits) {
  std::string d = "tile 8x8 with AVX2, unroll k by 4, prefetch the next panel and use aligned stores";
  EXPECT_EQ(shorten_at_clause(d, 70), "tile 8x8 with AVX2, unroll k by 4");
  EXPECT_EQ(shorten_at_clause("use two accumulators; unroll the inner loop by eight to hide latency", 40),
            "use two accumulators");
  EXPECT_EQ(shorten_at_clause("Block the rows. Then vectorise the columns with eight lanes", 30), "Block the rows.");
  EXPECT_EQ(shorten_at_clause("fused single pass - online max and sum with a final rescale", 40), "fused single pass");
}

TEST(ShortenAtClause, WithoutAClauseBoundaryCutsAtAWordAndSaysSo) {
  std::string d = "vectorise the reduction over the innermost dimension using eight wide lanes";
  std::string s = shorten_at_clause(d, 40);
  EXPECT_EQ(s, "vectorise the reduction over (shortened)");
  EXPECT_LE(s.size(), 40u);
}

TEST(ShortenAtClause, AnEarlyClauseBoundaryGivesWayToAWordCut) {
  // "AVX2" ends at byte 4, less than a third of 60: the word cut keeps more.
  std::string d = "AVX2, then a long description of the blocking of the rows and columns";
  std::string s = shorten_at_clause(d, 60);
  EXPECT_EQ(s, "AVX2, then a long description of the blocking of (shortened)");
  EXPECT_LE(s.size(), 60u);
}

TEST(ShortenAtClause, DropsClausePunctuationBeforeTheMarker) {
  EXPECT_EQ(shorten_at_clause("abcdefghij: klmnopqrstuvwxyz words words words", 24), "abcdefghij (shortened)");
}

TEST(ShortenAtClause, NeverCutsMidWordOrAddsDots) {
  std::string d = "reorder loops for unit-stride access of B, accumulate in registers, write C once per tile";
  for (size_t max = 1; max <= d.size() + 2; ++max) {
    std::string s = shorten_at_clause(d, max);
    EXPECT_LE(s.size(), max) << max;
    EXPECT_EQ(s.find("..."), std::string::npos) << s;
    std::string body = s;
    if (body.ends_with(" (shortened)")) body.resize(body.size() - 12);
    if (body == "(shortened)" || body.empty()) continue;
    // What is kept is a prefix of the description ending at a word's end.
    ASSERT_EQ(d.compare(0, body.size(), body), 0) << s;
    if (body.size() < d.size()) {
      char next = d[body.size()];
      EXPECT_TRUE(next == ' ' || next == ',') << "cut mid-word at " << max << ": " << s;
    }
  }
}

TEST(ShortenAtClause, AFirstWordThatDoesNotFitLeavesOnlyTheMarker) {
  EXPECT_EQ(shorten_at_clause("supercalifragilisticexpialidocious kernel", 20), "(shortened)");
  EXPECT_EQ(shorten_at_clause("supercalifragilisticexpialidocious kernel", 5), "");
}

TEST(ShortenAtClause, KeepsMultiByteCharactersWhole) {
  std::string d = "Schleifen über alle Zeilen größer als der L1-Cache blockieren und vektorisieren";
  std::string s = shorten_at_clause(d, 30);
  EXPECT_LE(s.size(), 30u);
  EXPECT_TRUE(s.ends_with(" (shortened)")) << s;
  EXPECT_EQ(d.compare(0, s.size() - 12, s.substr(0, s.size() - 12)), 0);
}

}  // namespace
}  // namespace kope::util
