#include "report/charts.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "report/svg.h"
#include "report/tables.h"

namespace kope::report {

namespace {

const char* const k_tiers[] = {"system", "hot", "warm", "cold"};

std::string svg_open(double w, double h, const std::string& label) {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {} {}\" width=\"{}\" height=\"{}\" "
      "role=\"img\" "
      "aria-label=\"{}\">",
      num(w), num(h), num(w), num(h), xml_escape(label));
}

std::string text(double x, double y, std::string_view s, std::string_view cls = "",
                 std::string_view anchor = "start") {
  return fmt::format("<text x=\"{}\" y=\"{}\"{}{}>{}</text>", num(x), num(y),
                     cls.empty() ? "" : fmt::format(" class=\"{}\"", cls),
                     anchor == "start" ? "" : fmt::format(" text-anchor=\"{}\"", anchor),
                     xml_escape(s));
}

std::string line(double x1, double y1, double x2, double y2, std::string_view cls) {
  return fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" class=\"{}\"/>", num(x1),
                     num(y1), num(x2), num(y2), cls);
}

std::string titled(std::string element_open, std::string_view title, std::string_view close) {
  return element_open + "<title>" + xml_escape(title) + "</title>" + std::string(close);
}

std::string fmt_x(double v) {
  return v >= 100 ? fmt::format("{:.0f}x", v) : fmt::format("{:.2f}x", v);
}
std::string fmt_pct(double v) {
  return fmt::format("{:.1f}%", 100 * v);
}

std::string figure_open(std::string_view name, std::string_view title, std::string_view caption) {
  return fmt::format(
      "<figure class=\"chart\" data-chart=\"{}\" "
      "id=\"chart-{}\"><figcaption><h3>{}</h3><p>{}</p></figcaption>",
      name, name, xml_escape(title), xml_escape(caption));
}

// Horizontal log axis at the bottom of a plot with vertical grid lines.
std::string log_x_axis(const LogScale& x, double top, double bottom, std::string_view label) {
  std::string s;
  for (double t : x.ticks()) {
    double px = x(t);
    s += line(px, top, px, bottom, std::abs(t - 1) < 1e-9 ? "axis-one" : "grid");
    s += text(px, bottom + 14, speedup_tick(t), "tick", "middle");
  }
  s += text((x.r0 + x.r1) / 2, bottom + 32, label, "axis-label", "middle");
  return s;
}

std::string diamond(double cx, double cy, double r) {
  return fmt::format("{},{} {},{} {},{} {},{}", num(cx), num(cy - r), num(cx + r), num(cy), num(cx),
                     num(cy + r), num(cx - r), num(cy));
}

// The set of positive speedups over every run's operators.
std::pair<double, double> speedup_domain(const std::vector<double>& values) {
  double lo = 1, hi = 1;
  for (double v : values) {
    if (v > 0) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  }
  return {lo / 1.3, hi * 1.3};
}

}  // namespace

std::string runs_legend(const Analysis& an) {
  std::string s = "<ul class=\"legend\">";
  for (size_t i = 0; i < an.figures.size(); ++i) {
    s += fmt::format("<li><span class=\"swatch\" style=\"background:{}\"></span>{}</li>",
                     run_colour(i), xml_escape(an.figures[i].label));
  }
  return s + "</ul>";
}

