#include "report/html.h"

#include <fmt/format.h>

#include <cmath>
#include <map>

#include "report/assets.h"
#include "report/charts.h"
#include "report/lineage.h"
#include "report/svg.h"
#include "report/tables.h"

#ifndef KOPE_VERSION
#define KOPE_VERSION "0"
#endif

namespace kope::report {

using nlohmann::json;

namespace {

bool numeric(ColumnType t) {
  return t != ColumnType::text && t != ColumnType::boolean;
}

std::string raw(const Value& v) {
  if (std::holds_alternative<std::monostate>(v)) return "";
  if (auto s = std::get_if<std::string>(&v)) return *s;
  if (auto b = std::get_if<bool>(&v)) return *b ? "1" : "0";
  if (auto i = std::get_if<int64_t>(&v)) return fmt::format("{}", *i);
  double d = std::get<double>(v);
  return std::isfinite(d) ? fmt::format("{}", d) : "";
}

const Table* find_table(const std::vector<Table>& tables, std::string_view id) {
  for (const auto& t : tables) {
    if (t.id == id) return &t;
  }
  return nullptr;
}

std::string cell(const Table& t, size_t row, std::string_view key) {
  int c = t.column(key);
  if (c < 0) return "-";
  return format_cell(t.rows[row][static_cast<size_t>(c)], t.columns[static_cast<size_t>(c)]);
}

// JSON safe inside <script>: no "<" can close the element or open a comment.
std::string script_json(const json& j) {
  std::string s = j.dump(-1, ' ', false, json::error_handler_t::replace);
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '<') {
      out += "\\u003c";
    } else {
      out += c;
    }
  }
  return out;
}

std::map<std::string, std::string> colours(const Analysis& an) {
  std::map<std::string, std::string> m;
  for (size_t i = 0; i < an.figures.size(); ++i)
    m[an.figures[i].label] = std::string(run_colour(i));
  return m;
}

std::string html_table_impl(const Table& t, const std::map<std::string, std::string>& run_colours) {
  bool hidden = false;
  for (const auto& c : t.columns) hidden = hidden || !c.brief;
  std::string s =
      fmt::format("<div class=\"table-wrap\" id=\"table-{}\"><div class=\"table-head\"><h3>{}</h3>",
                  xml_escape(t.id), xml_escape(t.title));
  if (hidden && !t.rows.empty()) {
    s += "<label><input type=\"checkbox\" class=\"show-all\"> all columns</label>";
  }
  s += "</div>";
  if (!t.caption.empty()) s += "<p class=\"caption\">" + xml_escape(t.caption) + "</p>";
  if (t.rows.empty()) return s + "<p class=\"caption\"><em>(none)</em></p></div>";
  s += "<div class=\"scroll\"><table class=\"data sortable\"><thead><tr>";
  for (const auto& c : t.columns) {
    std::string cls = numeric(c.type) ? "num" : "";
    if (!c.brief) cls += cls.empty() ? "extra" : " extra";
    s += fmt::format("<th scope=\"col\" data-key=\"{}\" data-type=\"{}\"{}{}>{}</th>",
                     xml_escape(c.key), numeric(c.type) ? "num" : "text",
                     cls.empty() ? "" : fmt::format(" class=\"{}\"", cls),
                     c.help.empty() ? "" : fmt::format(" title=\"{}\"", xml_escape(c.help)),
                     xml_escape(c.title));
  }
  s += "</tr></thead><tbody>";
  for (const auto& row : t.rows) {
    s += "<tr>";
    for (size_t j = 0; j < t.columns.size(); ++j) {
      const Column& c = t.columns[j];
      std::string shown_text = format_cell(row[j], c);
      // Long texts (sets in words, strategies, lesson texts) wrap; everything else stays on one
      // line.
      std::string cls = numeric(c.type) ? "num" : (shown_text.size() > 32 ? "wrap" : "");
      if (!c.brief) cls += cls.empty() ? "extra" : " extra";
      std::string shown = xml_escape(shown_text);
      if ((c.key == "label" || c.key == "run" || c.key == "baseline") &&
          std::holds_alternative<std::string>(row[j])) {
        auto it = run_colours.find(std::get<std::string>(row[j]));
        if (it != run_colours.end())
          shown =
              fmt::format("<span class=\"run-dot\" style=\"background:{}\"></span>", it->second) +
              shown;
      }
      s += fmt::format("<td data-v=\"{}\"{}>{}</td>", xml_escape(raw(row[j])),
                       cls.empty() ? "" : fmt::format(" class=\"{}\"", cls), shown);
    }
    s += "</tr>";
  }
  return s + "</tbody></table></div></div>";
}

