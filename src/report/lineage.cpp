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
  std::map<int, double> slot;
  std::map<int, int> depth;
  double next = 0;
  int max_depth = 0;
  std::function<void(int, int)> place = [&](int k, int d) {
    depth[k] = d;
    max_depth = std::max(max_depth, d);
    auto it = children.find(k);
    if (it == children.end()) {
      slot[k] = next++;
      return;
    }
    for (int c : it->second) place(c, d + 1);
    slot[k] = (slot[it->second.front()] + slot[it->second.back()]) / 2;
  };
  for (int r : roots) place(r, 0);

  const double dx = 58, dy = 66, pad_x = 34, pad_y = 30, radius = 15;
  const double W = std::max(320.0, pad_x * 2 + dx * std::max(0.0, next - 1));
  const double H = pad_y * 2 + dy * max_depth;
  auto px = [&](int k) { return pad_x + dx * slot[k]; };
  auto py = [&](int k) { return pad_y + dy * depth[k]; };
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {} {}\" width=\"{}\" height=\"{}\" "
      "role=\"group\" "
      "aria-label=\"{}\">",
      num(W), num(H), num(W), num(H),
      xml_escape(fmt::format("lineage of {} in {}", op.name, rf.label)));
  for (const auto& a : attempts) {
    if (!a.parent_iteration || !slot.contains(*a.parent_iteration)) continue;
    int p = *a.parent_iteration;
    double x1 = px(p), y1 = py(p) + radius, x2 = px(a.iteration), y2 = py(a.iteration) - radius;
    double my = (y1 + y2) / 2;
    s += fmt::format("<path d=\"M{} {} C{} {} {} {} {} {}\" class=\"edge{}\"/>", num(x1), num(y1),
                     num(x1), num(my), num(x2), num(my), num(x2), num(y2),
                     a.stage == memory::Stage::repair ? " dashed" : "");
  }
  json nodes = json::object();
  for (const auto& a : attempts) {
    double x = px(a.iteration), y = py(a.iteration);
    bool ok = a.correct();
    std::string fill(ok ? outcome_colour(a.label) : failed_colour());
    std::string aria =
        fmt::format("attempt {}: {} {}, {}{}", a.iteration, memory::stage_name(a.stage), eval::verdict_name(a.verdict),
                    ok ? a.label : "failed",
                    ok && a.speedup_vs_reference
                        ? fmt::format(", {:.2f}x vs reference", *a.speedup_vs_reference)
                        : "");
    s += fmt::format(
        "<g class=\"node mark\" data-node=\"{}/{}\" tabindex=\"0\" role=\"button\" "
        "aria-label=\"{}\">",
        xml_escape(view.key), a.iteration, xml_escape(aria));
    s += "<title>" + xml_escape(aria + (a.optimisation.empty() ? "" : " — " + a.optimisation)) +
         "</title>";
    if (best && best->iteration == a.iteration) {
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
        d = json{{"missing", fmt::format("the parent's source ({}) is not in the run directory",
                                         p.code_file)}};
      }
    } else {
      std::string against =
          a.source_case_id
              ? fmt::format("nothing in this run (replayed from memory case {})", *a.source_case_id)
              : "nothing (a fresh draft: the whole source)";
      d = diff_json(line_diff("", *code, dopt), against);
    }
    auto case_id = st.case_ids.find(a.iteration);
    nodes[std::to_string(a.iteration)] =
        json{{"k", a.iteration},
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
             {"label", a.label},
             {"improved", a.improved},
             {"best", best && best->iteration == a.iteration},
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