std::string chart_speedups(const Analysis& an) {
  const size_t R = an.figures.size();
  const size_t N = an.set.ops.size();
  std::vector<double> values;
  std::vector<std::pair<double, size_t>> order;
  for (size_t k = 0; k < N; ++k) {
    double best = 0;
    for (const auto& f : an.figures) {
      const OpFigures& o = f.ops[k];
      if (o.speedup_vs_reference)
        values.push_back(*o.speedup_vs_reference), best = std::max(best, *o.speedup_vs_reference);
      if (o.speedup_vs_library) values.push_back(*o.speedup_vs_library);
    }
    order.emplace_back(best, k);
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  auto [lo, hi] = speedup_domain(values);
  const double W = 980, left = 190, right = 30, top = 8, bottom = 44;
  const double band = std::max(20.0, 9.0 * static_cast<double>(R) + 8);
  const double H = top + band * static_cast<double>(N) + bottom;
  LogScale x{lo, hi, left, W - right};
  std::string s = svg_open(W, H, "Best speedup per operator, log scale");
  for (size_t i = 0; i < N; ++i) {
    if (i % 2)
      s += fmt::format("<rect x=\"0\" y=\"{}\" width=\"{}\" height=\"{}\" class=\"band\"/>",
                       num(top + band * i), num(W), num(band));
  }
  s += log_x_axis(x, top, top + band * static_cast<double>(N), "best kernel's speedup (log scale)");
  for (size_t i = 0; i < N; ++i) {
    size_t k = order[i].second;
    const spec::OpSpec& op = an.set.ops[k];
    double y0 = top + band * static_cast<double>(i);
    s += titled(fmt::format("<text x=\"{}\" y=\"{}\" class=\"row-label\" text-anchor=\"end\">",
                            num(left - 10), num(y0 + band / 2 + 4)),
                fmt::format("{} ({}, level {})", op.name, op.category, op.level),
                xml_escape(op.name) + "</text>");
    for (size_t r = 0; r < R; ++r) {
      const OpFigures& o = an.figures[r].ops[k];
      const std::string& label = an.figures[r].label;
      double cy = y0 + band * static_cast<double>(r + 1) / static_cast<double>(R + 1);
      std::string_view c = run_colour(r);
      if (!o.solved) {
        s += titled(
            fmt::format("<text x=\"{}\" y=\"{}\" class=\"mark miss\" style=\"fill:{}\" "
                        "text-anchor=\"middle\">",
                        num(left + 8), num(cy + 4), c),
            fmt::format("{} · {}: {}", label, o.name, o.selected ? "no correct kernel" : "not run"),
            "×</text>");
        continue;
      }
      if (o.speedup_vs_reference) {
        s += titled(
            fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"4.5\" class=\"mark\" fill=\"{}\">",
                        num(x(*o.speedup_vs_reference)), num(cy), c),
            fmt::format("{} · {}: {} vs reference", label, o.name, fmt_x(*o.speedup_vs_reference)),
            "</circle>");
      }
      if (o.speedup_vs_library) {
        s += titled(
            fmt::format("<polygon points=\"{}\" class=\"mark hollow\" stroke=\"{}\">",
                        diamond(x(*o.speedup_vs_library), cy, 5), c),
            fmt::format("{} · {}: {} vs library{}", label, o.name, fmt_x(*o.speedup_vs_library),
                        o.library_forced ? " (library forced: " + o.library_forced_by + ")" : std::string()),
            "</polygon>");
      }
    }
  }
  s += "</svg>";
  std::string out = figure_open(
      "speedup", "Speedup per operator",
      fmt::format("The best kernel of each operator of {}: ● vs the reference, ◇ vs the vendor "
                  "library (where one exists), × no correct kernel. Sorted by the best speedup "
                  "over the runs; the dark line is 1x.",
                  an.set.description()));
  out += runs_legend(an) + "<div class=\"scroll\">" + s + "</div></figure>";
  return out;
}

