#include "run/results.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "eval/library.h"
#include "util/strings.h"

namespace kope::run {

using nlohmann::json;

namespace {

json opt(std::optional<double> v) { return v ? json(*v) : json(nullptr); }

std::optional<double> geomean(const std::vector<double>& v) {
  if (v.empty()) return std::nullopt;
  double s = 0;
  for (double x : v) s += std::log(std::max(x, 1e-300));
  return std::exp(s / static_cast<double>(v.size()));
}

std::optional<double> mean(const std::vector<double>& v) {
  if (v.empty()) return std::nullopt;
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

std::optional<double> median(std::vector<double> v) {
  if (v.empty()) return std::nullopt;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string pct(const json& v) { return v.is_number() ? fmt::format("{:.1f}%", 100 * v.get<double>()) : "-"; }
std::string times(const json& v) { return v.is_number() ? fmt::format("{:.2f}x", v.get<double>()) : "-"; }

// An op's cached-token figures, over its attempts and a pending answer.
struct CacheFigures {
  int64_t cached = 0;
  int64_t write = 0;
  bool estimated = false;
  double saved = 0;                  // sum of cached x (1 - ratio): what caching took off
  std::optional<double> ratio;       // the latest call's cached price ratio
};

CacheFigures cache_figures(const OpState& st) {
  CacheFigures c;
  auto add = [&](int64_t cached, int64_t write, bool estimated, std::optional<double> ratio) {
    c.cached += cached;
    c.write += write;
    c.estimated = c.estimated || (estimated && cached > 0);
    // A call without a recorded ratio (none can have cached tokens) saves nothing.
    c.saved += static_cast<double>(cached) * (1.0 - std::clamp(ratio.value_or(1.0), 0.0, 1.0));
    if (ratio) c.ratio = ratio;
  };
  for (const auto& a : st.attempts)
    add(a.tokens_cached, a.tokens_cache_write, a.tokens_cached_estimated, a.cached_price_ratio);
  if (st.pending)
    add(st.pending->tokens_cached, st.pending->tokens_cache_write, st.pending->tokens_cached_estimated,
        st.pending->cached_price_ratio);
  return c;
}

}  // namespace

json op_result(const spec::OpSpec& op, const OpState& st) {
  const Attempt* inc = st.incumbent();
  json j;
  j["name"] = op.name;
  j["category"] = op.category;
  j["level"] = op.level;
  j["dir"] = op.dir.string();
  j["solved"] = inc != nullptr;
  j["attempts"] = st.attempts.size();
  int correct = 0;
  std::optional<int> first_correct;
  int best_passed = 0;
  std::map<std::string, int> verdicts, labels;
  int disturbed = 0;
  std::map<std::string, int64_t> tiers{{"system", 0}, {"hot", 0}, {"warm", 0}, {"cold", 0}};
  for (const auto& a : st.attempts) {
    if (a.correct()) {
      ++correct;
      if (!first_correct) first_correct = a.iteration;
    }
    best_passed = std::max(best_passed, a.cases_passed);
    ++verdicts[std::string(eval::verdict_name(a.verdict))];
    if (a.timing_disturbed()) ++disturbed;
    ++labels[std::string(label_name(a.outcome))];
    for (const auto& [t, n] : a.tier_tokens) tiers[t] += n;
  }
  int cases_total = static_cast<int>(op.cases.size());
  j["correct_attempts"] = correct;
  j["cases_total"] = cases_total;
  j["cases_passed"] = inc ? cases_total : std::min(best_passed, cases_total);
  j["attempts_to_first_correct"] = first_correct ? json(*first_correct) : json(nullptr);
  j["attempts_to_best"] = inc ? json(inc->iteration) : json(nullptr);
  j["best_speedup_vs_reference"] = inc ? opt(inc->speedup_vs_reference) : json(nullptr);
  j["best_speedup_vs_library"] = inc ? opt(inc->speedup_vs_library) : json(nullptr);
  j["fraction_of_roofline"] = inc ? opt(inc->fraction_of_roofline) : json(nullptr);
  // What the library baseline ran with (the incumbent's evaluation, else the latest that timed
  // it), and whether the environment forced it: a speedup vs a forced library says so.
  std::optional<eval::LibraryConfig> lib = inc ? inc->library_config : std::nullopt;
  for (auto a = st.attempts.rbegin(); !lib && a != st.attempts.rend(); ++a) lib = a->library_config;
  j["library_config"] = lib ? eval::library_config_to_json(*lib) : json(nullptr);
  j["library_forced"] = lib && lib->forced;
  j["best_optimisation"] = inc ? json(inc->optimisation) : json(nullptr);
  j["best_code_file"] = inc ? json(inc->code_file) : json(nullptr);
  // The best kernel's figures were measured under outside load (see eval::CaseTiming::disturbed).
  j["best_timing_disturbed"] = inc ? json(inc->timing_disturbed()) : json(nullptr);
  j["disturbed_attempts"] = disturbed;
  // Quarantined wins (held back from the incumbent) and what their re-verification found.
  int quarantined = 0;
  for (const auto& a : st.attempts) quarantined += !a.quarantine_reason.empty();
  j["quarantined_attempts"] = quarantined;
  json reverified = json::array();
  for (const auto& [k, r] : st.reverified) {
    reverified.push_back({{"iteration", k}, {"confirmed", r.confirmed}, {"promoted", r.promoted},
                          {"quarantine_reason", r.quarantine_reason}, {"reason", r.reason}});
  }
  j["reverified"] = reverified;
  j["best_reverified"] = inc && st.promoted == inc->iteration;
  // Where the best kernel came from: this run's model ("llm") or a replay of a memory case.
  j["best_policy"] = inc ? json(std::string(policy_name(inc->policy))) : json(nullptr);
  j["best_source_case"] = inc && inc->source_case_id ? json(*inc->source_case_id) : json(nullptr);
  auto id = inc ? st.case_ids.find(inc->iteration) : st.case_ids.end();
  j["best_case_id"] = id != st.case_ids.end() ? json(id->second) : json(nullptr);
  j["tokens_prompt"] = st.tokens_prompt();
  j["tokens_completion"] = st.tokens_completion();
  // Prompt caching: cached prompt tokens count at the price ratio of the profile that answered
  // (billed-equivalent = uncached prompt + cached x ratio + completion, at face value).
  CacheFigures cache = cache_figures(st);
  j["tokens_cached"] = cache.cached;
  j["tokens_cache_write"] = cache.write;
  j["tokens_cached_estimated"] = cache.estimated;
  j["tokens_billed_equivalent"] =
      st.tokens_prompt() + st.tokens_completion() - static_cast<int64_t>(std::llround(cache.saved));
  j["cached_price_ratio"] = opt(cache.ratio);
  j["cost_usd"] = st.cost_usd();
  j["tier_tokens"] = tiers;
  j["verdicts"] = verdicts;
  j["labels"] = labels;
  int lessons = 0;
  for (const auto& [k, r] : st.reflections) lessons += static_cast<int>(r.lesson_ids.size());
  j["reflections"] = st.reflections.size();
  j["lesson_operations"] = lessons;
  j["done"] = st.done;
  j["stop_reason"] = st.done ? json(st.stop_reason) : json(nullptr);
  j["errors"] = st.errors;
  j["wall_seconds"] = st.wall_seconds();
  // What memory held about the op when it started (OpState::experience); null for an op that
  // never started or a run written before the contamination guard.
  j["experience"] = st.experience.empty() ? json(nullptr) : json(st.experience);
  return j;
}

namespace {

// The p of fast_p: correct and more than p times faster.
const std::vector<double> k_fast_p = {0, 1, 1.5, 2};

// What the run-level figures sum over the ops' entries.
struct Totals {
  int64_t cases_passed = 0, cases_total = 0, tok_p = 0, tok_c = 0, attempts = 0;
  int64_t tok_cached = 0, tok_cache_write = 0, tok_billed = 0;
  bool cached_estimated = false;
  std::set<double> ratios;  // the cached price ratios of the ops' calls
  double cost = 0;
  int solved = 0, done = 0, with_library = 0, best_disturbed = 0, disturbed_attempts = 0;
  std::vector<double> sp_ref, sp_lib, roof, first, best;
  std::map<std::string, int64_t> tiers{{"system", 0}, {"hot", 0}, {"warm", 0}, {"cold", 0}};
  std::vector<int> fast = std::vector<int>(k_fast_p.size(), 0);
  std::vector<int> fast_lib = std::vector<int>(k_fast_p.size(), 0);
  std::vector<std::string> forced_ops;
  std::set<std::string> forced_by;

  // Adds one op's entry `r` (op_result of `op` and its state `st`).
  void add(const spec::OpSpec& op, const OpState& st, const json& r);
  // The "figures" object over `n` selected ops.
  json figures(size_t n) const;
};

void Totals::add(const spec::OpSpec& op, const OpState& st, const json& r) {
  cases_passed += r["cases_passed"].get<int64_t>();
  cases_total += r["cases_total"].get<int64_t>();
  tok_p += r["tokens_prompt"].get<int64_t>();
  tok_c += r["tokens_completion"].get<int64_t>();
  tok_cached += r.value("tokens_cached", int64_t{0});
  tok_cache_write += r.value("tokens_cache_write", int64_t{0});
  tok_billed += r.value("tokens_billed_equivalent", int64_t{0});
  cached_estimated = cached_estimated || r.value("tokens_cached_estimated", false);
  if (r.contains("cached_price_ratio") && r["cached_price_ratio"].is_number()) ratios.insert(r["cached_price_ratio"].get<double>());
  attempts += r["attempts"].get<int64_t>();
  cost += r["cost_usd"].get<double>();
  for (const auto& [t, n] : r["tier_tokens"].items()) tiers[t] += n.get<int64_t>();
  if (st.done) ++done;
  if (op.library_path) ++with_library;
  disturbed_attempts += r["disturbed_attempts"].get<int>();
  if (r["best_timing_disturbed"].is_boolean() && r["best_timing_disturbed"].get<bool>()) ++best_disturbed;
  if (r["library_forced"].get<bool>()) {
    forced_ops.push_back(op.name);
    forced_by.insert(r["library_config"].value("forced_by", ""));
  }
  if (r["solved"].get<bool>()) {
    ++solved;
    double s = r["best_speedup_vs_reference"].is_number() ? r["best_speedup_vs_reference"].get<double>() : 0;
    if (s > 0) sp_ref.push_back(s);
    for (size_t i = 0; i < k_fast_p.size(); ++i) fast[i] += s > k_fast_p[i] ? 1 : 0;
    if (r["best_speedup_vs_library"].is_number()) {
      double l = r["best_speedup_vs_library"].get<double>();
      sp_lib.push_back(l);
      for (size_t i = 0; i < k_fast_p.size(); ++i) fast_lib[i] += l > k_fast_p[i] ? 1 : 0;
    }
    if (r["fraction_of_roofline"].is_number()) roof.push_back(r["fraction_of_roofline"].get<double>());
    first.push_back(r["attempts_to_first_correct"].get<double>());
    best.push_back(r["attempts_to_best"].get<double>());
  }
}

json Totals::figures(size_t n) const {
  json f;
  f["ops"] = n;
  f["ops_done"] = done;
  f["solved"] = solved;
  f["solve_rate"] = n ? json(static_cast<double>(solved) / static_cast<double>(n)) : json(nullptr);
  f["cases_passed"] = cases_passed;
  f["cases_total"] = cases_total;
  f["pass_rate"] = cases_total ? json(static_cast<double>(cases_passed) / static_cast<double>(cases_total)) : json(nullptr);
  f["pass_rate_over"] = fmt::format(
      "all {} cases of the {} selected operators (an unsolved operator counts the cases its best attempt passed; an "
      "unattempted one counts all its cases failed)",
      cases_total, n);
  f["geomean_speedup_vs_reference"] = opt(geomean(sp_ref));
  f["geomean_speedup_vs_reference_over"] = fmt::format("the {} solved operators", sp_ref.size());
  f["geomean_speedup_vs_library"] = opt(geomean(sp_lib));
  f["geomean_speedup_vs_library_over"] =
      fmt::format("the {} solved operators that have a library baseline ({} selected have one)", sp_lib.size(), with_library);
  json fp, fpl;
  for (size_t i = 0; i < k_fast_p.size(); ++i) {
    std::string key = fmt::format("{}", k_fast_p[i]);
    fp[key] = n ? static_cast<double>(fast[i]) / static_cast<double>(n) : 0.0;
    fpl[key] = with_library ? json(static_cast<double>(fast_lib[i]) / static_cast<double>(with_library)) : json(nullptr);
  }
  f["library_forced_ops"] = forced_ops;
  f["library_forced_by"] = util::join(std::vector<std::string>(forced_by.begin(), forced_by.end()), "; ");
  f["fast_p"] = fp;
  f["fast_p_over"] = fmt::format("all {} selected operators: the share that is correct and more than p times faster than "
                                 "the reference",
                                 n);
  f["fast_p_vs_library"] = fpl;
  f["fast_p_vs_library_over"] = fmt::format("the {} selected operators with a library baseline", with_library);
  f["fraction_of_roofline_geomean"] = opt(geomean(roof));
  f["fraction_of_roofline_median"] = opt(median(roof));
  f["fraction_of_roofline_over"] = fmt::format("the {} solved operators with timed cases", roof.size());
  f["disturbed_best"] = best_disturbed;
  f["disturbed_best_over"] = fmt::format("the {} solved operators: those whose best kernel was timed under outside load", solved);
  f["disturbed_attempts"] = disturbed_attempts;
  f["tokens_prompt"] = tok_p;
  f["tokens_completion"] = tok_c;
  f["tokens_total"] = tok_p + tok_c;
  f["tokens_per_solved_op"] = solved ? json(static_cast<double>(tok_p + tok_c) / solved) : json(nullptr);
  f["tokens_prompt_per_solved_op"] = solved ? json(static_cast<double>(tok_p) / solved) : json(nullptr);
  f["tokens_completion_per_solved_op"] = solved ? json(static_cast<double>(tok_c) / solved) : json(nullptr);
  f["tokens_cached"] = tok_cached;
  f["tokens_cache_write"] = tok_cache_write;
  f["tokens_cached_estimated"] = cached_estimated;
  f["tokens_billed_equivalent"] = tok_billed;
  f["tokens_billed_equivalent_per_solved_op"] = solved ? json(static_cast<double>(tok_billed) / solved) : json(nullptr);
  f["cached_price_ratio"] = ratios.size() == 1 ? json(*ratios.begin()) : json(nullptr);
  f["tokens_billed_equivalent_over"] = fmt::format(
      "every token of the {} selected operators, cached prompt tokens counted at {} of an uncached one (completion and "
      "cache-write tokens at face value)",
      n, ratios.empty() ? std::string("their price ratio") : ratios.size() == 1 ? fmt::format("{:g}", *ratios.begin())
                                                                                 : std::string("their profiles' ratios"));
  f["tier_tokens"] = tiers;
  f["cost_usd"] = cost;
  f["attempts"] = attempts;
  f["attempts_to_first_correct_mean"] = opt(mean(first));
  f["attempts_to_first_correct_median"] = opt(median(first));
  f["attempts_to_best_mean"] = opt(mean(best));
  f["attempts_to_best_median"] = opt(median(best));
  f["attempts_over"] = fmt::format("the {} solved operators", solved);
  return f;
}

}  // namespace

json compute_results(const json& header, const std::vector<spec::OpSpec>& ops, const std::map<std::string, OpState>& states) {
  json out = header;
  json list = json::array();
  static const OpState empty;
  Totals totals;
  std::map<std::string, std::pair<Totals, size_t>> by_experience;  // group -> totals, ops
  for (const auto& op : ops) {
    auto it = states.find(op.name);
    const OpState& st = it == states.end() ? empty : it->second;
    json r = op_result(op, st);
    totals.add(op, st, r);
    if (!st.experience.empty()) {
      auto& [group, n] = by_experience[st.experience];
      group.add(op, st, r);
      ++n;
    }
    list.push_back(std::move(r));
  }
  out["figures"] = totals.figures(ops.size());
  // The same figures per group of what memory held about the ops ("held-out", "seen",
  // "unseen"), each over its own operators.
  json groups = json::object();
  for (const auto& [name, group] : by_experience) groups[name] = group.first.figures(group.second);
  out["figures_by_experience"] = groups;
  out["ops"] = list;
  return out;
}

std::string results_summary(const json& r) {
  const json& f = r.at("figures");
  std::string out;
  out += fmt::format("solved {}/{} operators; pass rate {} ({} of {} cases)\n", f["solved"].get<int>(), f["ops"].get<int>(),
                     pct(f["pass_rate"]), f["cases_passed"].get<int64_t>(), f["cases_total"].get<int64_t>());
  std::string forced;
  if (f.contains("library_forced_ops") && !f["library_forced_ops"].empty()) {
    forced = fmt::format(" [library forced on {} operator{}: {}]", f["library_forced_ops"].size(),
                         f["library_forced_ops"].size() == 1 ? "" : "s", f.value("library_forced_by", ""));
  }
  out += fmt::format("geomean speedup vs reference {} (over {}), vs library {}{}\n", times(f["geomean_speedup_vs_reference"]),
                     f["geomean_speedup_vs_reference_over"].get<std::string>(), times(f["geomean_speedup_vs_library"]), forced);
  if (f.value("disturbed_best", 0) > 0) {
    out += fmt::format("timing disturbed by outside load: the best kernel of {} of {} solved operators ({} attempts in all)\n",
                       f["disturbed_best"].get<int>(), f["solved"].get<int>(), f.value("disturbed_attempts", 0));
  }
  const json& fp = f["fast_p"];
  out += fmt::format("fast_0 {}  fast_1 {}  fast_1.5 {}  fast_2 {}\n", pct(fp["0"]), pct(fp["1"]), pct(fp["1.5"]), pct(fp["2"]));
  out += fmt::format("tokens: {} prompt + {} completion", f["tokens_prompt"].get<int64_t>(), f["tokens_completion"].get<int64_t>());
  if (f["tokens_per_solved_op"].is_number()) out += fmt::format(" ({:.0f} per solved operator)", f["tokens_per_solved_op"].get<double>());
  if (f["cost_usd"].get<double>() > 0) out += fmt::format(", ${:.4f}", f["cost_usd"].get<double>());
  out += "\n";
  if (f["tokens_total"].get<int64_t>() > 0 && f.contains("tokens_billed_equivalent")) {
    const json& ratio = f["cached_price_ratio"];
    out += fmt::format("cached prompt tokens {}{}; billed-equivalent {}", f["tokens_cached"].get<int64_t>(),
                       f.value("tokens_cached_estimated", false) ? " (estimated: the provider reported no usage)" : "",
                       f["tokens_billed_equivalent"].get<int64_t>());
    if (f["tokens_billed_equivalent_per_solved_op"].is_number())
      out += fmt::format(" ({:.0f} per solved operator)", f["tokens_billed_equivalent_per_solved_op"].get<double>());
    if (ratio.is_number()) out += fmt::format(", cached tokens at {:g}x", ratio.get<double>());
    else if (f["tokens_cached"].get<int64_t>() > 0) out += ", cached tokens at their profiles' ratios";
    out += "\n";
  }
  if (r.contains("figures_by_experience")) {
    for (const auto& [name, g] : r["figures_by_experience"].items()) {
      out += fmt::format("  {} operators: {} of {} solved, pass rate {}, geomean vs reference {}, vs library {}, {} tokens\n",
                         name, g["solved"].get<int>(), g["ops"].get<int>(), pct(g["pass_rate"]),
                         times(g["geomean_speedup_vs_reference"]), times(g["geomean_speedup_vs_library"]),
                         g["tokens_total"].get<int64_t>());
    }
  }
  return out;
}

}  // namespace kope::run
