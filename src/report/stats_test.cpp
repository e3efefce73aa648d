#include "report/stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace kope::report {
namespace {

TEST(Stats, MeansOverSets) {
  std::vector<double> v = {4.0, 1.5};
  EXPECT_NEAR(*geomean(v), std::sqrt(6.0), 1e-12);
  EXPECT_NEAR(*mean(v), 2.75, 1e-12);
  EXPECT_NEAR(*median({3, 1, 2}), 2, 1e-12);
  EXPECT_NEAR(*median({4, 1, 2, 3}), 2.5, 1e-12);
  EXPECT_FALSE(geomean(std::vector<double>{}));
  EXPECT_FALSE(mean(std::vector<double>{}));
  EXPECT_FALSE(median({}));
}

TEST(Stats, FastPIsStrictAtTheBoundary) {
  std::vector<double> s = {4.0, 1.5, 2.0, 1.0};  // four solved of six
  EXPECT_DOUBLE_EQ(fast_p(s, 6, 0), 4.0 / 6);
  EXPECT_DOUBLE_EQ(fast_p(s, 6, 1), 3.0 / 6);    // exactly 1.0 is not faster
  EXPECT_DOUBLE_EQ(fast_p(s, 6, 1.5), 2.0 / 6);  // exactly 1.5 is not more than 1.5x
  EXPECT_DOUBLE_EQ(fast_p(s, 6, 2), 1.0 / 6);
  EXPECT_DOUBLE_EQ(fast_p(s, 0, 1), 0.0);
}

TEST(Stats, RngMatchesTheReferenceXoshiro) {
  // xoshiro256** seeded by SplitMix64(1), computed independently (Python).
  Rng rng(1);
  EXPECT_EQ(rng.next(), 0xb3f2af6d0fc710c5ULL);
  EXPECT_EQ(rng.next(), 0x853b559647364ceaULL);
  EXPECT_EQ(rng.next(), 0x92f89756082a4514ULL);
  Rng r2(5);
  for (int i = 0; i < 1000; ++i) EXPECT_LT(r2.below(7), 7u);
}

TEST(Stats, BootstrapIsDeterministicForASeed) {
  std::vector<double> a = {1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0};
  std::vector<double> b = {1.5, 1.0, 4.0, 4.5, 5.0, 8.0, 6.5, 9.0};
  BootstrapOptions o;
  o.resamples = 2000;
  o.seed = 42;
  auto x = bootstrap_mean_difference(a, b, o);
  auto y = bootstrap_mean_difference(a, b, o);
  ASSERT_TRUE(x && y);
  EXPECT_EQ(x->low, y->low);
  EXPECT_EQ(x->high, y->high);
  EXPECT_NEAR(x->estimate, 3.5 / 8, 1e-12);  // differences sum to 3.5
  EXPECT_LE(x->low, x->estimate);
  EXPECT_GE(x->high, x->estimate);
  EXPECT_LT(x->low, x->high);
  EXPECT_EQ(x->resamples, 2000);
  EXPECT_EQ(x->n, 8);
  o.seed = 43;
  auto z = bootstrap_mean_difference(a, b, o);
  ASSERT_TRUE(z);
  EXPECT_TRUE(z->low != x->low || z->high != x->high);
}

TEST(Stats, BootstrapOfTwoPairsSpansTheirDifferences) {
  // Differences {0, 1}: a resample is {0,0} (p = 1/4), mixed (1/2) or {1,1} (1/4), so the 2.5%
  // and 97.5% quantiles of the resampled means are exactly 0 and 1.
  std::vector<double> a = {1, 1}, b = {1, 2};
  auto iv = bootstrap_mean_difference(a, b, {});
  ASSERT_TRUE(iv);
  EXPECT_DOUBLE_EQ(iv->estimate, 0.5);
  EXPECT_DOUBLE_EQ(iv->low, 0.0);
  EXPECT_DOUBLE_EQ(iv->high, 1.0);
  EXPECT_EQ(iv->resamples, 10000);
}

TEST(Stats, PairedStatistics) {
  std::vector<double> a = {2, 4}, b = {1, 2};
  auto g = bootstrap_geomean_ratio(a, b, {});
  ASSERT_TRUE(g);
  EXPECT_NEAR(g->estimate, 0.5, 1e-12);
  EXPECT_NEAR(g->low, 0.5, 1e-12);  // every resample has the same ratio
  EXPECT_NEAR(g->high, 0.5, 1e-12);
  auto r = bootstrap_ratio_of_sums(std::vector<double>{3600, 2400, 2400},
                                   std::vector<double>{600, 600, 1200}, {});
  ASSERT_TRUE(r);
  EXPECT_NEAR(r->estimate, 2400.0 / 8400.0, 1e-12);
  auto d = bootstrap_rate_difference(std::vector<double>{4, 2}, std::vector<double>{4, 3},
                                     std::vector<double>{4, 3}, std::vector<double>{4, 3}, {});
  ASSERT_TRUE(d);
  EXPECT_NEAR(d->estimate, 1.0 / 7.0, 1e-12);
  // Empty samples, mismatched lengths and non-positive ratios give no interval.
  EXPECT_FALSE(bootstrap_mean_difference(std::vector<double>{}, std::vector<double>{}, {}));
  EXPECT_FALSE(bootstrap_mean_difference(std::vector<double>{1}, std::vector<double>{}, {}));
  EXPECT_FALSE(bootstrap_geomean_ratio(std::vector<double>{0}, std::vector<double>{1}, {}));
}

}  // namespace
}  // namespace kope::report
