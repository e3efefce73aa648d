// eval/stats.h — the statistics timing results are reported with.
//
// The confidence interval of the median is distribution-free: from order statistics, the
// interval [x_(l), x_(n-l+1)] (1-based, sorted samples) with the largest l such that
// P(Binomial(n, 1/2) <= l - 1) <= 2.5%, which covers the true median with probability >= 95%
// for any continuous distribution. It needs n >= 6; below that the whole range is used (its
// coverage is 1 - 2^(1-n): 75% at n = 3). Pure functions, thread-safe.
#pragma once

#include <cstddef>
#include <vector>

namespace kope::eval {

struct MedianCi {
  double median = 0;
  double lower = 0;       // the interval's ends (sample values)
  double upper = 0;
  double half_width = 0;  // max(median - lower, upper - median)
  double coverage = 0;    // the interval's exact coverage probability
  size_t rank_lower = 0;  // 1-based ranks of the ends
  size_t rank_upper = 0;
};

double median(std::vector<double> samples);

// The rank l (1-based) of the lower end of the 95% interval for n samples; 0 when n < 6.
size_t median_ci_rank(size_t n, double alpha = 0.05);

// Median and its distribution-free 95% confidence interval. Empty input gives all zeros.
MedianCi median_ci(std::vector<double> samples, double alpha = 0.05);

// Geometric mean of positive values; 0 for an empty list.
double geomean(const std::vector<double>& values);

}  // namespace kope::eval
