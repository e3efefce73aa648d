#include "report/lineage.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>

#include "util/diff.h"
#include "report/svg.h"
#include "util/strings.h"

namespace kope::report {

using nlohmann::json;
using util::DiffLine;
using util::DiffOptions;
using util::line_diff;
using util::Diff;

namespace {

json opt(const std::optional<double>& v) {
  return v ? json(*v) : json(nullptr);
}

// Text colour with enough contrast on a fill.
std::string_view ink_for(std::string_view fill) {
  return fill == "#56B4E9" || fill == "#E69F00" ? "#000000" : "#ffffff";
}

json diff_json(const Diff& d, std::string against) {
  json lines = json::array();
  for (const auto& l : d.lines) {
    const char* kind = l.kind == DiffLine::Kind::added     ? "+"
                       : l.kind == DiffLine::Kind::removed ? "-"
                       : l.kind == DiffLine::Kind::hunk    ? "@"
                                                           : " ";
    lines.push_back(json::array({kind, l.text}));
  }
  return json{{"against", std::move(against)}, {"added", d.added},
              {"removed", d.removed},          {"lines", lines},
              {"truncated", d.truncated},      {"minimal", d.minimal}};
}

// Where each attempt's node sits in the tree: leaves take consecutive slots, a parent sits over
// its children's span, one row per depth. x() and y() place an iteration (one never placed sits
// at slot 0, depth 0).
struct TreeLayout {
  static constexpr double dx = 58, dy = 66, pad_x = 34, pad_y = 30, radius = 15;
  std::map<int, double> slot;
  std::map<int, int> depth;
  double next = 0;  // slots used
  int max_depth = 0;

  double x(int k) { return pad_x + dx * slot[k]; }
  double y(int k) { return pad_y + dy * depth[k]; }
  double width() const { return std::max(320.0, pad_x * 2 + dx * std::max(0.0, next - 1)); }
  double height() const { return pad_y * 2 + dy * max_depth; }
};

// The tidy layout of the attempts' tree.
TreeLayout layout_tree(const std::vector<run::Attempt>& attempts) {
  // Children by parent iteration; roots are attempts without a parent in this run.
  std::map<int, std::vector<int>> children;
  std::vector<int> roots;
  for (const auto& a : attempts) {
    if (a.parent_iteration && *a.parent_iteration >= 1 && *a.parent_iteration < a.iteration) {
      children[*a.parent_iteration].push_back(a.iteration);
    } else {
      roots.push_back(a.iteration);
    }
  }
  // Tidy layout: leaves take consecutive slots, a parent sits over its children's span.
  TreeLayout layout;
  std::function<void(int, int)> place = [&](int k, int d) {
    layout.depth[k] = d;
    layout.max_depth = std::max(layout.max_depth, d);
    auto it = children.find(k);
    if (it == children.end()) {
      layout.slot[k] = layout.next++;
      return;
    }
    for (int c : it->second) place(c, d + 1);
    layout.slot[k] = (layout.slot[it->second.front()] + layout.slot[it->second.back()]) / 2;
  };
  for (int r : roots) place(r, 0);
  return layout;
}

// The edges from each attempt to its parent, as SVG paths (repair edges dashed).
std::string edges_svg(const std::vector<run::Attempt>& attempts, TreeLayout& layout) {
  const double radius = TreeLayout::radius;
  std::string s;
  for (const auto& a : attempts) {
    if (!a.parent_iteration || !layout.slot.contains(*a.parent_iteration)) continue;
    int p = *a.parent_iteration;
    double x1 = layout.x(p), y1 = layout.y(p) + radius, x2 = layout.x(a.iteration),
           y2 = layout.y(a.iteration) - radius;
    double my = (y1 + y2) / 2;
    s += fmt::format("<path d=\"M{} {} C{} {} {} {} {} {}\" class=\"edge{}\"/>", num(x1), num(y1),
                     num(x1), num(my), num(x2), num(my), num(x2), num(y2),
                     a.stage == memory::Stage::repair ? " dashed" : "");
  }
  return s;
}

// One attempt's node as SVG: a circle coloured by its label (a square when it failed), a ring
// when it is the best kernel, its iteration inside; `key` is the view's.
std::string node_svg(const run::Attempt& a, const std::string& key, bool is_best,
                     TreeLayout& layout) {
  const double radius = TreeLayout::radius;
  double x = layout.x(a.iteration), y = layout.y(a.iteration);
  bool ok = a.correct();
  std::string fill(ok ? outcome_colour(run::label_name(a.outcome)) : failed_colour());
  std::string aria = fmt::format(
      "attempt {}: {} {}, {}{}", a.iteration, memory::stage_name(a.stage),
      eval::verdict_name(a.verdict), ok ? run::label_name(a.outcome) : "failed",
      ok && a.speedup_vs_reference ? fmt::format(", {:.2f}x vs reference", *a.speedup_vs_reference)
                                   : "");
  std::string s = fmt::format(
      "<g class=\"node mark\" data-node=\"{}/{}\" tabindex=\"0\" role=\"button\" "
      "aria-label=\"{}\">",
      xml_escape(key), a.iteration, xml_escape(aria));
  s += "<title>" + xml_escape(aria + (a.optimisation.empty() ? "" : " — " + a.optimisation)) +
       "</title>";
  if (is_best) {
    s += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"{}\" class=\"best-ring\"/>", num(x), num(y),
                     num(radius + 4.5));
  }
  if (ok) {
    s += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"{}\" fill=\"{}\" class=\"shape\"/>", num(x),
                     num(y), num(radius), fill);
  } else {
    s += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"3\" fill=\"{}\" "
        "class=\"shape\"/>",
        num(x - radius + 1), num(y - radius + 1), num(2 * radius - 2), num(2 * radius - 2), fill);
  }
  s += fmt::format(
      "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" class=\"node-label\" "
      "fill=\"{}\">{}</text></g>",
      num(x), num(y + 4.5), ink_for(fill), a.iteration);
  return s;
}