std::string chart_fast_p(const Analysis& an) {
  const int n = static_cast<int>(an.set.ops.size());
  double max_s = 2;
  for (const auto& f : an.figures) {
    for (const auto& o : f.ops) {
      if (o.speedup_vs_reference) max_s = std::max(max_s, *o.speedup_vs_reference);
      if (o.speedup_vs_library) max_s = std::max(max_s, *o.speedup_vs_library);
    }
  }
  double p_max = std::clamp(std::ceil(max_s * 1.1 * 2) / 2, 2.5, 10.0);
  const double W = 520, H = 330, left = 52, right = 18, top = 12, bottom = 46;
  LinearScale x{0, p_max, left, W - right};
  LinearScale y{0, 1, H - bottom, top};
  std::string s = svg_open(W, H, "fast_p curve");
  for (double t : y.ticks(4)) {
    s += line(left, y(t), W - right, y(t), "grid");
    s += text(left - 6, y(t) + 4, fmt::format("{:.0f}%", 100 * t), "tick", "end");
  }
  for (double t : x.ticks(6)) {
    s += line(x(t), top, x(t), H - bottom, t == 1 || t == 1.5 || t == 2 ? "guide" : "grid");
    s += text(x(t), H - bottom + 14, fmt::format("{}", num(t)), "tick", "middle");
  }
  if (p_max >= 1.5) s += line(x(1.5), top, x(1.5), H - bottom, "guide");
  s += text((left + W - right) / 2, H - 8, "p (speedup threshold)", "axis-label", "middle");
  s += fmt::format(
      "<text x=\"14\" y=\"{}\" class=\"axis-label\" text-anchor=\"middle\" transform=\"rotate(-90 "
      "14 {})\">share "
      "of operators</text>",
      num((top + H - bottom) / 2), num((top + H - bottom) / 2));
  for (size_t r = 0; r < an.figures.size(); ++r) {
    const RunFigures& f = an.figures[r];
    for (bool lib : {false, true}) {
      int denom = lib ? an.set.with_library : n;
      if (denom == 0) continue;
      auto curve = fast_p_curve(f, denom, lib, p_max);
      std::string d = fmt::format("M{} {}", num(x(curve[0].first)), num(y(curve[0].second)));
      for (size_t i = 1; i < curve.size(); ++i)
        d += fmt::format(" H{} V{}", num(x(curve[i].first)), num(y(curve[i].second)));
      d += fmt::format(" H{}", num(x(p_max)));
      s += titled(fmt::format("<path d=\"{}\" class=\"mark series{}\" stroke=\"{}\">", d,
                              lib ? " dashed" : "", run_colour(r)),
                  fmt::format("{}: fast_p vs {}", f.label, lib ? "library" : "reference"),
                  "</path>");
      if (lib) continue;
      std::vector<double> speedups;
      for (const auto& o : f.ops) {
        if (o.solved && o.speedup_vs_reference) speedups.push_back(*o.speedup_vs_reference);
      }
      for (double p : {0.0, 1.0, 1.5, 2.0}) {
        double v = fast_p(speedups, n, p);
        s += titled(fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"3.5\" class=\"mark\" fill=\"{}\">",
                                num(x(p)), num(y(v)), run_colour(r)),
                    fmt::format("{}: fast_{} = {}", f.label, num(p), fmt_pct(v)), "</circle>");
      }
    }
  }
  s += "</svg>";
  std::string out = figure_open("fast_p", "fast_p",
                                fmt::format("The share of all {} operators of the set whose best "
                                            "kernel is correct and more than p times faster than "
                                            "the reference (solid; dots at p = 0, 1, 1.5, 2) or "
                                            "than the library (dashed, over the {} with a "
                                            "library baseline).",
                                            n, an.set.with_library));
  return out + runs_legend(an) + s + "</figure>";
}

