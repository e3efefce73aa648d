#include "report/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kope::report {

std::optional<double> geomean(std::span<const double> v) {
  if (v.empty()) return std::nullopt;
  double s = 0;
  for (double x : v) s += std::log(std::max(x, 1e-300));
  return std::exp(s / static_cast<double>(v.size()));
}

std::optional<double> mean(std::span<const double> v) {
  if (v.empty()) return std::nullopt;
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

std::optional<double> median(std::vector<double> v) {
  if (v.empty()) return std::nullopt;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double fast_p(std::span<const double> speedups, int n_ops, double p) {
  if (n_ops <= 0) return 0;
  int n = 0;
  for (double s : speedups) n += s > p ? 1 : 0;
  return static_cast<double>(n) / n_ops;
}

namespace {

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

// Linear interpolation between order statistics (type 7, as R's and NumPy's default).
double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.size() == 1) return sorted[0];
  double h = q * static_cast<double>(sorted.size() - 1);
  auto lo = static_cast<size_t>(std::floor(h));
  size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (h - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

}  // namespace

Rng::Rng(uint64_t seed) {
  uint64_t x = seed;
  for (auto& s : m_s) s = splitmix64(x);
}

uint64_t Rng::next() {
  uint64_t result = rotl(m_s[1] * 5, 7) * 9;
  uint64_t t = m_s[1] << 17;
  m_s[2] ^= m_s[0];
  m_s[3] ^= m_s[1];
  m_s[1] ^= m_s[2];
  m_s[0] ^= m_s[3];
  m_s[2] ^= t;
  m_s[3] = rotl(m_s[3], 45);
  return result;
}

uint64_t Rng::below(uint64_t n) {
  // Reject the top partial block so every residue is equally likely.
  uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  for (;;) {
    uint64_t x = next();
    if (x < limit) return x % n;
  }
}

std::optional<Interval> bootstrap(int n,
                                  const std::function<double(std::span<const int>)>& statistic,
                                  const BootstrapOptions& options) {
  if (n <= 0) return std::nullopt;
  std::vector<int> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  Interval out;
  out.n = n;
  out.estimate = statistic(idx);
  if (!std::isfinite(out.estimate)) return std::nullopt;
  Rng rng(options.seed);
  std::vector<double> values;
  values.reserve(static_cast<size_t>(std::max(0, options.resamples)));
  for (int r = 0; r < options.resamples; ++r) {
    for (auto& i : idx) i = static_cast<int>(rng.below(static_cast<uint64_t>(n)));
    double v = statistic(idx);
    if (std::isfinite(v)) values.push_back(v);
  }
  out.resamples = static_cast<int>(values.size());
  if (values.empty()) {
    out.low = out.high = out.estimate;
    return out;
  }
  std::sort(values.begin(), values.end());
  double alpha = (1 - options.confidence) / 2;
  out.low = quantile(values, alpha);
  out.high = quantile(values, 1 - alpha);
  return out;
}

std::optional<Interval> bootstrap_mean_difference(std::span<const double> a,
                                                  std::span<const double> b,
                                                  const BootstrapOptions& options) {
  if (a.size() != b.size()) return std::nullopt;
  return bootstrap(
      static_cast<int>(a.size()),
      [&](std::span<const int> idx) {
        double s = 0;
        for (int i : idx) s += b[static_cast<size_t>(i)] - a[static_cast<size_t>(i)];
        return s / static_cast<double>(idx.size());
      },
      options);
}

std::optional<Interval> bootstrap_geomean_ratio(std::span<const double> a,
                                                std::span<const double> b,
                                                const BootstrapOptions& options) {
  if (a.size() != b.size()) return std::nullopt;
  std::vector<double> logs(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (!(a[i] > 0) || !(b[i] > 0)) return std::nullopt;
    logs[i] = std::log(b[i] / a[i]);
  }
  return bootstrap(
      static_cast<int>(a.size()),
      [&](std::span<const int> idx) {
        double s = 0;
        for (int i : idx) s += logs[static_cast<size_t>(i)];
        return std::exp(s / static_cast<double>(idx.size()));
      },
      options);
}

std::optional<Interval> bootstrap_ratio_of_sums(std::span<const double> a,
                                                std::span<const double> b,
                                                const BootstrapOptions& options) {
  if (a.size() != b.size()) return std::nullopt;
  return bootstrap(
      static_cast<int>(a.size()),
      [&](std::span<const int> idx) {
        double sa = 0, sb = 0;
        for (int i : idx) {
          sa += a[static_cast<size_t>(i)];
          sb += b[static_cast<size_t>(i)];
        }
        return sa != 0 ? sb / sa : std::nan("");
      },
      options);
}

std::optional<Interval> bootstrap_rate_difference(std::span<const double> a_num,
                                                  std::span<const double> a_den,
                                                  std::span<const double> b_num,
                                                  std::span<const double> b_den,
                                                  const BootstrapOptions& options) {
  size_t n = a_num.size();
  if (a_den.size() != n || b_num.size() != n || b_den.size() != n) return std::nullopt;
  return bootstrap(
      static_cast<int>(n),
      [&](std::span<const int> idx) {
        double an = 0, ad = 0, bn = 0, bd = 0;
        for (int i : idx) {
          auto k = static_cast<size_t>(i);
          an += a_num[k];
          ad += a_den[k];
          bn += b_num[k];
          bd += b_den[k];
        }
        return ad > 0 && bd > 0 ? bn / bd - an / ad : std::nan("");
      },
      options);
}

}  // namespace kope::report
