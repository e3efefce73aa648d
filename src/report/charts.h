// report/charts.h — the HTML report's plots, as <figure> elements holding inline SVG.
//
// Each function returns one <figure class="chart" data-chart="NAME"> with a caption that states
// what is plotted and over which set, an HTML legend, and one or more SVG panels. Data marks
// (points, bars, lines) carry class "mark" and a <title> with their value, which the page's
// self-test counts to prove a chart is not empty. Pure and thread-safe.
#pragma once

#include <string>

#include "report/figures.h"

namespace kope::report {

// Best speedup per operator vs the reference (filled circles) and vs the library (hollow
// diamonds), one row per operator, one colour per run, log scale.
std::string chart_speedups(const Analysis& an);
// fast_p as a function of p for every run (solid: vs reference, dashed: vs library).
std::string chart_fast_p(const Analysis& an);
// The incumbent's speedup after each attempt, one small panel per operator, runs overlaid.
std::string chart_iterations(const Analysis& an);
// Cumulative pass rate over the operators in the order each run started them.
std::string chart_stream(const Analysis& an);
// Mean prompt tokens per tier at each attempt number, one panel per run, shared scale.
std::string chart_tiers(const Analysis& an);
// Per-operator speedup ratios run / baseline with the geometric mean and its bootstrap interval.
std::string chart_comparison(const Analysis& an, const Comparison& c);

// A legend entry list for the runs (coloured swatches with labels).
std::string runs_legend(const Analysis& an);

}  // namespace kope::report