namespace {

// One operator of a run's task stream, with the cumulative figures after it.
struct StreamPoint {
  const OpFigures* op;
  double pass;    // cumulative pass rate over cases
  double solved;  // cumulative share of operators solved
};

// Each run's stream as cumulative points; `lo` becomes the lowest value, `max_n` the longest
// stream.
std::vector<std::vector<StreamPoint>> stream_series(const Analysis& an, double& lo, size_t& max_n) {
  std::vector<std::vector<StreamPoint>> series(an.figures.size());
  for (size_t r = 0; r < an.figures.size(); ++r) {
    const RunFigures& f = an.figures[r];
    int64_t passed = 0, total = 0;
    int solved = 0;
    for (size_t i = 0; i < f.stream.size(); ++i) {
      const OpFigures* o = f.op(f.stream[i]);
      passed += o->cases_passed;
      total += o->cases_total;
      solved += o->solved;
      StreamPoint p{o, total ? static_cast<double>(passed) / static_cast<double>(total) : 0,
                    static_cast<double>(solved) / static_cast<double>(i + 1)};
      lo = std::min({lo, p.pass, p.solved});
      series[r].push_back(p);
    }
    max_n = std::max(max_n, f.stream.size());
  }
  return series;
}

// Run r's two curves (pass rate solid, solved share dashed) and a dot per operator.
std::string stream_run_marks(const Analysis& an, size_t r, const std::vector<StreamPoint>& points,
                             const LinearScale& x, const LinearScale& y) {
  const std::string& label = an.figures[r].label;
  std::string pass_pts, solved_pts, dots;
  for (size_t i = 0; i < points.size(); ++i) {
    const StreamPoint& p = points[i];
    double px = x(static_cast<double>(i + 1));
    pass_pts += fmt::format("{}{},{}", i ? " " : "", num(px), num(y(p.pass)));
    solved_pts += fmt::format("{}{},{}", i ? " " : "", num(px), num(y(p.solved)));
    dots += titled(
        fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"3.2\" class=\"mark{}\" {}=\"{}\">", num(px),
                    num(y(p.pass)), p.op->solved ? "" : " hollow",
                    p.op->solved ? "fill" : "stroke", run_colour(r)),
        fmt::format("{} · {}. {}: {} ({} of {} cases); cumulative pass rate {}, solved {}", label,
                    i + 1, p.op->name, p.op->solved ? "solved" : "not solved", p.op->cases_passed,
                    p.op->cases_total, fmt_pct(p.pass), fmt_pct(p.solved)),
        "</circle>");
  }
  std::string s = titled(fmt::format("<polyline points=\"{}\" class=\"mark series dashed\" stroke=\"{}\">",
                                     solved_pts, run_colour(r)),
                         fmt::format("{}: share of operators solved so far", label), "</polyline>");
  s += fmt::format("<polyline points=\"{}\" class=\"series\" stroke=\"{}\"/>", pass_pts,
                   run_colour(r)) +
       dots;
  return s;
}

}  // namespace

std::string chart_stream(const Analysis& an) {
  size_t max_n = 1;
  double lo = 1;
  const std::vector<std::vector<StreamPoint>> series = stream_series(an, lo, max_n);
  // Zoom in when every value is high, so differences between runs stay visible.
  double y0 = lo >= 0.5 ? std::floor((lo - 0.02) * 10) / 10 : 0;
  const double W = 520, H = 330, left = 52, right = 18, top = 12, bottom = 46;
  LinearScale x{1, static_cast<double>(std::max<size_t>(max_n, 2)), left + 6, W - right};
  LinearScale y{y0, 1, H - bottom, top};
  std::string s = svg_open(W, H, "Cumulative pass rate over the task stream");
  for (double t : y.ticks(y0 > 0 ? 5 : 4)) {
    s += line(left, y(t), W - right, y(t), "grid");
    s += text(left - 6, y(t) + 4, fmt::format("{:.0f}%", 100 * t), "tick", "end");
  }
  for (double t : x.ticks(8)) {
    if (std::abs(t - std::round(t)) > 1e-9) continue;
    s += line(x(t), top, x(t), H - bottom, "grid");
    s += text(x(t), H - bottom + 14, fmt::format("{}", static_cast<int>(std::round(t))), "tick",
              "middle");
  }
  s += text((left + W - right) / 2, H - 8, "operators in the order the run started them",
            "axis-label", "middle");
  s += fmt::format(
      "<text x=\"14\" y=\"{}\" class=\"axis-label\" text-anchor=\"middle\" transform=\"rotate(-90 "
      "14 {})\">"
      "cumulative share</text>",
      num((top + H - bottom) / 2), num((top + H - bottom) / 2));
  for (size_t r = 0; r < series.size(); ++r) {
    if (!series[r].empty()) s += stream_run_marks(an, r, series[r], x, y);
  }
  s += "</svg>";
  std::string out = figure_open(
      "stream", "Cumulative pass over the task stream",
      "After each operator, in the order each run started them: the pass rate over the cases of "
      "the operators so far "
      "(solid; filled dot: the operator was solved, hollow: not) and the share of those operators "
      "solved (dashed). "
      "With memory, later operators can start from what earlier ones taught: a curve that rises or "
      "holds while "
      "another falls is the sign. Operators a run never started are not in its stream.");
  return out + runs_legend(an) + s + "</figure>";
}

