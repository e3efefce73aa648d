#include "eval/stats.h"

#include <algorithm>
#include <cmath>

namespace kope::eval {

namespace {

// P(Binomial(n, 1/2) <= k), computed in log space so large n stays exact enough.
double binom_cdf_half(size_t n, size_t k) {
  double total = 0;
  double log_half_n = static_cast<double>(n) * std::log(0.5);
  for (size_t i = 0; i <= k && i <= n; ++i) {
    double log_c = std::lgamma(static_cast<double>(n) + 1) - std::lgamma(static_cast<double>(i) + 1) -
                   std::lgamma(static_cast<double>(n - i) + 1);
    total += std::exp(log_c + log_half_n);
  }
  return std::min(1.0, total);
}

}  // namespace

double median(std::vector<double> s) {
  if (s.empty()) return 0;
  std::sort(s.begin(), s.end());
  size_t n = s.size();
  return n % 2 == 1 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

size_t median_ci_rank(size_t n, double alpha) {
  size_t best = 0;
  for (size_t l = 1; 2 * l <= n; ++l) {
    if (binom_cdf_half(n, l - 1) <= alpha / 2) {
      best = l;
    } else {
      break;
    }
  }
  return best;
}

MedianCi median_ci(std::vector<double> s, double alpha) {
  MedianCi r;
  if (s.empty()) return r;
  std::sort(s.begin(), s.end());
  size_t n = s.size();
  r.median = n % 2 == 1 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  size_t l = median_ci_rank(n, alpha);
  if (l == 0) {
    r.rank_lower = 1;
    r.rank_upper = n;
    r.coverage = n >= 2 ? 1.0 - 2.0 * std::pow(0.5, static_cast<double>(n)) : 0.0;
  } else {
    r.rank_lower = l;
    r.rank_upper = n - l + 1;
    r.coverage = 1.0 - 2.0 * binom_cdf_half(n, l - 1);
  }
  r.lower = s[r.rank_lower - 1];
  r.upper = s[r.rank_upper - 1];
  r.half_width = std::max(r.median - r.lower, r.upper - r.median);
  return r;
}

double geomean(const std::vector<double>& values) {
  if (values.empty()) return 0;
  double acc = 0;
  for (double v : values) acc += std::log(v);
  return std::exp(acc / static_cast<double>(values.size()));
}

}  // namespace kope::eval