std::string cards(const Analysis& an, const std::vector<Table>& tables) {
  const Table* t = find_table(tables, "summary");
  if (!t) return "";
  std::string s = "<div class=\"cards\">";
  for (size_t i = 0; i < t->rows.size() && i < an.figures.size(); ++i) {
    const RunFigures& f = an.figures[i];
    s += fmt::format("<div class=\"card\" style=\"--c:{}\"><h3>{}</h3><dl>", run_colour(i),
                     xml_escape(f.label));
    auto item = [&](std::string_view name, std::string value, bool big = false) {
      s += fmt::format("<dt>{}</dt><dd{}>{}</dd>", xml_escape(name), big ? " class=\"big\"" : "",
                       xml_escape(value));
    };
    item("solved", fmt::format("{} / {}", cell(*t, i, "solved"), an.set.ops.size()), true);
    item("pass rate", cell(*t, i, "pass_rate"), true);
    item(fmt::format("geomean vs ref ({})", an.figures.size() > 1 ? "solved in all" : "solved"),
         cell(*t, i, "geomean_speedup_vs_reference"));
    item("geomean vs library", cell(*t, i, "geomean_speedup_vs_library"));
    item("fast_1 / fast_2", cell(*t, i, "fast_1") + " / " + cell(*t, i, "fast_2"));
    item("tokens", cell(*t, i, "tokens_total"));
    item("tokens per solved op", cell(*t, i, "tokens_per_solved_op"));
    item("cost", cell(*t, i, "cost_usd"));
    s += "</dl></div>";
  }
  return s + "</div>";
}

std::string lineage_section(const Analysis& an, json& data) {
  std::string trees;
  json lineage = json::object();
  std::string default_op;
  size_t default_run = 0;
  int most = -1;
  for (size_t r = 0; r < an.figures.size(); ++r) {
    for (const auto& o : an.figures[r].ops) {
      LineageView v = lineage_view(an, r, o);
      if (r == 0 && v.attempts > most) {
        most = v.attempts;
        default_op = o.name;
        default_run = r;
      }
      trees += fmt::format("<div class=\"lineage-tree\" data-key=\"{}\" hidden>{}</div>",
                           xml_escape(v.key), v.svg);
      lineage[v.key] = std::move(v.detail);
    }
  }
  data["lineage"] = std::move(lineage);
  std::string runs, ops;
  for (size_t r = 0; r < an.figures.size(); ++r) {
    runs += fmt::format("<option value=\"{}\"{}>{}</option>", r,
                        r == default_run ? " selected" : "", xml_escape(an.figures[r].label));
  }
  for (const auto& op : an.set.ops) {
    ops += fmt::format("<option value=\"{}\"{}>{}</option>", xml_escape(op.name),
                       op.name == default_op ? " selected" : "", xml_escape(op.name));
  }
  std::string s = "<section id=\"lineage\"><h2>Lineage</h2>";
  s += "<p class=\"lead\">The tree of an operator's attempts in one run: each attempt began from "
       "its parent (a repair from the "
       "failed attempt, a refinement from the incumbent; drafts and replays are roots). Colour: "
       "the outcome label of a correct "
       "attempt (r = its speedup over its parent's); grey squares: failed verdicts. Select a node "
       "for its strategy, verdict, "
       "timings, journal and the diff to its parent.</p>";
  s += fmt::format(
      "<div class=\"lineage-controls\"><label>run <select "
      "id=\"lineage-run\">{}</select></label><label>operator <select "
      "id=\"lineage-op\">{}</select></label></div>",
      runs, ops);
  s += lineage_legend();
  s += "<div class=\"lineage-layout\"><div id=\"lineage-trees\" data-chart=\"lineage\">" + trees +
       "</div><div id=\"lineage-detail\" aria-live=\"polite\"></div></div></section>";
  return s;
}

}  // namespace