std::string chart_iterations(const Analysis& an) {
  std::string panels;
  const double W = 236, H = 150, left = 40, right = 8, top = 22, bottom = 22;
  for (size_t k = 0; k < an.set.ops.size(); ++k) {
    const spec::OpSpec& op = an.set.ops[k];
    int max_k = 1;
    std::vector<double> values;
    for (const auto& f : an.figures) {
      const OpFigures& o = f.ops[k];
      max_k = std::max(max_k, static_cast<int>(o.iterations.size()));
      for (const auto& it : o.iterations) {
        if (it.best_speedup) values.push_back(*it.best_speedup);
      }
    }
    auto [lo, hi] = speedup_domain(values);
    LinearScale x{1, static_cast<double>(std::max(max_k, 2)), left + 4, W - right - 4};
    LogScale y{lo, hi, H - bottom, top};
    std::string s = svg_open(W, H, fmt::format("{}: best speedup over attempts", op.name));
    s += titled(fmt::format("<text x=\"{}\" y=\"14\" class=\"panel-title\">", num(left)),
                fmt::format("{} ({}, level {})", op.name, op.category, op.level),
                xml_escape(op.name) + "</text>");
    auto yt = y.ticks();
    if (yt.size() > 4) {
      std::vector<double> thin;
      for (size_t i = 0; i < yt.size(); i += (yt.size() + 3) / 4) thin.push_back(yt[i]);
      yt = thin;
    }
    for (double t : yt) {
      s += line(left, y(t), W - right, y(t), std::abs(t - 1) < 1e-9 ? "axis-one" : "grid");
      s += text(left - 4, y(t) + 3, speedup_tick(t), "tick small", "end");
    }
    for (int i = 1; i <= max_k; ++i) {
      if (max_k > 10 && i % 2 == 0 && i != max_k) continue;
      s += text(x(i), H - bottom + 12, fmt::format("{}", i), "tick small", "middle");
    }
    bool any = false;
    for (size_t r = 0; r < an.figures.size(); ++r) {
      const OpFigures& o = an.figures[r].ops[k];
      std::string d, dots;
      std::optional<double> prev;
      for (const auto& it : o.iterations) {
        if (!it.best_speedup) continue;
        double px = x(it.iteration), py = y(*it.best_speedup);
        if (d.empty()) {
          d = fmt::format("M{} {}", num(px), num(py));
        } else {
          d += fmt::format(" H{} V{}", num(px), num(py));
        }
        if (!prev || *prev != *it.best_speedup) {
          dots +=
              titled(fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"3\" class=\"mark\" fill=\"{}\">",
                                 num(px), num(py), run_colour(r)),
                     fmt::format("{} · {} attempt {}: best {}", an.figures[r].label, op.name,
                                 it.iteration, fmt_x(*it.best_speedup)),
                     "</circle>");
        }
        prev = it.best_speedup;
      }
      if (d.empty()) continue;
      any = true;
      d += fmt::format(" H{}", num(x(static_cast<double>(o.iterations.size()))));
      s += fmt::format("<path d=\"{}\" class=\"series\" stroke=\"{}\"/>", d, run_colour(r)) + dots;
    }
    if (!any) s += text(W / 2, H / 2 + 4, "no correct kernel", "empty-note", "middle");
    s += "</svg>";
    panels += "<div class=\"panel\">" + s + "</div>";
  }
  std::string out = figure_open(
      "iterations", "Best speedup over attempts",
      "For each operator of the set, the incumbent's speedup vs the reference after each attempt "
      "(log scale; a dot marks a new incumbent; the line starts at the first correct kernel).");
  return out + runs_legend(an) + "<div class=\"panels\">" + panels + "</div></figure>";
}