// The attempt's timings, one object per timed case.
json timings_json(const run::Attempt& a) {
  json timings = json::array();
  for (const auto& t : a.timings) {
    timings.push_back({{"case", t.label.empty() ? fmt::format("case {}", t.case_index) : t.label},
                       {"median_us", t.median_us},
                       {"ci95_us", t.ci95_us},
                       {"reference_us", t.reference_us},
                       {"library_us", opt(t.library_us)},
                       {"roofline_us", t.roofline_us},
                       {"fraction_of_roofline", t.fraction_of_roofline}});
  }
  return timings;
}

// The line diff of the attempt's source against its parent's (or against nothing when it has no
// parent in this run), or {"missing": why} when a source is not in the run directory.
json attempt_diff_json(const RunData& run, const std::vector<run::Attempt>& attempts,
                       const run::Attempt& a, const LineageOptions& options) {
  json d;
  auto code = run.candidate(a.code_file);
  DiffOptions dopt;
  dopt.max_lines = options.max_diff_lines;
  if (!a.has_code || !code) {
    d = json{{"missing", a.has_code ? fmt::format("{} is not in the run directory", a.code_file)
                                    : "the answer held no code"}};
  } else if (a.parent_iteration && *a.parent_iteration >= 1 &&
             *a.parent_iteration <= static_cast<int>(attempts.size())) {
    const run::Attempt& p = attempts[static_cast<size_t>(*a.parent_iteration - 1)];
    auto parent_code = run.candidate(p.code_file);
    if (parent_code) {
      d = diff_json(line_diff(*parent_code, *code, dopt), fmt::format("attempt {}", p.iteration));
    } else {
      d = json{{"missing",
                fmt::format("the parent's source ({}) is not in the run directory", p.code_file)}};
    }
  } else {
    std::string against =
        a.source_case_id
            ? fmt::format("nothing in this run (replayed from memory case {})", *a.source_case_id)
            : "nothing (a fresh draft: the whole source)";
    d = diff_json(line_diff("", *code, dopt), against);
  }
  return d;
}