std::vector<std::string> expected_charts(const Analysis& an) {
  std::vector<std::string> out = {"speedup", "fast_p", "stream", "tiers", "iterations", "lineage"};
  for (size_t i = 0; i < an.figures.size(); ++i) {
    for (const auto& c : an.comparisons) {
      bool any = false;
      for (const auto& p : c.ops) any = any || p.speedup_ratio.has_value();
      if (c.other == an.figures[i].label && any) out.push_back(fmt::format("comparison-{}", i));
    }
  }
  return out;
}

std::string html_table(const Table& t) {
  return html_table_impl(t, {});
}

namespace {

// Looks a table up by id and renders it with the runs' colours ("" when absent).
struct TableHtml {
  const std::vector<Table>& tables;
  std::map<std::string, std::string> run_colours;
  std::string operator()(std::string_view id) const {
    const Table* t = find_table(tables, id);
    return t ? html_table_impl(*t, run_colours) : std::string();
  }
};

std::string page_head(const std::string& title) {
  std::string h;
  h += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">";
  h += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">";
  h += "<meta name=\"generator\" content=\"kope " KOPE_VERSION "\">";
  h += "<title>" + xml_escape(title) + "</title>";
  h += "<script>" + std::string(k_error_hook_js) + "</script>";
  h += "<style>" + std::string(k_report_css) + "</style></head><body>";
  return h;
}

// The title and one line per run.
std::string page_header(const Analysis& an, const std::string& title) {
  std::string h;
  h += "<header class=\"top\"><div class=\"wrap\"><h1>" + xml_escape(title) + "</h1>";
  h += "<p>Figures over " + xml_escape(an.set.description()) + ".</p><p class=\"runs-line\">";
  for (size_t i = 0; i < an.figures.size(); ++i) {
    const RunData& r = *an.figures[i].run;
    h += fmt::format(
        "{}<span class=\"swatch\" style=\"background:{}\"></span> <strong>{}</strong>: {} context, "
        "{}, {} on {}",
        i ? " &nbsp;·&nbsp; " : "", run_colour(i), xml_escape(an.figures[i].label),
        xml_escape(r.context_mode()), xml_escape(r.model_name()), xml_escape(r.config.run_id),
        xml_escape(r.config.target.empty() ? "?" : r.config.target));
  }
  h += "</p></div></header>";
  return h;
}

std::string page_nav(const Analysis& an) {
  std::string h;
  h += "<nav class=\"toc\" aria-label=\"sections\"><ul><li><a "
       "href=\"#summary\">Summary</a></li><li><a href=\"#plots\">Plots</a></li>"
       "<li><a href=\"#breakdowns\">Levels &amp; categories</a></li><li><a "
       "href=\"#operators\">Operators</a></li>";
  if (!an.comparisons.empty()) h += "<li><a href=\"#comparison\">Comparison</a></li>";
  h += "<li><a href=\"#lineage\">Lineage</a></li>";
  if (an.memory) h += "<li><a href=\"#memory\">Memory</a></li>";
  h += "<li><a href=\"#notes\">Notes</a></li></ul></nav><main class=\"wrap\">";
  return h;
}

std::string summary_section(const Analysis& an, const std::vector<Table>& tables, const TableHtml& table) {
  std::string h;
  h += "<section id=\"summary\"><h2>Summary</h2>";
  h += "<p class=\"lead\">" +
       xml_escape(fmt::format("Pass rate over all {} cases of the set; geometric means over {}; "
                              "fast_p over all {} operators.",
                              an.set.cases_total, an.common_set, an.set.ops.size())) +
       "</p>";
  h += cards(an, tables);
  h += table("summary") + table("runs") + "</section>";
  return h;
}

std::string plots_section(const Analysis& an) {
  std::string h;
  h += "<section id=\"plots\"><h2>Plots</h2>";
  h += chart_speedups(an);
  h += "<div class=\"grid2\">" + chart_fast_p(an) + chart_stream(an) + "</div>";
  h += chart_tiers(an);
  h += chart_iterations(an);
  h += "</section>";
  return h;
}

std::string comparison_section(const Analysis& an, const TableHtml& table) {
  std::string h;
  h += "<section id=\"comparison\"><h2>Comparison</h2><p class=\"lead\">" +
       xml_escape(fmt::format("Paired differences, operator by operator, against the baseline "
                              "{}; intervals: {}. Every "
                              "figure names the set it is over.",
                              an.comparisons.front().baseline, bootstrap_words(an.bootstrap))) +
       "</p>";
  h += table("comparison");
  for (const auto& c : an.comparisons) h += chart_comparison(an, c);
  h += table("comparison_ops") + "</section>";
  return h;
}

std::string memory_section(const MemoryOverview& m, const TableHtml& table) {
  std::string h;
  h += "<section id=\"memory\"><h2>Memory</h2><p class=\"lead\">" +
       xml_escape(
           fmt::format("The experience memory {}: {} tasks, {} cases, {} lessons; targets: {}.",
                       m.path, m.tasks, m.cases, m.lessons, m.targets)) +
       "</p>";
  h += table("memory_helpful") + table("memory_harmful") + table("memory_quarantined") +
       table("memory_lessons");
  h += "</section>";
  return h;
}

std::string notes_section(const Analysis& an) {
  std::string h;
  h += "<section id=\"notes\"><h2>Notes</h2><ul class=\"notes\">";
  h += "<li>" +
       xml_escape(fmt::format("The set: {}. Operators solved in every run: {}.",
                              an.set.description(), an.common_set)) +
       "</li>";
  h += "<li>Pass rate counts cases: an operator a run did not select, or never started, counts as "
       "all its cases failed; an "
       "unsolved one counts the cases its best attempt passed.</li>";
  h += "<li>fast_p is the share of the set's operators whose best kernel is correct and strictly "
       "more than p times faster "
       "(fast_0: correct).</li>";
  if (!an.comparisons.empty())
    h += "<li>" + xml_escape("Intervals: " + bootstrap_words(an.bootstrap) + ".") + "</li>";
  for (const auto& n : an.notes) h += "<li>" + xml_escape(n) + "</li>";
  h += "</ul></section>";
  return h;
}

}  // namespace