namespace {

// The summed tokens per tier of the attempts with one number, and how many attempts that was.
struct TierColumn {
  std::map<std::string, double> sum;
  int n = 0;
};

// Each run's columns (attempt number k at index k-1); `max_total` becomes the largest mean
// total, `max_k` the most attempts.
std::vector<std::vector<TierColumn>> tier_columns(const Analysis& an, double& max_total, int& max_k) {
  std::vector<std::vector<TierColumn>> runs(an.figures.size());
  for (size_t r = 0; r < an.figures.size(); ++r) {
    for (const auto& o : an.figures[r].ops) {
      for (const auto& it : o.iterations) {
        auto idx = static_cast<size_t>(it.iteration - 1);
        if (runs[r].size() <= idx) runs[r].resize(idx + 1);
        TierColumn& c = runs[r][idx];
        ++c.n;
        for (const auto& [tier, tokens] : it.tier_tokens)
          c.sum[tier] += static_cast<double>(tokens);
      }
    }
    max_k = std::max(max_k, static_cast<int>(runs[r].size()));
    for (const auto& c : runs[r]) {
      double t = 0;
      for (const auto& [tier, v] : c.sum) t += c.n ? v / c.n : 0;
      max_total = std::max(max_total, t);
    }
  }
  return runs;
}

// The bars of run r: one stacked column per attempt number, a rect per tier.
std::string tier_bars(const Analysis& an, size_t r, const std::vector<TierColumn>& columns, const LinearScale& y,
                      double left, double slot) {
  std::string s;
  for (size_t i = 0; i < columns.size(); ++i) {
    const auto& c = columns[i];
    if (c.n == 0) continue;
    double base = 0;
    double bx = left + slot * static_cast<double>(i) + slot * 0.15;
    for (const char* tier : k_tiers) {
      auto it = c.sum.find(tier);
      double v = it == c.sum.end() ? 0 : it->second / c.n;
      if (v <= 0) continue;
      s += titled(
          fmt::format(
              "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" class=\"mark\" fill=\"{}\">",
              num(bx), num(y(base + v)), num(slot * 0.7),
              num(std::max(0.5, y(base) - y(base + v))), tier_colour(tier)),
          fmt::format("{} · attempt {}: {} tier {:.0f} tokens (mean over {} operators)",
                      an.figures[r].label, i + 1, tier, v, c.n),
          "</rect>");
      base += v;
    }
  }
  return s;
}

}  // namespace

std::string chart_tiers(const Analysis& an) {
  double max_total = 1;
  int max_k = 1;
  const std::vector<std::vector<TierColumn>> runs = tier_columns(an, max_total, max_k);
  const double W = 320, H = 230, left = 56, right = 10, top = 26, bottom = 34;
  LinearScale y{0, max_total * 1.05, H - bottom, top};
  std::string panels;
  for (size_t r = 0; r < an.figures.size(); ++r) {
    std::string s =
        svg_open(W, H, fmt::format("{}: prompt tokens per tier per attempt", an.figures[r].label));
    s += fmt::format("<text x=\"{}\" y=\"15\" class=\"panel-title\" style=\"fill:{}\">{}</text>",
                     num(left), run_colour(r), xml_escape(an.figures[r].label));
    for (double t : y.ticks(4)) {
      s += line(left, y(t), W - right, y(t), "grid");
      s += text(left - 5, y(t) + 4,
                t >= 10000 ? fmt::format("{:.0f}k", t / 1000) : fmt::format("{:.0f}", t),
                "tick small", "end");
    }
    double slot = (W - right - left) / max_k;
    for (int k = 1; k <= max_k; ++k) {
      if (max_k <= 12 || k % 2 == 1)
        s += text(left + slot * (k - 0.5), H - bottom + 13, fmt::format("{}", k), "tick small",
                  "middle");
    }
    s += text((left + W - right) / 2, H - 6, "attempt", "axis-label", "middle");
    if (runs[r].empty()) s += text(W / 2, H / 2, "no attempts", "empty-note", "middle");
    s += tier_bars(an, r, runs[r], y, left, slot);
    s += "</svg>";
    panels += "<div class=\"panel\">" + s + "</div>";
  }
  std::string legend = "<ul class=\"legend\">";
  for (const char* tier : k_tiers) {
    legend += fmt::format("<li><span class=\"swatch\" style=\"background:{}\"></span>{}</li>",
                          tier_colour(tier), tier);
  }
  legend += "</ul>";
  std::string out = figure_open("tiers", "Prompt tokens per tier per attempt",
                                "Mean estimated prompt tokens of each admission tier (system "
                                "prompt; hot: spec, incumbent, feedback; warm: memory "
                                "retrieved for the state; cold: notes and other categories) at "
                                "each attempt number, over the operators of the set "
                                "that reached it. Same scale in every panel.");
  return out + legend + "<div class=\"panels\">" + panels + "</div></figure>";
}

