// report/svg.h — the pieces the report's inline SVG charts are built from: escaping, scales
// with readable ticks, and the palettes.
//
// Charts are generated in C++ as text, so the HTML report needs no charting library and works
// offline. Colours come from the Okabe–Ito palette (distinguishable with the common colour
// vision deficiencies); every mark also carries a <title> so values can be read without colour.
// Pure and thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kope::report {

// Escapes text for HTML/XML content and attribute values.
std::string xml_escape(std::string_view s);

// Numbers in SVG coordinates: at most two decimals, no exponent.
std::string num(double v);

struct LinearScale {
  double d0 = 0, d1 = 1;  // domain
  double r0 = 0, r1 = 1;  // range (pixels)
  double operator()(double v) const;
  // About `count` round ticks (1, 2 or 5 times a power of ten) within the domain.
  std::vector<double> ticks(int count = 5) const;
};

struct LogScale {
  double d0 = 0.5, d1 = 2;  // domain, both > 0
  double r0 = 0, r1 = 1;
  double operator()(double v) const;  // values <= 0 map to r0
  // Powers of two for narrow domains (x0.25, x0.5, x1, x2, ...), 1-2-5 decades for wide ones.
  std::vector<double> ticks() const;
};

// "0.5x", "1x", "2x", "10x", "100x".
std::string speedup_tick(double v);

// Series colours (Okabe–Ito order, black last); index wraps.
std::string_view run_colour(size_t i);
// Outcome labels of correct attempts; failed verdicts use failed_colour().
std::string_view outcome_colour(std::string_view label);
std::string_view failed_colour();
std::string_view tier_colour(std::string_view tier);

}  // namespace kope::report
