#include "report/tables.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "util/strings.h"

#ifndef KOPE_VERSION
#define KOPE_VERSION "0"
#endif

namespace kope::report {

using nlohmann::json;

namespace {

Value jv(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return {};
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_number()) return it->get<double>();
  if (it->is_boolean()) return it->get<bool>();
  if (it->is_string()) return it->get<std::string>();
  return {};
}

Value jfp(const json& j, const char* table, const char* p) {
  auto it = j.find(table);
  if (it == j.end() || !it->is_object()) return {};
  return jv(*it, p);
}

Column col(std::string key, std::string title, ColumnType type, int digits = 2, bool brief = true,
           std::string help = "") {
  return Column{std::move(key), std::move(title), type, digits, brief, std::move(help)};
}

std::string fmt_value(std::optional<double> v, const std::string& unit) {
  if (!v) return "-";
  if (unit == "points" || unit == "fraction") return fmt::format("{:.1f}%", 100 * *v);
  if (unit == "speedup") return fmt::format("{:.2f}x", *v);
  if (unit == "tokens")
    return format_cell(Value(static_cast<int64_t>(std::llround(*v))),
                       Column{"", "", ColumnType::integer, 0, true, ""});
  if (unit == "usd") return fmt::format("${:.4f}", *v);
  return fmt::format("{:.2f}", *v);
}

std::string fmt_change(double v, const PairedMetric& m) {
  if (m.kind == "ratio") {
    double pct = 100 * (v - 1);
    return fmt::format("{:.2f}x ({:+.0f}%)", v, pct);
  }
  if (m.unit == "points") return fmt::format("{:+.1f} pp", 100 * v);
  return fmt::format("{:+.2f}", v);
}

std::string count_words(int64_t n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

Table runs_table(const Analysis& an) {
  const OpSet& set = an.set;
  const bool several = an.figures.size() > 1;
  Table t;
  t.id = "runs";
  t.title = "Runs";
  t.caption =
      fmt::format("{} reported over {}.",
                  an.figures.size() == 1 ? "One run" : fmt::format("{} runs", an.figures.size()),
                  set.description());
  t.columns = {
      col("label", "run", ColumnType::text),
      col("run_id", "run id", ColumnType::text, 0, several),
      col("context_mode", "context", ColumnType::text),
      col("policy", "policy", ColumnType::text),
      col("model", "model", ColumnType::text),
      col("target", "target", ColumnType::text, 0, false),
      col("created_at", "started", ColumnType::text, 0, false),
      col("dir", "directory", ColumnType::text, 0, false),
      col("selected", "ops selected", ColumnType::integer, 0, true, "operators the run selected"),
      col("in_set", "in set", ColumnType::integer, 0, true,
          "operators of the set the run selected"),
      col("complete", "complete", ColumnType::boolean, 0, true,
          "every selected operator finished"),
      col("max_iterations", "iterations", ColumnType::integer, 0, false,
          "attempt limit per operator"),
      col("seed", "seed", ColumnType::integer, 0, false)};
  for (const auto& f : an.figures) {
    const RunData& r = *f.run;
    int in_set = 0;
    for (const auto& o : f.ops) in_set += o.selected;
    t.add({f.label, r.config.run_id, r.context_mode(), std::string(run::policy_name(r.config.loop.policy)), r.model_name(),
           r.config.target, r.config.created_at, r.dir.string(),
           static_cast<int64_t>(r.op_names.size()), int64_t{in_set}, r.complete(),
           int64_t{r.config.loop.max_iterations}, static_cast<int64_t>(r.config.seed)});
  }
  return t;
}

// The groups of what memory held about an operator when its run started (the contamination
// guard): the summary table gives each its own figures.
constexpr const char* k_experience_groups[] = {"held-out", "seen"};

// Whether some run has an operator in one of k_experience_groups.
bool any_experience_group(const Analysis& an) {
  for (const auto& f : an.figures) {
    for (const auto& g : f.by_experience) {
      for (const char* name : k_experience_groups) {
        if (g.key == name) return true;
      }
    }
  }
  return false;
}

std::vector<Column> experience_columns(bool shown) {
  std::vector<Column> out;
  for (const std::string g : k_experience_groups) {
    std::string what = g == "held-out" ? "operators whose earlier experience the run held out (--holdout)"
                                       : "operators memory held earlier experience of, which the run used";
    out.push_back(col(g + "_ops", g + " ops", ColumnType::integer, 0, shown, what));
    out.push_back(col(g + "_pass_rate", g + " pass rate", ColumnType::percent, 1, shown));
    out.push_back(col(g + "_geomean_speedup_vs_reference", g + " geomean vs ref", ColumnType::speedup, 2, shown,
                      "over the group's operators the run solved"));
    out.push_back(col(g + "_geomean_speedup_vs_library", g + " geomean vs lib", ColumnType::speedup, 2, false));
    out.push_back(col(g + "_tokens_total", g + " tokens", ColumnType::integer, 0, shown));
  }
  return out;
}

// One run's values of experience_columns (null for a group it has no operator in).
std::vector<Value> experience_values(const RunFigures& f) {
  std::vector<Value> out;
  for (const std::string g : k_experience_groups) {
    auto it = std::find_if(f.by_experience.begin(), f.by_experience.end(), [&](const GroupFigures& x) { return x.key == g; });
    if (it == f.by_experience.end()) {
      out.insert(out.end(), 5, Value());
      continue;
    }
    const json& x = it->figures;
    out.insert(out.end(), {int64_t{it->ops}, jv(x, "pass_rate"), jv(x, "geomean_speedup_vs_reference"),
                           jv(x, "geomean_speedup_vs_library"), jv(x, "tokens_total")});
  }
  return out;
}

std::vector<Column> summary_columns() {
  return {
      col("label", "run", ColumnType::text),
      col("ops", "ops", ColumnType::integer, 0, false),
      col("solved", "solved", ColumnType::integer),
      col("solve_rate", "solved %", ColumnType::percent, 1, false),
      col("pass_rate", "pass rate", ColumnType::percent, 1),
      col("cases_passed", "cases passed", ColumnType::integer, 0, false),
      col("cases_total", "cases", ColumnType::integer, 0, false),
      col("geomean_speedup_vs_reference", "geomean vs ref", ColumnType::speedup, 2, true,
          "geometric mean over the operators solved in every run"),
      col("geomean_speedup_vs_library", "geomean vs lib", ColumnType::speedup, 2, true,
          "geometric mean over the operators solved in every run that have a library baseline"),
      col("geomean_speedup_vs_reference_own", "own geomean vs ref", ColumnType::speedup, 2, false,
          "geometric mean over the operators this run solved"),
      col("geomean_speedup_vs_library_own", "own geomean vs lib", ColumnType::speedup, 2, false),
      col("fast_0", "fast_0", ColumnType::percent, 1, true, "correct"),
      col("fast_1", "fast_1", ColumnType::percent, 1, true,
          "correct and faster than the reference"),
      col("fast_1.5", "fast_1.5", ColumnType::percent, 1, true,
          "correct and more than 1.5x faster"),
      col("fast_2", "fast_2", ColumnType::percent, 1, true, "correct and more than 2x faster"),
      col("fast_1_vs_library", "fast_1 vs lib", ColumnType::percent, 1, false),
      col("fast_2_vs_library", "fast_2 vs lib", ColumnType::percent, 1, false),
      col("fraction_of_roofline", "roofline", ColumnType::percent, 1, false,
          "geometric mean fraction of the roofline"),
      col("tokens_prompt", "prompt tokens", ColumnType::integer, 0, false),
      col("tokens_completion", "completion tokens", ColumnType::integer, 0, false),
      col("tokens_total", "tokens", ColumnType::integer),
      col("tokens_per_solved_op", "tokens/solved", ColumnType::integer),
      col("tokens_cached", "cached tokens", ColumnType::integer, 0, false,
          "prompt tokens the provider served from its prompt cache"),
      col("tokens_billed_equivalent", "billed-equiv tokens", ColumnType::integer, 0, false,
          "uncached prompt + cached prompt x the cached price ratio + completion"),
      col("tokens_billed_equivalent_per_solved_op", "billed-equiv/solved", ColumnType::integer, 0, true,
          "billed-equivalent tokens divided by the operators solved"),
      col("cost_usd", "cost", ColumnType::usd),
      col("attempts", "attempts", ColumnType::integer, 0, false),
      col("attempts_to_first_correct_mean", "to first correct", ColumnType::real, 2, false,
          "mean attempts to the first correct kernel, over the operators the run solved"),
      col("attempts_to_best_mean", "to best", ColumnType::real, 2, false,
          "mean attempts to the best kernel, over the operators the run solved"),
      col("tokens_to_target_geomean", "tokens to target", ColumnType::integer, 0, true,
          "geometric mean of the tokens spent until the first kernel within 10% of the best speed any run reached, "
          "over the operators the run reached it on"),
      col("tokens_to_target_median", "tokens to target (median)", ColumnType::integer, 0, false),
      col("target_reached", "target reached", ColumnType::text, 0, false,
          "operators the run reached the target on, of those with a target"),
      col("attempts_to_target_mean", "attempts to target", ColumnType::real, 2, false),
  };
}

Table summary_table(const Analysis& an) {
  const OpSet& set = an.set;
  const int n = static_cast<int>(set.ops.size());
  Table t;
  t.id = "summary";
  t.title = "Figures";
  t.caption = fmt::format(
      "Over {}. Pass rate: cases passed over all {} cases of the set (an operator a run did not "
      "select or never started "
      "counts as all its cases failed; an unsolved one counts the cases its best attempt "
      "passed). Geometric means of the "
      "best kernels' speedups over {} (vs library: the {} of them with a library baseline); "
      "'own' means are over the "
      "operators each run solved. fast_p: the share of all {} operators that are correct and "
      "more than p times faster "
      "than the reference (vs library: of the {} with a baseline). Fraction of roofline: "
      "geometric mean over each run's "
      "solved operators with timed cases. Tokens per solved operator: every token the run spent "
      "on the set's "
      "operators (reflections included) divided by the operators it solved; billed-equivalent counts each cached "
      "prompt token at the cached price ratio of the model profile (completion tokens at face value). Tokens to "
      "target: per operator, the tokens spent up to and including the first kernel within 10% of the best speedup "
      "any run reached on it; geometric mean over the operators the run reached it on. Cost: as the model "
      "client accounted it.",
      set.description(), set.cases_total, an.common_set, an.common_with_library, n,
      set.with_library);
  t.columns = summary_columns();
  const bool groups = any_experience_group(an);
  for (auto& c : experience_columns(groups)) t.columns.push_back(std::move(c));
  if (groups) {
    t.caption += " held-out/seen: the same figures over the operators whose earlier experience the run held out "
                 "(--holdout) and over those memory held earlier experience of and the run used.";
  }
  for (const auto& f : an.figures) {
    const json& g = f.figures;
    std::vector<Value> row{f.label,
           int64_t{n},
           jv(g, "solved"),
           jv(g, "solve_rate"),
           jv(g, "pass_rate"),
           jv(g, "cases_passed"),
           jv(g, "cases_total"),
           opt_value(an.common_geomean_reference.at(f.label)),
           opt_value(an.common_geomean_library.at(f.label)),
           jv(g, "geomean_speedup_vs_reference"),
           jv(g, "geomean_speedup_vs_library"),
           jfp(g, "fast_p", "0"),
           jfp(g, "fast_p", "1"),
           jfp(g, "fast_p", "1.5"),
           jfp(g, "fast_p", "2"),
           jfp(g, "fast_p_vs_library", "1"),
           jfp(g, "fast_p_vs_library", "2"),
           jv(g, "fraction_of_roofline_geomean"),
           jv(g, "tokens_prompt"),
           jv(g, "tokens_completion"),
           jv(g, "tokens_total"),
           jv(g, "tokens_per_solved_op"),
           jv(g, "tokens_cached"),
           jv(g, "tokens_billed_equivalent"),
           jv(g, "tokens_billed_equivalent_per_solved_op"),
           jv(g, "cost_usd"),
           jv(g, "attempts"),
           jv(g, "attempts_to_first_correct_mean"),
           jv(g, "attempts_to_best_mean"),
           opt_value(f.tokens_to_target.geomean),
           opt_value(f.tokens_to_target.median),
           fmt::format("{} of {}", f.tokens_to_target.reached, f.tokens_to_target.ops),
           opt_value(f.tokens_to_target.attempts_mean)};
    for (auto& v : experience_values(f)) row.push_back(std::move(v));
    t.add(std::move(row));
  }
  return t;
}

// By level or by category.
Table breakdown_table(const Analysis& an, const char* id, const char* title, const char* key_title, bool by_level) {
  const bool several = an.figures.size() > 1;
  Table t;
  t.id = id;
  t.title = title;
  t.caption = fmt::format(
      "Each row is over that group's operators of the set; the pass rate counts all the group's "
      "cases. The geometric "
      "mean is over the group's operators the run solved (their number is 'solved'); fast_p over "
      "all the group's "
      "operators.");
  t.columns = {col("label", "run", ColumnType::text, 0, several),
               col("group", key_title, ColumnType::text),
               col("ops", "ops", ColumnType::integer),
               col("cases", "cases", ColumnType::integer, 0, false),
               col("solved", "solved", ColumnType::integer),
               col("pass_rate", "pass rate", ColumnType::percent, 1),
               col("geomean_speedup_vs_reference", "geomean vs ref", ColumnType::speedup),
               col("geomean_speedup_vs_library", "geomean vs lib", ColumnType::speedup),
               col("fast_1", "fast_1", ColumnType::percent, 1),
               col("fast_2", "fast_2", ColumnType::percent, 1, false),
               col("tokens_total", "tokens", ColumnType::integer)};
  for (const auto& f : an.figures) {
    for (const auto& g : by_level ? f.by_level : f.by_category) {
      const json& x = g.figures;
      t.add({f.label, g.key, int64_t{g.ops}, jv(x, "cases_total"), jv(x, "solved"),
             jv(x, "pass_rate"), jv(x, "geomean_speedup_vs_reference"),
             jv(x, "geomean_speedup_vs_library"), jfp(x, "fast_p", "1"), jfp(x, "fast_p", "2"),
             jv(x, "tokens_total")});
    }
  }
  return t;
}

std::vector<Column> ops_columns(bool several) {
  return {
      col("label", "run", ColumnType::text, 0, several),
      col("op", "operator", ColumnType::text),
      col("category", "category", ColumnType::text, 0, false),
      col("level", "level", ColumnType::integer, 0, false),
      col("status", "status", ColumnType::text, 0, true,
          "solved, unsolved, not run, not finished"),
      col("solved", "solved", ColumnType::boolean, 0, false),
      col("cases_passed", "passed", ColumnType::integer),
      col("cases_total", "cases", ColumnType::integer),
      col("attempts", "attempts", ColumnType::integer),
      col("speedup_vs_reference", "vs ref", ColumnType::speedup),
      col("speedup_vs_library", "vs lib", ColumnType::speedup),
      col("fraction_of_roofline", "roofline", ColumnType::percent, 1),
      col("attempts_to_first_correct", "first ok", ColumnType::integer),
      col("attempts_to_best", "best at", ColumnType::integer),
      col("tokens_prompt", "prompt tokens", ColumnType::integer, 0, false),
      col("tokens_completion", "completion tokens", ColumnType::integer, 0, false),
      col("tokens", "tokens", ColumnType::integer),
      col("tokens_cached", "cached tokens", ColumnType::integer, 0, false),
      col("tokens_billed_equivalent", "billed-equiv tokens", ColumnType::integer, 0, false),
      col("tokens_to_target", "tokens to target", ColumnType::integer, 0, false,
          "tokens spent up to and including the first kernel within 10% of the best speedup any run reached"),
      col("attempts_to_target", "attempts to target", ColumnType::integer, 0, false),
      col("cost_usd", "cost", ColumnType::usd, 4, false),
      col("stop_reason", "stopped", ColumnType::text, 0, false),
      col("best_optimisation", "best kernel's optimisation", ColumnType::text, 0, false),
      col("library_forced", "library forced", ColumnType::boolean, 0, false,
          "the environment forced the library's configuration: vs lib is against a handicapped library"),
      col("library_config", "library configuration", ColumnType::text, 0, false),
      col("experience", "memory", ColumnType::text, 0, true,
          "held-out: its earlier experience was excluded (--holdout); seen: memory held earlier experience of it; "
          "unseen: none")};
}

Table ops_table(const Analysis& an) {
  const bool several = an.figures.size() > 1;
  Table t;
  t.id = "ops";
  t.title = "Per operator";
  t.caption = fmt::format(
      "Every operator of the set in every run. Speedups and fraction of roofline are the best "
      "(incumbent) kernel's, "
      "over the timed cases; 'first ok' and 'best at' count attempts (1-based); tokens include "
      "reflections. An "
      "operator a run did not select shows 'not run'.");
  t.columns = ops_columns(several);
  std::vector<std::string> forced;
  for (const auto& f : an.figures) {
    for (const auto& o : f.ops) {
      if (o.library_forced) forced.push_back(fmt::format("{} ({}: {})", o.name, f.label, o.library_forced_by));
    }
  }
  if (!forced.empty()) {
    t.caption += " vs lib is against a library configuration the environment forced for " + util::join(forced, ", ") +
                 " (not the library's own choice; `kope bench --library-config best` measures it at its best).";
  }
  for (const auto& f : an.figures) {
    for (const auto& o : f.ops) {
      std::string status = !o.selected ? "not run"
                           : o.solved  ? "solved"
                           : !o.done   ? (o.started ? "not finished" : "not started")
                                       : "unsolved";
      t.add({f.label,
             o.name,
             o.category,
             int64_t{o.level},
             status,
             o.solved,
             int64_t{o.cases_passed},
             int64_t{o.cases_total},
             int64_t{o.attempts},
             opt_value(o.speedup_vs_reference),
             opt_value(o.speedup_vs_library),
             opt_value(o.fraction_of_roofline),
             opt_value(o.attempts_to_first_correct),
             opt_value(o.attempts_to_best),
             o.tokens_prompt,
             o.tokens_completion,
             o.tokens(),
             o.tokens_cached,
             o.tokens_billed_equivalent,
             o.tokens_to_target ? Value(*o.tokens_to_target) : Value(),
             opt_value(o.attempts_to_target),
             o.cost_usd,
             o.stop_reason.empty() ? Value() : Value(o.stop_reason),
             o.best_optimisation.empty() ? Value() : Value(o.best_optimisation),
             o.library_forced,
             o.library_config.empty() ? Value() : Value(o.library_config),
             o.experience.empty() ? Value() : Value(o.experience)});
    }
  }
  return t;
}

Table comparison_table(const Analysis& an) {
  Table t;
  t.id = "comparison";
  t.title = "Paired comparison";
  t.caption = fmt::format(
      "Each run against the baseline {}, operator by operator. 'change' is the difference (run − "
      "baseline) or the "
      "ratio (run / baseline) of the figure over the set named in 'over'; the interval is a {}.",
      an.comparisons.front().baseline, bootstrap_words(an.bootstrap));
  t.columns = {col("baseline", "baseline", ColumnType::text, 0, false),
               col("run", "run", ColumnType::text),
               col("metric", "figure", ColumnType::text),
               col("baseline_text", "baseline value", ColumnType::text),
               col("value_text", "run value", ColumnType::text),
               col("change_text", "change", ColumnType::text),
               col("interval_text", "95% interval", ColumnType::text),
               col("n", "n", ColumnType::integer),
               col("over", "over", ColumnType::text),
               col("key", "key", ColumnType::text, 0, false),
               col("kind", "kind", ColumnType::text, 0, false),
               col("unit", "unit", ColumnType::text, 0, false),
               col("baseline_value", "baseline value (raw)", ColumnType::real, 4, false),
               col("value", "run value (raw)", ColumnType::real, 4, false),
               col("estimate", "change (raw)", ColumnType::real, 4, false),
               col("low", "interval low", ColumnType::real, 4, false),
               col("high", "interval high", ColumnType::real, 4, false),
               col("resamples", "resamples", ColumnType::integer, 0, false)};
  for (const auto& c : an.comparisons) {
    for (const auto& m : c.metrics) {
      std::string change = m.interval ? fmt_change(m.interval->estimate, m) : "-";
      std::string interval = m.interval && m.interval->resamples > 0
                                 ? fmt::format("[{}, {}]", fmt_change(m.interval->low, m),
                                               fmt_change(m.interval->high, m))
                                 : "-";
      if (m.interval && m.interval->resamples > 0 && m.kind == "ratio") {
        interval = fmt::format("[{:.2f}x, {:.2f}x]", m.interval->low, m.interval->high);
      }
      t.add({c.baseline, c.other, m.title, fmt_value(m.baseline_value, m.unit),
             fmt_value(m.value, m.unit), change, interval, int64_t{m.n}, m.set, m.key, m.kind,
             m.unit, opt_value(m.baseline_value), opt_value(m.value),
             m.interval ? Value(m.interval->estimate) : Value(),
             m.interval ? Value(m.interval->low) : Value(),
             m.interval ? Value(m.interval->high) : Value(),
             m.interval ? Value(int64_t{m.interval->resamples}) : Value()});
    }
  }
  return t;
}

Table comparison_ops_table(const Analysis& an) {
  Table p;
  p.id = "comparison_ops";
  p.title = "Paired, per operator";
  p.caption =
      "The best kernels of the baseline and of each run, operator by operator; 'ratio' is run / "
      "baseline "
      "(both solved).";
  p.columns = {
      col("baseline", "baseline", ColumnType::text, 0, false),
      col("run", "run", ColumnType::text),
      col("op", "operator", ColumnType::text),
      col("baseline_solved", "base solved", ColumnType::boolean),
      col("solved", "run solved", ColumnType::boolean),
      col("baseline_speedup", "base vs ref", ColumnType::speedup),
      col("speedup", "run vs ref", ColumnType::speedup),
      col("ratio", "ratio", ColumnType::speedup),
      col("baseline_cases_passed", "base passed", ColumnType::integer, 0, false),
      col("cases_passed", "run passed", ColumnType::integer, 0, false),
      col("cases_total", "cases", ColumnType::integer, 0, false),
      col("baseline_tokens", "base tokens", ColumnType::integer),
      col("tokens", "run tokens", ColumnType::integer),
      col("baseline_attempts_to_first_correct", "base first ok", ColumnType::integer, 0, false),
      col("attempts_to_first_correct", "run first ok", ColumnType::integer, 0, false),
      col("baseline_tokens_to_target", "base tokens to target", ColumnType::integer, 0, false),
      col("tokens_to_target", "run tokens to target", ColumnType::integer, 0, false)};
  for (const auto& c : an.comparisons) {
    for (const auto& o : c.ops) {
      p.add({c.baseline, c.other, o.op, o.a->solved, o.b->solved,
             opt_value(o.a->speedup_vs_reference), opt_value(o.b->speedup_vs_reference),
             opt_value(o.speedup_ratio), int64_t{o.a->cases_passed}, int64_t{o.b->cases_passed},
             int64_t{o.b->cases_total}, o.a->tokens(), o.b->tokens(),
             opt_value(o.a->attempts_to_first_correct),
             opt_value(o.b->attempts_to_first_correct),
             o.a->tokens_to_target ? Value(*o.a->tokens_to_target) : Value(),
             o.b->tokens_to_target ? Value(*o.b->tokens_to_target) : Value()});
    }
  }
  return p;
}

Value lesson_values(const MemoryLesson& l) {
  std::string s;
  for (const auto& [stage, v] : l.value)
    s += fmt::format("{}{} {:+.2f}", s.empty() ? "" : ", ", stage, v);
  return s.empty() ? Value() : Value(s);
}

std::vector<Column> lesson_columns(bool with_scope) {
  std::vector<Column> c = {col("scope", "scope", ColumnType::text, 0, with_scope),
                           col("id", "id", ColumnType::text),
                           col("kind", "kind", ColumnType::text),
                           col("status", "status", ColumnType::text),
                           col("title", "lesson", ColumnType::text),
                           col("helpful", "helpful", ColumnType::integer),
                           col("harmful", "harmful", ColumnType::integer),
                           col("values", "learned values", ColumnType::text),
                           col("text", "text", ColumnType::text, 0, false),
                           col("source_cases", "from cases", ColumnType::integer, 0, false)};
  return c;
}

std::vector<Value> lesson_row(const MemoryLesson& l) {
  return {l.scope,
          l.id,
          l.kind,
          l.status,
          l.title,
          int64_t{l.helpful},
          int64_t{l.harmful},
          lesson_values(l),
          l.text,
          static_cast<int64_t>(l.source_cases)};
}

Table memory_lessons_table(const MemoryOverview& m) {
  Table s;
  s.id = "memory_lessons";
  s.title = "Memory: lessons by scope";
  s.caption = fmt::format(
      "{}: {} tasks, {} cases, {} over {}. Every lesson, grouped by scope (category · backend · "
      "target · toolchain; 'any' where unscoped), with its helpful/harmful counts and the value "
      "learned per stage from the outcomes of the prompts it was in.",
      m.path, m.tasks, m.cases, count_words(m.lessons, "lesson", "lessons"),
      count_words(m.targets, "target", "targets"));
  s.columns = lesson_columns(true);
  std::vector<const MemoryLesson*> by_scope;
  for (const auto& l : m.all_lessons) by_scope.push_back(&l);
  std::stable_sort(
      by_scope.begin(), by_scope.end(), [](const MemoryLesson* a, const MemoryLesson* b) {
        return std::tie(a->scope, a->kind, a->id) < std::tie(b->scope, b->kind, b->id);
      });
  for (const auto* l : by_scope) s.add(lesson_row(*l));
  return s;
}

// The ten most helpful (or most harmful) lessons, net.
Table memory_top_table(const MemoryOverview& m, const char* id, const char* title, const char* caption, bool helpful) {
  Table t;
  t.id = id;
  t.title = title;
  t.caption = caption;
  t.columns = lesson_columns(true);
  std::vector<const MemoryLesson*> list;
  for (const auto& l : m.all_lessons) {
    // Net helpful (or net harmful) lessons only: a lesson that helped more than it hurt is not
    // among the harmful ones however many harmful votes it has.
    if (helpful ? l.helpful > l.harmful : l.harmful > l.helpful) list.push_back(&l);
  }
  std::stable_sort(list.begin(), list.end(), [&](const MemoryLesson* a, const MemoryLesson* b) {
    int ka = helpful ? a->helpful - a->harmful : a->harmful - a->helpful;
    int kb = helpful ? b->helpful - b->harmful : b->harmful - b->helpful;
    if (ka != kb) return ka > kb;
    return a->id < b->id;
  });
  if (list.size() > 10) list.resize(10);
  for (const auto* l : list) t.add(lesson_row(*l));
  return t;
}

Table memory_quarantined_table(const MemoryOverview& m) {
  Table q;
  q.id = "memory_quarantined";
  q.title = "Memory: quarantined wins";
  q.caption =
      "Correct cases whose speedup was implausible (faster than the hardware floor allows — "
      "older records: beyond the roofline — or a jump too large over their parent): kept out of "
      "best kernels and speed evidence until re-verified. A kernel beyond its working-set roofline "
      "alone is not quarantined: that is a bug of the roofline model, reported by the evaluator.";
  q.columns = {col("id", "case", ColumnType::integer),
               col("op", "operator", ColumnType::text),
               col("target", "target", ColumnType::text),
               col("status", "status", ColumnType::text),
               col("speedup_vs_reference", "vs ref", ColumnType::speedup),
               col("fraction_of_roofline", "roofline", ColumnType::percent, 1),
               col("reason", "why", ColumnType::text),
               col("optimisation", "optimisation", ColumnType::text, 0, false),
               col("run_id", "run", ColumnType::text, 0, false),
               col("created_at", "recorded", ColumnType::text, 0, false)};
  for (const auto& c : m.quarantined) {
    q.add({c.id, c.op, c.target, c.status, opt_value(c.speedup_vs_reference),
           opt_value(c.fraction_of_roofline), c.reason, c.optimisation, c.run_id, c.created_at});
  }
  return q;
}

}  // namespace

std::string bootstrap_words(const BootstrapOptions& b) {
  return fmt::format("{:.0f}% percentile bootstrap over operators (paired; {} resamples, seed {})",
                     100 * b.confidence, b.resamples, b.seed);
}

std::vector<Table> build_tables(const Analysis& an) {
  std::vector<Table> tables;
  tables.push_back(runs_table(an));
  tables.push_back(summary_table(an));
  tables.push_back(breakdown_table(an, "levels", "By level", "level", true));
  tables.push_back(breakdown_table(an, "categories", "By category", "category", false));
  tables.push_back(ops_table(an));
  if (!an.comparisons.empty()) {
    tables.push_back(comparison_table(an));
    tables.push_back(comparison_ops_table(an));
  }
  if (an.memory) {
    const MemoryOverview& m = *an.memory;
    tables.push_back(memory_lessons_table(m));
    tables.push_back(memory_top_table(m, "memory_helpful", "Memory: most helpful lessons",
                                      "At most ten lessons that helped more often than they hurt, by helpful − harmful "
                                      "(the prompts they were in that led to a good or a bad outcome).",
                                      true));
    tables.push_back(memory_top_table(m, "memory_harmful", "Memory: most harmful lessons",
                                      "At most ten lessons that hurt more often than they helped, by harmful − helpful; "
                                      "kope deprecates a lesson automatically once it is clearly harmful.",
                                      false));
    tables.push_back(memory_quarantined_table(m));
  }
  return tables;
}

json report_json(const Analysis& an, const std::vector<Table>& tables) {
  json set_ops = json::array();
  for (const auto& op : an.set.ops) set_ops.push_back(op.name);
  json runs = json::array();
  for (const auto& f : an.figures) {
    runs.push_back({{"label", f.label},
                    {"run_id", f.run->config.run_id},
                    {"dir", f.run->dir.string()},
                    {"context_mode", f.run->context_mode()},
                    {"policy", std::string(run::policy_name(f.run->config.loop.policy))},
                    {"model", f.run->model_name()},
                    {"complete", f.run->complete()},
                    {"task_stream", f.stream}});
  }
  json t = json::object();
  for (const auto& table : tables) t[table.id] = table_json(table);
  return json{
      {"kope_report", 1},
      {"kope_version", KOPE_VERSION},
      {"set",
       {{"description", an.set.description()},
        {"origin", an.set.origin},
        {"ops", set_ops},
        {"cases_total", an.set.cases_total},
        {"with_library", an.set.with_library}}},
      {"solved_in_every_run", {{"description", an.common_set}, {"ops", an.solved_in_every_run}}},
      {"bootstrap",
       {{"method", "percentile, resampling operators with replacement (paired)"},
        {"resamples", an.bootstrap.resamples},
        {"seed", an.bootstrap.seed},
        {"confidence", an.bootstrap.confidence}}},
      {"runs", runs},
      {"tables", t},
      {"notes", an.notes}};
}

std::string report_text(const Analysis& an, const std::vector<Table>& tables, bool markdown,
                        int width) {
  std::string out;
  std::string head =
      fmt::format("kope report: {} over {}",
                  an.figures.size() == 1 ? "1 run" : fmt::format("{} runs", an.figures.size()),
                  an.set.description());
  out += markdown ? "## " + head + "\n\n" : head + "\n\n";
  out += markdown ? print_markdown(tables) : print_console(tables, width);
  if (!an.notes.empty()) {
    out += markdown ? "\n### Notes\n\n" : "\nNotes\n";
    for (const auto& n : an.notes) out += (markdown ? "- " : "  - ") + n + "\n";
  }
  return out;
}

}  // namespace kope::report