std::string chart_comparison(const Analysis& an, const Comparison& c) {
  size_t bi = 0, oi = 0;
  for (size_t i = 0; i < an.figures.size(); ++i) {
    if (an.figures[i].label == c.baseline) bi = i;
    if (an.figures[i].label == c.other) oi = i;
  }
  std::vector<const OpPair*> rows;
  for (const auto& p : c.ops) {
    if (p.speedup_ratio) rows.push_back(&p);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const OpPair* a, const OpPair* b) {
    return *a->speedup_ratio > *b->speedup_ratio;
  });
  const PairedMetric* geo = nullptr;
  for (const auto& m : c.metrics) {
    if (m.key == "geomean_speedup_vs_reference") geo = &m;
  }
  std::string name = fmt::format("comparison-{}", oi);
  std::string caption = fmt::format(
      "{} / {}: the ratio of the best speedups vs the reference, for each of the {} operators both "
      "solved (log scale; "
      "right of 1x: {} is faster). The shaded band is the geometric mean's {}.",
      c.other, c.baseline, rows.size(), c.other, bootstrap_words(an.bootstrap));
  std::string out = figure_open(
      name, fmt::format("{} vs {}: per-operator speedup ratio", c.other, c.baseline), caption);
  if (rows.empty())
    return out + "<p class=\"empty-note\">No operator was solved by both runs.</p></figure>";
  std::vector<double> values;
  for (const auto* p : rows) values.push_back(*p->speedup_ratio);
  if (geo && geo->interval) values.insert(values.end(), {geo->interval->low, geo->interval->high});
  auto [lo, hi] = speedup_domain(values);
  const double W = 980, left = 190, right = 80, top = 26, bottom = 44, band = 18;
  const double H = top + band * static_cast<double>(rows.size()) + bottom;
  LogScale x{lo, hi, left, W - right};
  std::string s = svg_open(W, H, caption);
  double y_end = top + band * static_cast<double>(rows.size());
  if (geo && geo->interval) {
    const Interval& iv = *geo->interval;
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" class=\"ci-band\"/>",
                     num(x(iv.low)), num(top), num(std::max(1.0, x(iv.high) - x(iv.low))),
                     num(y_end - top));
    s += line(x(iv.estimate), top - 4, x(iv.estimate), y_end, "estimate");
    s += text(x(iv.estimate), top - 8,
              fmt::format("geomean {} [{}, {}]", fmt_x(iv.estimate), fmt_x(iv.low), fmt_x(iv.high)),
              "note", "middle");
  }
  s += log_x_axis(x, top, y_end,
                  fmt::format("speedup ratio {} / {} (log scale)", c.other, c.baseline));
  for (size_t i = 0; i < rows.size(); ++i) {
    const OpPair& p = *rows[i];
    double y0 = top + band * static_cast<double>(i);
    double r = *p.speedup_ratio;
    s += text(left - 10, y0 + band / 2 + 4, p.op, "row-label", "end");
    double x0 = x(1), x1 = x(r);
    s +=
        titled(fmt::format(
                   "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" class=\"mark\" fill=\"{}\">",
                   num(std::min(x0, x1)), num(y0 + 3), num(std::max(1.5, std::abs(x1 - x0))),
                   num(band - 6), run_colour(r >= 1 ? oi : bi)),
               fmt::format("{}: {} {} vs {} {} (ratio {})", p.op, c.other,
                           fmt_x(*p.b->speedup_vs_reference), c.baseline,
                           fmt_x(*p.a->speedup_vs_reference), fmt_x(r)),
               "</rect>");
    s += text(r >= 1 ? x1 + 5 : x0 + 5, y0 + band / 2 + 4, fmt_x(r), "value", "start");
  }
  s += "</svg>";
  std::string legend = fmt::format(
      "<ul class=\"legend\"><li><span class=\"swatch\" style=\"background:{}\"></span>{} "
      "faster</li>"
      "<li><span class=\"swatch\" style=\"background:{}\"></span>{} faster</li></ul>",
      run_colour(oi), xml_escape(c.other), run_colour(bi), xml_escape(c.baseline));
  return out + legend + "<div class=\"scroll\">" + s + "</div></figure>";
}

}  // namespace kope::report
