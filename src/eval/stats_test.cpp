#include "eval/stats.h"

#include <gtest/gtest.h>

namespace kope::eval {
namespace {

TEST(Stats, MedianOddAndEven) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median({}), 0);
}

// Ranks from the standard tables of distribution-free confidence intervals for the median
// (e.g. Conover, Practical Nonparametric Statistics, table A3; 95% two-sided).
TEST(Stats, CiRanksMatchTables) {
  EXPECT_EQ(median_ci_rank(5), 0u);   // P(all on one side) = 2/32 > 5%: no 95% interval
  EXPECT_EQ(median_ci_rank(6), 1u);   // [x1, x6], coverage 1 - 2/64 = 96.9%
  EXPECT_EQ(median_ci_rank(8), 1u);   // P(B <= 1) = 9/256 = 3.5% > 2.5%
  EXPECT_EQ(median_ci_rank(9), 2u);   // P(B <= 1) = 10/512 = 1.95%
  EXPECT_EQ(median_ci_rank(10), 2u);  // [x2, x9]
  EXPECT_EQ(median_ci_rank(20), 6u);  // [x6, x15]
  EXPECT_EQ(median_ci_rank(100), 40u);  // [x40, x61]
}

TEST(Stats, CiOfTenSamples) {
  // Sorted: 1 2 3 4 5 6 7 8 9 100; median 5.5; interval [x2, x9] = [2, 9].
  MedianCi ci = median_ci({9, 1, 100, 3, 5, 7, 2, 4, 6, 8});
  EXPECT_DOUBLE_EQ(ci.median, 5.5);
  EXPECT_EQ(ci.rank_lower, 2u);
  EXPECT_EQ(ci.rank_upper, 9u);
  EXPECT_DOUBLE_EQ(ci.lower, 2);
  EXPECT_DOUBLE_EQ(ci.upper, 9);
  EXPECT_DOUBLE_EQ(ci.half_width, 3.5);  // max(5.5 - 2, 9 - 5.5)
  // Coverage 1 - 2 * P(B <= 1) = 1 - 2 * 11/1024.
  EXPECT_NEAR(ci.coverage, 1 - 22.0 / 1024, 1e-12);
}

TEST(Stats, FewSamplesUseTheRange) {
  MedianCi ci = median_ci({10, 12, 11});
  EXPECT_DOUBLE_EQ(ci.median, 11);
  EXPECT_DOUBLE_EQ(ci.lower, 10);
  EXPECT_DOUBLE_EQ(ci.upper, 12);
  EXPECT_DOUBLE_EQ(ci.half_width, 1);
  EXPECT_NEAR(ci.coverage, 0.75, 1e-12);
}

TEST(Stats, ConstantSamplesHaveZeroWidth) {
  MedianCi ci = median_ci(std::vector<double>(30, 4.0));
  EXPECT_DOUBLE_EQ(ci.median, 4);
  EXPECT_DOUBLE_EQ(ci.half_width, 0);
}

TEST(Stats, Geomean) {
  EXPECT_NEAR(geomean({2, 8}), 4, 1e-12);
  EXPECT_NEAR(geomean({1, 10, 100}), 10, 1e-12);
  EXPECT_DOUBLE_EQ(geomean({}), 0);
}

}  // namespace
}  // namespace kope::eval
