#include "report/svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace kope::report {

std::string xml_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string num(double v) {
  if (!std::isfinite(v)) return "0";
  double r = std::round(v * 100) / 100;
  if (r == 0) r = 0;  // no "-0"
  std::string s = fmt::format("{:.2f}", r);
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

double LinearScale::operator()(double v) const {
  if (d1 == d0) return (r0 + r1) / 2;
  return r0 + (v - d0) / (d1 - d0) * (r1 - r0);
}

std::vector<double> LinearScale::ticks(int count) const {
  std::vector<double> out;
  double span = d1 - d0;
  if (!(span > 0) || count < 1) return {d0};
  double raw = span / count;
  double mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= m * mag * 1.0000001) {
      step = m * mag;
      break;
    }
  }
  for (double t = std::ceil(d0 / step) * step; t <= d1 + step * 1e-9; t += step)
    out.push_back(std::abs(t) < step * 1e-9 ? 0 : t);
  return out;
}

double LogScale::operator()(double v) const {
  if (!(v > 0) || !(d0 > 0) || !(d1 > d0)) return r0;
  return r0 + (std::log(v) - std::log(d0)) / (std::log(d1) - std::log(d0)) * (r1 - r0);
}

std::vector<double> LogScale::ticks() const {
  std::vector<double> out;
  if (!(d0 > 0) || !(d1 > d0)) return out;
  if (d1 / d0 <= 300) {
    for (int e = static_cast<int>(std::floor(std::log2(d0)));
         e <= static_cast<int>(std::ceil(std::log2(d1))); ++e) {
      double t = std::ldexp(1.0, e);
      if (t >= d0 * 0.999 && t <= d1 * 1.001) out.push_back(t);
    }
    // Wide power-of-two ranges: keep every other tick so labels do not collide.
    if (out.size() > 9) {
      std::vector<double> thin;
      for (double t : out) {
        if (std::lround(std::log2(t)) % 2 == 0) thin.push_back(t);
      }
      out = thin;
    }
    return out;
  }
  for (int e = static_cast<int>(std::floor(std::log10(d0)));
       e <= static_cast<int>(std::ceil(std::log10(d1))); ++e) {
    for (double m : {1.0, 2.0, 5.0}) {
      double t = m * std::pow(10, e);
      if (t >= d0 * 0.999 && t <= d1 * 1.001 && (m == 1.0 || d1 / d0 < 1e4)) out.push_back(t);
    }
  }
  return out;
}

std::string speedup_tick(double v) {
  if (v >= 10) return fmt::format("{:.0f}x", v);
  if (v >= 1) return fmt::format("{}x", num(v));
  return fmt::format("{}x", num(v) == "0" ? fmt::format("{:.3f}", v) : num(v));
}

std::string_view run_colour(size_t i) {
  static const char* k[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                            "#E69F00", "#56B4E9", "#000000"};
  return k[i % (sizeof k / sizeof k[0])];
}

std::string_view outcome_colour(std::string_view label) {
  if (label == "effective") return "#009E73";
  if (label == "partial") return "#56B4E9";
  if (label == "ineffective") return "#E69F00";
  if (label == "negative") return "#D55E00";
  return "#999999";
}

std::string_view failed_colour() {
  return "#6b6b6b";
}

std::string_view tier_colour(std::string_view tier) {
  if (tier == "system") return "#9e9e9e";
  if (tier == "hot") return "#D55E00";
  if (tier == "warm") return "#E69F00";
  if (tier == "cold") return "#0072B2";
  return "#CC79A7";
}

}  // namespace kope::report