std::string render_html(const Analysis& an, const std::vector<Table>& tables) {
  TableHtml table{tables, colours(an)};
  json data;
  data["expected_charts"] = expected_charts(an);
  std::string title = an.figures.size() == 1
                          ? fmt::format("kope report: run {}", an.figures[0].run->config.run_id)
                          : fmt::format("kope report: {} runs compared", an.figures.size());
  std::string h = page_head(title) + page_header(an, title) + page_nav(an);
  h += summary_section(an, tables, table);
  h += plots_section(an);
  h += "<section id=\"breakdowns\"><h2>Levels and categories</h2>" + table("levels") +
       table("categories") + "</section>";
  h += "<section id=\"operators\"><h2>Operators</h2>" + table("ops") + "</section>";
  if (!an.comparisons.empty()) h += comparison_section(an, table);
  h += lineage_section(an, data);
  if (an.memory) h += memory_section(*an.memory, table);
  h += notes_section(an);
  h += "</main>";
  h += "<footer class=\"wrap\">Generated by kope " KOPE_VERSION
       " (kope report). One self-contained file: nothing is loaded from elsewhere (no CDN, fonts "
       "or files).</footer>";
  h += "<pre id=\"kope-selftest\" hidden></pre>";
  h += "<script type=\"application/json\" id=\"kope-data\">" + script_json(data) + "</script>";
  h += "<script>" + std::string(k_report_js) + "</script></body></html>\n";
  return h;
}

}  // namespace kope::report