// Everything the page shows when the attempt's node is selected.
json node_json(const run::OpState& st, const run::Attempt& a, bool is_best, json timings, json d) {
  auto case_id = st.case_ids.find(a.iteration);
  return json{{"k", a.iteration},
              {"stage", std::string(memory::stage_name(a.stage))},
              {"policy", std::string(run::policy_name(a.policy))},
              {"parent", a.parent_iteration ? json(*a.parent_iteration) : json(nullptr)},
              {"source_case", a.source_case_id ? json(*a.source_case_id) : json(nullptr)},
              {"case_id", case_id != st.case_ids.end() ? json(case_id->second) : json(nullptr)},
              {"optimisation", a.optimisation},
              {"verdict", std::string(eval::verdict_name(a.verdict))},
              {"message", util::truncate_text(a.message, 2000, 20)},
              {"first_mismatch", a.first_mismatch},
              {"diagnostics", util::truncate_text(a.diagnostics, 4000, 60)},
              {"label", std::string(run::label_name(a.outcome))},
              {"improved", a.improved},
              {"best", is_best},
              {"cases_passed", a.cases_passed},
              {"cases_total", a.cases_total},
              {"speedup_vs_reference", opt(a.speedup_vs_reference)},
              {"speedup_vs_library", opt(a.speedup_vs_library)},
              {"speedup_vs_parent", opt(a.speedup_vs_parent)},
              {"speedup_vs_incumbent", opt(a.speedup_vs_incumbent)},
              {"fraction_of_roofline", opt(a.fraction_of_roofline)},
              {"timings", timings},
              {"tokens_prompt", a.tokens_prompt},
              {"tokens_completion", a.tokens_completion},
              {"tier_tokens", a.tier_tokens},
              {"admission", run::admission_json(a.admission)},
              {"cost_usd", a.cost_usd},
              {"llm_seconds", a.llm_seconds},
              {"eval_seconds", a.eval_seconds},
              {"wall_seconds", a.wall_seconds},
              {"notable_reason", a.notable_reason},
              {"journal", a.journal},
              {"code_file", a.code_file},
              {"diff", d}};
}

}  // namespace

std::string lineage_legend() {
  std::string s = "<ul class=\"legend\">";
  for (const char* label : {"effective", "partial", "ineffective", "negative"}) {
    s += fmt::format("<li><span class=\"swatch round\" style=\"background:{}\"></span>{}</li>",
                     outcome_colour(label), label);
  }
  s += fmt::format(
      "<li><span class=\"swatch\" style=\"background:{}\"></span>failed (not correct: square)</li>",
      failed_colour());
  s += "<li><span class=\"swatch ring\"></span>the best kernel</li>";
  s += "<li><span class=\"swatch dash\"></span>repair edge (refinements solid)</li></ul>";
  return s;
}

LineageView lineage_view(const Analysis& an, size_t run_index, const OpFigures& op,
                         const LineageOptions& options) {
  const RunFigures& rf = an.figures[run_index];
  const RunData& run = *rf.run;
  LineageView view;
  view.key = fmt::format("{}/{}", run_index, op.name);
  auto st_it = run.states.find(op.name);
  static const run::OpState empty;
  const run::OpState& st = st_it == run.states.end() ? empty : st_it->second;
  const auto& attempts = st.attempts;
  view.attempts = static_cast<int>(attempts.size());
  const run::Attempt* best = st.incumbent();

  TreeLayout layout = layout_tree(attempts);
  const double W = layout.width();
  const double H = layout.height();
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {} {}\" width=\"{}\" height=\"{}\" "
      "role=\"group\" "
      "aria-label=\"{}\">",
      num(W), num(H), num(W), num(H),
      xml_escape(fmt::format("lineage of {} in {}", op.name, rf.label)));
  s += edges_svg(attempts, layout);
  json nodes = json::object();
  for (const auto& a : attempts) {
    const bool is_best = best && best->iteration == a.iteration;
    s += node_svg(a, view.key, is_best, layout);
    json timings = timings_json(a);
    json d = attempt_diff_json(run, attempts, a, options);
    nodes[std::to_string(a.iteration)] =
        node_json(st, a, is_best, std::move(timings), std::move(d));
  }
  if (attempts.empty()) {
    s +=
        fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" class=\"empty-note\">{}</text>",
                    num(W / 2), num(H / 2 + 4), op.selected ? "no attempts" : "not run");
  }
  s += "</svg>";
  view.svg = std::move(s);
  view.detail = json{{"run", rf.label}, {"op", op.name}, {"nodes", nodes}};
  return view;
}

}  // namespace kope::report
