// report/stats.h — the small statistics reports use: means over stated sets, fast_p, and
// seeded, deterministic bootstrap confidence intervals for paired differences.
//
// Everything here is pure and thread-safe. The bootstrap uses its own generator (SplitMix64
// seeding xoshiro256**, bounded draws by rejection), so a seed gives the same interval on every
// platform and standard library.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

namespace kope::report {

// Geometric mean of positive values; nullopt for an empty list. Values <= 0 are clamped to a
// tiny positive number (a caller that has zeros should not be asking for a geomean).
std::optional<double> geomean(std::span<const double> values);
std::optional<double> mean(std::span<const double> values);
std::optional<double> median(std::vector<double> values);

// fast_p: the share of `n_ops` operators that are correct and more than p times faster than
// the baseline. `speedups` holds one entry per solved operator (unsolved ones are simply absent
// and count as not fast). Strictly greater: a speedup of exactly p does not count. 0 when
// n_ops is 0.
double fast_p(std::span<const double> speedups, int n_ops, double p);

// A deterministic pseudo-random generator (xoshiro256**, seeded through SplitMix64).
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t next();
  // Uniform in [0, n) without modulo bias; n > 0.
  uint64_t below(uint64_t n);

 private:
  uint64_t m_s[4];
};

struct Interval {
  double estimate = 0;  // the statistic on the original sample
  double low = 0;       // percentile bounds of the bootstrap distribution
  double high = 0;
  int resamples = 0;
  int n = 0;  // sample size (pairs)
};

struct BootstrapOptions {
  int resamples = 10000;
  uint64_t seed = 1;
  double confidence = 0.95;
};

// Percentile bootstrap over indices 0..n-1: `statistic` is evaluated on the original sample
// (the identity index list) and on `resamples` resamples drawn with replacement; the interval is
// the (1-c)/2 and (1+c)/2 quantiles (linear interpolation) of the finite resampled values.
// nullopt when n is 0 or the original statistic is not finite. Resamples whose statistic is
// not finite (e.g. a ratio with a zero denominator) are dropped; `resamples` reports how many
// were kept.
std::optional<Interval> bootstrap(int n,
                                  const std::function<double(std::span<const int>)>& statistic,
                                  const BootstrapOptions& options);

// Paired conveniences over equally long vectors a (baseline) and b:
// the mean of b[i] - a[i];
std::optional<Interval> bootstrap_mean_difference(std::span<const double> a,
                                                  std::span<const double> b,
                                                  const BootstrapOptions& options);
// the geometric mean of b[i] / a[i] (all values positive);
std::optional<Interval> bootstrap_geomean_ratio(std::span<const double> a,
                                                std::span<const double> b,
                                                const BootstrapOptions& options);
// sum(b) / sum(a) (a ratio of totals, e.g. tokens);
std::optional<Interval> bootstrap_ratio_of_sums(std::span<const double> a,
                                                std::span<const double> b,
                                                const BootstrapOptions& options);
// sum(b_num)/sum(b_den) - sum(a_num)/sum(a_den) (a difference of pooled rates, e.g. the pass
// rate over cases, resampling operators).
std::optional<Interval> bootstrap_rate_difference(std::span<const double> a_num,
                                                  std::span<const double> a_den,
                                                  std::span<const double> b_num,
                                                  std::span<const double> b_den,
                                                  const BootstrapOptions& options);

}  // namespace kope::report
