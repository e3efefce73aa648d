#include "report/figures.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

#include "run/results.h"
#include "eval/library.h"
#include "util/strings.h"

namespace kope::report {

using nlohmann::json;

namespace {

std::optional<double> opt_d(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

std::optional<int> opt_i(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<int>();
}

std::string plural(int n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

OpFigures op_figures(const spec::OpSpec& op, const run::OpState* st, bool selected,
                     bool has_library) {
  static const run::OpState empty;
  const run::OpState& s = st ? *st : empty;
  json r = run::op_result(op, s);
  OpFigures f;
  f.name = op.name;
  f.category = op.category;
  f.level = op.level;
  f.selected = selected;
  f.started = st != nullptr && (st->started || !st->attempts.empty());
  f.done = s.done;
  f.solved = r.value("solved", false);
  f.has_library = has_library;
  f.cases_passed = r.value("cases_passed", 0);
  f.cases_total = r.value("cases_total", 0);
  f.attempts = r.value("attempts", 0);
  f.speedup_vs_reference = opt_d(r, "best_speedup_vs_reference");
  f.speedup_vs_library = opt_d(r, "best_speedup_vs_library");
  f.fraction_of_roofline = opt_d(r, "fraction_of_roofline");
  if (auto lc = r.find("library_config"); lc != r.end() && lc->is_object()) {
    f.library_config = eval::library_config_from_json(*lc).describe();
    f.library_forced = lc->value("forced", false);
    f.library_forced_by = lc->value("forced_by", "");
  }
  f.attempts_to_first_correct = opt_i(r, "attempts_to_first_correct");
  f.attempts_to_best = opt_i(r, "attempts_to_best");
  f.tokens_prompt = r.value("tokens_prompt", int64_t{0});
  f.tokens_completion = r.value("tokens_completion", int64_t{0});
  f.tokens_cached = r.value("tokens_cached", int64_t{0});
  f.tokens_billed_equivalent = r.value("tokens_billed_equivalent", f.tokens());
  f.cost_usd = r.value("cost_usd", 0.0);
  f.stop_reason = r["stop_reason"].is_string() ? r["stop_reason"].get<std::string>() : "";
  f.best_optimisation =
      r["best_optimisation"].is_string() ? r["best_optimisation"].get<std::string>() : "";
  f.experience = s.experience;
  // Reflections by the iteration they followed ("k<iteration>"; the op's "end" one follows all).
  std::map<int, int64_t> reflection_tokens;
  for (const auto& [key, rec] : s.reflections) {
    if (key.size() < 2 || key[0] != 'k') continue;
    int k = 0;
    auto [end, ec] = std::from_chars(key.data() + 1, key.data() + key.size(), k);
    if (ec == std::errc() && end == key.data() + key.size())
      reflection_tokens[k] += rec.tokens_prompt + rec.tokens_completion;
  }
  auto next_reflection = reflection_tokens.begin();
  int64_t spent = 0;
  std::optional<double> best;
  for (const auto& a : s.attempts) {
    if (a.improved) best = a.speedup_vs_reference;
    for (; next_reflection != reflection_tokens.end() && next_reflection->first < a.iteration; ++next_reflection)
      spent += next_reflection->second;
    spent += a.tokens_prompt + a.tokens_completion;
    IterationPoint p{a.iteration, best, a.tier_tokens, std::nullopt, spent};
    auto rv = s.reverified.find(a.iteration);
    const bool trusted = a.quarantine_reason.empty() || (rv != s.reverified.end() && rv->second.confirmed);
    if (a.correct() && trusted && a.speedup_vs_reference && *a.speedup_vs_reference > 0) p.speedup = a.speedup_vs_reference;
    f.iterations.push_back(std::move(p));
  }
  // A quarantined win confirmed at the end of the op became the incumbent after the last attempt.
  if (const run::Attempt* inc = s.incumbent(); s.promoted && inc && !f.iterations.empty()) {
    f.iterations.back().best_speedup = inc->speedup_vs_reference;
  }
  return f;
}

// The ops and states compute_results needs for one run over a subset of the set.
json group_figures(const RunData& run, const std::vector<const spec::OpSpec*>& ops) {
  std::vector<spec::OpSpec> list;
  std::map<std::string, run::OpState> states;
  for (const spec::OpSpec* op : ops) {
    auto sel = run.specs.find(op->name);
    list.push_back(sel != run.specs.end() ? sel->second : *op);
    if (sel == run.specs.end()) continue;  // not selected: all cases failed
    auto st = run.states.find(op->name);
    if (st != run.states.end()) states.emplace(op->name, st->second);
  }
  return run::compute_results(json::object(), list, states)["figures"];
}

std::string join_labels(const std::vector<std::string>& v) {
  return util::join(v, ", ");
}

// One candidate field per run for labels, in order of preference.
std::vector<std::pair<std::string, std::vector<std::string>>> label_fields(
    const std::vector<RunData>& runs) {
  std::vector<std::pair<std::string, std::vector<std::string>>> out(6);
  out[0].first = "context";
  out[1].first = "model";
  out[2].first = "policy";
  out[3].first = "iterations";
  out[4].first = "window";
  out[5].first = "seed";
  for (const auto& r : runs) {
    out[0].second.push_back(r.context_mode());
    out[1].second.push_back(r.model_name());
    out[2].second.push_back(std::string(run::policy_name(r.config.loop.policy)));
    out[3].second.push_back(fmt::format("{} iterations", r.config.loop.max_iterations));
    out[4].second.push_back(fmt::format("window {}", r.config.loop.budget.window));
    out[5].second.push_back(fmt::format("seed {}", r.config.seed));
  }
  return out;
}

bool all_distinct(const std::vector<std::string>& v) {
  return std::set<std::string>(v.begin(), v.end()).size() == v.size();
}

}  // namespace

std::string OpSet::description() const {
  return fmt::format("the {} of {} ({} cases)",
                     plural(static_cast<int>(ops.size()), "operator", "operators"), origin,
                     cases_total);
}

int RunFigures::solved() const {
  int n = 0;
  for (const auto& o : ops) n += o.solved;
  return n;
}

const OpFigures* RunFigures::op(const std::string& name) const {
  for (const auto& o : ops) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

std::vector<std::string> derive_labels(const std::vector<RunData>& runs) {
  std::vector<std::string> labels;
  if (runs.size() == 1) return {runs[0].config.run_id};
  auto fields = label_fields(runs);
  for (const auto& [name, values] : fields) {
    if (all_distinct(values)) return values;
  }
  // Combine the fields that differ at all.
  std::vector<std::string> combined(runs.size());
  for (const auto& [name, values] : fields) {
    if (std::set<std::string>(values.begin(), values.end()).size() < 2) continue;
    for (size_t i = 0; i < runs.size(); ++i)
      combined[i] += (combined[i].empty() ? "" : " · ") + values[i];
  }
  if (!combined[0].empty() && all_distinct(combined)) return combined;
  for (const auto& r : runs) labels.push_back(r.config.run_id);
  if (all_distinct(labels)) return labels;
  for (size_t i = 0; i < labels.size(); ++i) labels[i] += fmt::format(" #{}", i + 1);
  return labels;
}

void compute_tokens_to_target(std::vector<RunFigures>& runs) {
  if (runs.empty()) return;
  const size_t n_ops = runs.front().ops.size();
  std::vector<std::vector<double>> tokens(runs.size());
  std::vector<std::vector<double>> attempts(runs.size());
  std::vector<int> with_target(runs.size(), 0);
  int n_target = 0;
  for (size_t k = 0; k < n_ops; ++k) {
    std::optional<double> best;
    for (const auto& r : runs) {
      if (k >= r.ops.size() || !r.ops[k].selected) continue;
      for (const auto& it : r.ops[k].iterations)
        if (it.speedup && (!best || *it.speedup > *best)) best = it.speedup;
    }
    if (!best) continue;
    ++n_target;
    const double target = k_target_fraction * *best;
    for (size_t i = 0; i < runs.size(); ++i) {
      if (k >= runs[i].ops.size()) continue;
      OpFigures& o = runs[i].ops[k];
      o.target_speedup = target;
      if (!o.selected) continue;
      for (const auto& it : o.iterations) {
        if (it.speedup && *it.speedup >= target) {
          o.tokens_to_target = it.tokens_so_far;
          o.attempts_to_target = it.iteration;
          tokens[i].push_back(static_cast<double>(std::max<int64_t>(it.tokens_so_far, 1)));
          attempts[i].push_back(it.iteration);
          break;
        }
      }
    }
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    TargetFigures& t = runs[i].tokens_to_target;
    t.ops = n_target;
    t.reached = static_cast<int>(tokens[i].size());
    t.geomean = geomean(tokens[i]);
    t.median = median(tokens[i]);
    t.attempts_mean = mean(attempts[i]);
    t.over = fmt::format("the {} of the {} with a target (within {:.0f}% of the best speedup {}) that this run reached",
                         plural(t.reached, "operator", "operators"), n_target,
                         100 * (1 - k_target_fraction),
                         runs.size() == 1 ? "it reached" : "any compared run reached");
  }
}

std::vector<std::pair<double, double>> fast_p_curve(const RunFigures& r, int n_ops, bool vs_library,
                                                    double p_max) {
  std::vector<double> s;
  for (const auto& o : r.ops) {
    if (!o.solved) continue;
    auto v = vs_library ? o.speedup_vs_library : o.speedup_vs_reference;
    if (v && *v > 0) s.push_back(*v);
  }
  std::sort(s.begin(), s.end());
  std::vector<std::pair<double, double>> out;
  out.emplace_back(0.0, fast_p(s, n_ops, 0.0));
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] > p_max) break;
    if (i + 1 < s.size() && s[i + 1] == s[i]) continue;
    out.emplace_back(s[i], fast_p(s, n_ops, s[i]));
  }
  return out;
}

namespace {

// The runs' labels (given or derived), distinct, for distinct run directories.
Result<std::vector<std::string>> run_labels(const std::vector<RunData>& runs, const ReportOptions& options) {
  std::vector<std::string> labels = options.labels;
  if (labels.empty()) {
    labels = derive_labels(runs);
  } else if (labels.size() != runs.size()) {
    return fail(ErrorKind::usage, "--labels names {} runs but {} run directories were given",
                labels.size(), runs.size());
  }
  if (!all_distinct(labels))
    return fail(ErrorKind::usage, "run labels must be distinct (got {})", join_labels(labels));
  std::set<std::string> dirs;
  for (const auto& r : runs) {
    std::error_code ec;
    auto canon = fs::weakly_canonical(r.dir, ec);
    if (!dirs.insert((ec ? r.dir : canon).string()).second) {
      return fail(ErrorKind::usage, "{} is given twice", r.dir.string());
    }
  }
  return labels;
}

// The operator set every figure is over: --ops from the suite, else the union of the runs'
// selections; sorted by (category, name), names distinct.
Result<OpSet> op_set(const std::vector<RunData>& runs, const ReportOptions& options) {
  OpSet set;
  if (!options.op_selectors.empty()) {
    fs::path root = options.suite_root;
    std::error_code ec;
    if (root.empty() && !runs[0].config.suite_root.empty() &&
        fs::is_directory(runs[0].config.suite_root, ec)) {
      root = runs[0].config.suite_root;
    }
    if (root.empty()) root = spec::default_ops_dir();
    auto sel = spec::select_ops(options.op_selectors, root);
    if (!sel) return std::unexpected(std::move(sel.error()).with_context("--ops: "));
    if (sel->empty()) {
      return fail(ErrorKind::usage, "--ops {} selects no operator of the suite in {}",
                  util::join(options.op_selectors, ","), root.string());
    }
    set.ops = std::move(*sel);
    set.origin = fmt::format("--ops {}", util::join(options.op_selectors, ","));
    for (const auto& op : set.ops) set.has_library[op.name] = op.library_path.has_value();
  } else {
    std::set<std::string> seen;
    for (const auto& r : runs) {
      for (const auto& name : r.op_names) {
        if (!seen.insert(name).second) continue;
        set.ops.push_back(r.specs.at(name));
        set.has_library[name] = r.has_library.at(name);
      }
    }
    set.origin = runs.size() == 1
                     ? "the run's selection"
                     : fmt::format("the union of the {} runs' selections", runs.size());
  }
  std::sort(set.ops.begin(), set.ops.end(), [](const spec::OpSpec& a, const spec::OpSpec& b) {
    return std::tie(a.category, a.name) < std::tie(b.category, b.name);
  });
  {
    std::set<std::string> names;
    for (const auto& op : set.ops) {
      if (!names.insert(op.name).second) {
        return fail(ErrorKind::usage,
                    "two operators of the set are both named '{}'; select one of them", op.name);
      }
    }
  }
  for (const auto& op : set.ops) {
    set.cases_total += static_cast<int64_t>(op.cases.size());
    set.with_library += set.has_library[op.name] ? 1 : 0;
  }
  return set;
}

// Notes on what the set leaves out of a run or counts differently.
void note_set_differences(Analysis& an, const std::vector<RunData>& runs) {
  const OpSet& set = an.set;
  for (auto& r : runs) {
    for (auto& w : r.warnings) an.notes.push_back(w);
    for (const auto& op : set.ops) {
      auto it = r.specs.find(op.name);
      if (it != r.specs.end() && it->second.cases.size() != op.cases.size()) {
        an.notes.push_back(fmt::format(
            "operator {} had {} cases in run {} and has {} in the set; the run's count is used "
            "for its figures",
            op.name, it->second.cases.size(), r.config.run_id, op.cases.size()));
      }
    }
    int left_out = 0;
    for (const auto& name : r.op_names) {
      bool in = std::any_of(set.ops.begin(), set.ops.end(),
                            [&](const spec::OpSpec& o) { return o.name == name; });
      left_out += in ? 0 : 1;
    }
    if (left_out > 0) {
      an.notes.push_back(
          fmt::format("run {} selected {} not in the set; they are left out of every figure",
                      r.config.run_id, plural(left_out, "operator", "operators")));
    }
  }
}

// One run's figures over the set: the whole set, per op, per level and category, the order it
// started the ops in (a note when it is not complete).
RunFigures run_figures(const RunData& r, const std::string& label, Analysis& an) {
  const OpSet& set = an.set;
  std::vector<const spec::OpSpec*> all;
  for (const auto& op : set.ops) all.push_back(&op);
  RunFigures f;
  f.label = label;
  f.run = &r;
  f.figures = group_figures(r, all);
  for (const auto& op : set.ops) {
    auto sel = r.specs.find(op.name);
    bool selected = sel != r.specs.end();
    auto st = selected ? r.states.find(op.name) : r.states.end();
    f.ops.push_back(op_figures(selected ? sel->second : op,
                               st != r.states.end() ? &st->second : nullptr, selected,
                               set.has_library.at(op.name)));
  }
  std::map<int, std::vector<const spec::OpSpec*>> levels;
  std::map<std::string, std::vector<const spec::OpSpec*>> categories;
  for (const auto& op : set.ops) {
    levels[op.level].push_back(&op);
    categories[op.category].push_back(&op);
  }
  for (const auto& [level, ops] : levels) {
    f.by_level.push_back(
        {fmt::format("level {}", level), static_cast<int>(ops.size()), group_figures(r, ops)});
  }
  for (const auto& [cat, ops] : categories) {
    f.by_category.push_back({cat, static_cast<int>(ops.size()), group_figures(r, ops)});
  }
  std::map<std::string, std::vector<const spec::OpSpec*>> experience;
  for (size_t i = 0; i < set.ops.size(); ++i) {
    if (!f.ops[i].experience.empty()) experience[f.ops[i].experience].push_back(&set.ops[i]);
  }
  for (const auto& [group, ops] : experience) {
    f.by_experience.push_back({group, static_cast<int>(ops.size()), group_figures(r, ops)});
  }
  std::vector<std::pair<int64_t, std::string>> order;
  for (const auto& o : f.ops) {
    auto seq = r.started_seq.find(o.name);
    if (o.selected && seq != r.started_seq.end()) order.emplace_back(seq->second, o.name);
  }
  std::sort(order.begin(), order.end());
  for (auto& [seq, name] : order) f.stream.push_back(name);
  if (!r.complete()) {
    int done = 0;
    for (const auto& name : r.op_names) {
      auto st = r.states.find(name);
      done += st != r.states.end() && st->second.done;
    }
    an.notes.push_back(fmt::format(
        "run {} ({}) is not complete: {} of {} selected operators finished; unfinished ones "
        "count with what they reached",
        r.config.run_id, f.label, done, r.op_names.size()));
  }
  return f;
}

// Where a run did not beat the library on an op it finished (issue 31: say so, don't hide it):
// solved but slower than the library, with the measured figures, or no correct kernel at all.
void note_library_not_beaten(Analysis& an) {
  for (const auto& f : an.figures) {
    for (const auto& o : f.ops) {
      if (!o.selected || !o.done || !o.has_library) continue;
      std::string stop = o.stop_reason.empty() ? "" : fmt::format("; stop: {}", o.stop_reason);
      std::string library = o.library_config.empty() ? "the library" : fmt::format("the library ({}{})", o.library_config,
                                                                                   o.library_forced ? ", forced by " + o.library_forced_by : "");
      if (!o.solved) {
        an.notes.push_back(fmt::format("{}: {} did not beat {}: no correct kernel in {}{}", f.label, o.name, library,
                                       plural(o.attempts, "attempt", "attempts"), stop));
      } else if (o.speedup_vs_library && *o.speedup_vs_library < 1.0) {
        std::string roof = o.fraction_of_roofline ? fmt::format(", {:.0f}% of the roofline", 100 * *o.fraction_of_roofline) : "";
        an.notes.push_back(fmt::format("{}: {} did not beat {} in {}: its best kernel is {:.2f}x the library, {:.2f}x the "
                                       "reference{}{}",
                                       f.label, o.name, library, plural(o.attempts, "attempt", "attempts"),
                                       *o.speedup_vs_library, o.speedup_vs_reference.value_or(0), roof, stop));
      }
    }
  }
}

// The operators solved in every run, and the means over them.
void common_set_means(Analysis& an) {
  const OpSet& set = an.set;
  for (const auto& op : set.ops) {
    bool every = std::all_of(an.figures.begin(), an.figures.end(),
                             [&](const RunFigures& f) { return f.op(op.name)->solved; });
    if (every) an.solved_in_every_run.push_back(op.name);
  }
  int n_common = static_cast<int>(an.solved_in_every_run.size());
  an.common_set =
      an.figures.size() == 1
          ? fmt::format("the {} solved", plural(n_common, "operator", "operators"))
          : fmt::format("the {} solved in every run", plural(n_common, "operator", "operators"));
  for (const auto& name : an.solved_in_every_run) {
    bool lib = std::all_of(an.figures.begin(), an.figures.end(), [&](const RunFigures& f) {
      return f.op(name)->speedup_vs_library.has_value();
    });
    an.common_with_library += lib;
  }
  for (const auto& f : an.figures) {
    std::vector<double> ref, lib;
    for (const auto& name : an.solved_in_every_run) {
      const OpFigures* o = f.op(name);
      if (o->speedup_vs_reference) ref.push_back(*o->speedup_vs_reference);
      bool all_lib = std::all_of(an.figures.begin(), an.figures.end(), [&](const RunFigures& g) {
        return g.op(name)->speedup_vs_library.has_value();
      });
      if (all_lib) lib.push_back(*o->speedup_vs_library);
    }
    an.common_geomean_reference[f.label] = geomean(ref);
    an.common_geomean_library[f.label] = geomean(lib);
  }
}

// The paired samples of two runs, operator by operator.
struct PairedSamples {
  std::vector<double> pa, ta, pb, tb, sa, sb;
  std::vector<double> ref_a, ref_b, lib_a, lib_b, roof_a, roof_b, tok_a, tok_b, cost_a, cost_b, first_a, first_b;
  std::vector<double> target_a, target_b;  // tokens to target, operators both reached
  std::vector<double> billed_a, billed_b;  // billed-equivalent tokens, operators both selected
  bool cached = false;                     // either run had cached prompt tokens
};

// The paired metrics of c (pass rate, solved, speedups, roofline, attempts, tokens, cost).
void add_paired_metrics(Comparison& c, const PairedSamples& x, int n, const BootstrapOptions& bo) {
  std::string both = fmt::format("{} and {}", c.baseline, c.other);
  auto rate = [](const std::vector<double>& num,
                 const std::vector<double>& den) -> std::optional<double> {
    double a = 0, b = 0;
    for (double v : num) a += v;
    for (double v : den) b += v;
    return b > 0 ? std::optional<double>(a / b) : std::nullopt;
  };
  auto sum = [](const std::vector<double>& v) {
    double s = 0;
    for (double e : v) s += e;
    return s;
  };
  std::string all_set = fmt::format("all {} of the set", plural(n, "operator", "operators"));
  c.metrics.push_back({"pass_rate", "pass rate over cases", "difference", "points", all_set, n,
                       rate(x.pa, x.ta), rate(x.pb, x.tb),
                       bootstrap_rate_difference(x.pa, x.ta, x.pb, x.tb, bo)});
  c.metrics.push_back({"solve_rate", "operators solved", "difference", "points", all_set, n,
                       mean(x.sa), mean(x.sb), bootstrap_mean_difference(x.sa, x.sb, bo)});
  int n_ref = static_cast<int>(x.ref_a.size());
  std::string solved_both =
      fmt::format("the {} solved by both {}", plural(n_ref, "operator", "operators"), both);
  c.metrics.push_back({"geomean_speedup_vs_reference", "geomean speedup vs reference", "ratio",
                       "speedup", solved_both, n_ref, geomean(x.ref_a), geomean(x.ref_b),
                       bootstrap_geomean_ratio(x.ref_a, x.ref_b, bo)});
  int n_lib = static_cast<int>(x.lib_a.size());
  c.metrics.push_back(
      {"geomean_speedup_vs_library", "geomean speedup vs library", "ratio", "speedup",
       fmt::format("the {} solved by both {} that have a library baseline",
                   plural(n_lib, "operator", "operators"), both),
       n_lib, geomean(x.lib_a), geomean(x.lib_b), bootstrap_geomean_ratio(x.lib_a, x.lib_b, bo)});
  int n_roof = static_cast<int>(x.roof_a.size());
  c.metrics.push_back(
      {"fraction_of_roofline", "geomean fraction of roofline", "ratio", "fraction",
       fmt::format("the {} solved by both {} with timed cases",
                   plural(n_roof, "operator", "operators"), both),
       n_roof, geomean(x.roof_a), geomean(x.roof_b), bootstrap_geomean_ratio(x.roof_a, x.roof_b, bo)});
  int n_first = static_cast<int>(x.first_a.size());
  c.metrics.push_back({"attempts_to_first_correct", "attempts to first correct (mean)",
                       "difference", "attempts", solved_both, n_first, mean(x.first_a),
                       mean(x.first_b), bootstrap_mean_difference(x.first_a, x.first_b, bo)});
  int n_target = static_cast<int>(x.target_a.size());
  c.metrics.push_back({"tokens_to_target", "tokens to target (geomean)", "ratio", "tokens",
                       fmt::format("the {} both {} brought within {:.0f}% of the best speedup any compared run reached",
                                   plural(n_target, "operator", "operators"), both, 100 * (1 - k_target_fraction)),
                       n_target, geomean(x.target_a), geomean(x.target_b),
                       bootstrap_geomean_ratio(x.target_a, x.target_b, bo)});
  int n_tok = static_cast<int>(x.tok_a.size());
  std::string selected_both =
      fmt::format("the {} both {} selected", plural(n_tok, "operator", "operators"), both);
  c.metrics.push_back({"tokens", "tokens (prompt + completion), total", "ratio", "tokens",
                       selected_both, n_tok, sum(x.tok_a), sum(x.tok_b),
                       bootstrap_ratio_of_sums(x.tok_a, x.tok_b, bo)});
  if (x.cached) {
    c.metrics.push_back({"tokens_billed_equivalent", "billed-equivalent tokens, total", "ratio", "tokens",
                         selected_both, n_tok, sum(x.billed_a), sum(x.billed_b),
                         bootstrap_ratio_of_sums(x.billed_a, x.billed_b, bo)});
  }
  if (sum(x.cost_a) > 0 && sum(x.cost_b) > 0) {
    c.metrics.push_back({"cost_usd", "cost, total", "ratio", "usd", selected_both, n_tok,
                         sum(x.cost_a), sum(x.cost_b),
                         bootstrap_ratio_of_sums(x.cost_a, x.cost_b, bo)});
  }
}

// Run B against the baseline A: the per-op pairs and the paired metrics with bootstrap intervals.
Comparison compare_runs(const RunFigures& A, const RunFigures& B, const OpSet& set, const BootstrapOptions& bo) {
  PairedSamples x;
  Comparison c;
  c.baseline = A.label;
  c.other = B.label;
  for (size_t k = 0; k < set.ops.size(); ++k) {
    const OpFigures& a = A.ops[k];
    const OpFigures& b = B.ops[k];
    OpPair p{a.name, &a, &b, std::nullopt};
    x.pa.push_back(a.cases_passed);
    x.ta.push_back(a.cases_total);
    x.pb.push_back(b.cases_passed);
    x.tb.push_back(b.cases_total);
    x.sa.push_back(a.solved ? 1 : 0);
    x.sb.push_back(b.solved ? 1 : 0);
    if (a.solved && b.solved && a.speedup_vs_reference && b.speedup_vs_reference &&
        *a.speedup_vs_reference > 0 && *b.speedup_vs_reference > 0) {
      x.ref_a.push_back(*a.speedup_vs_reference);
      x.ref_b.push_back(*b.speedup_vs_reference);
      p.speedup_ratio = *b.speedup_vs_reference / *a.speedup_vs_reference;
      if (a.speedup_vs_library && b.speedup_vs_library && *a.speedup_vs_library > 0 &&
          *b.speedup_vs_library > 0) {
        x.lib_a.push_back(*a.speedup_vs_library);
        x.lib_b.push_back(*b.speedup_vs_library);
      }
      if (a.fraction_of_roofline && b.fraction_of_roofline && *a.fraction_of_roofline > 0 &&
          *b.fraction_of_roofline > 0) {
        x.roof_a.push_back(*a.fraction_of_roofline);
        x.roof_b.push_back(*b.fraction_of_roofline);
      }
      if (a.attempts_to_first_correct && b.attempts_to_first_correct) {
        x.first_a.push_back(*a.attempts_to_first_correct);
        x.first_b.push_back(*b.attempts_to_first_correct);
      }
    }
    if (a.selected && b.selected) {
      x.tok_a.push_back(static_cast<double>(a.tokens()));
      x.tok_b.push_back(static_cast<double>(b.tokens()));
      x.cost_a.push_back(a.cost_usd);
      x.cost_b.push_back(b.cost_usd);
      x.billed_a.push_back(static_cast<double>(a.tokens_billed_equivalent));
      x.billed_b.push_back(static_cast<double>(b.tokens_billed_equivalent));
      x.cached = x.cached || a.tokens_cached > 0 || b.tokens_cached > 0;
    }
    if (a.tokens_to_target && b.tokens_to_target) {
      x.target_a.push_back(static_cast<double>(std::max<int64_t>(*a.tokens_to_target, 1)));
      x.target_b.push_back(static_cast<double>(std::max<int64_t>(*b.tokens_to_target, 1)));
    }
    c.ops.push_back(p);
  }
  add_paired_metrics(c, x, static_cast<int>(set.ops.size()), bo);
  return c;
}

}  // namespace

Result<Analysis> analyse(std::vector<RunData> runs, const ReportOptions& options) {
  if (runs.empty()) return fail(ErrorKind::usage, "no run directories given");
  Analysis an;
  an.bootstrap = options.bootstrap;
  KOPE_ASSIGN(std::vector<std::string> labels, run_labels(runs, options));
  KOPE_ASSIGN(an.set, op_set(runs, options));
  note_set_differences(an, runs);
  an.runs = std::move(runs);
  for (size_t i = 0; i < an.runs.size(); ++i) an.figures.push_back(run_figures(an.runs[i], labels[i], an));
  compute_tokens_to_target(an.figures);
  note_library_not_beaten(an);
  common_set_means(an);
  // Paired comparisons: the baseline against every other run.
  if (an.figures.size() > 1) {
    size_t base = 0;
    if (!options.baseline.empty()) {
      auto it = std::find(labels.begin(), labels.end(), options.baseline);
      if (it == labels.end()) {
        return fail(ErrorKind::usage, "--baseline {} names no run (the runs are {})",
                    options.baseline, join_labels(labels));
      }
      base = static_cast<size_t>(it - labels.begin());
    }
    for (size_t i = 0; i < an.figures.size(); ++i) {
      if (i != base) an.comparisons.push_back(compare_runs(an.figures[base], an.figures[i], an.set, options.bootstrap));
    }
  }
  return an;
}

}  // namespace kope::report
