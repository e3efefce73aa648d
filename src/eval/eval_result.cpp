// Verdict names and the EvalResult JSON form (the `kope eval --json` object).
#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "eval/library.h"
#include "eval/measure.h"
#include "kope/eval.h"
#include "util/strings.h"

namespace kope::eval {

namespace {

using json = nlohmann::json;

constexpr std::pair<Verdict, std::string_view> k_names[] = {
    {Verdict::correct, "correct"},           {Verdict::wrong_result, "wrong_result"},
    {Verdict::compile_error, "compile_error"}, {Verdict::runtime_error, "runtime_error"},
    {Verdict::timeout, "timeout"},           {Verdict::resource_limit, "resource_limit"},
    {Verdict::rejected, "rejected"},         {Verdict::bad_answer, "bad_answer"},
};

// JSON has no NaN or infinity: such values are written as null.
json number(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }
json optional_number(const std::optional<double>& v) { return v ? number(*v) : json(nullptr); }

double get_number(const json& j, const char* key, double fallback = 0) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  return it->get<double>();
}

std::optional<double> get_optional(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  return it->get<double>();
}

json comparison_json(const IncumbentComparison& c) {
  json cases = json::array();
  for (const auto& k : c.cases) {
    cases.push_back({{"case", k.case_index},
                     {"label", k.label},
                     {"ratio", number(k.ratio)},
                     {"lower", number(k.lower)},
                     {"upper", optional_number(k.upper)},
                     {"pairs", k.pairs},
                     {"pairs_total", k.pairs_total},
                     {"looks", k.looks},
                     {"contention", number(k.contention)},
                     {"seconds", number(k.seconds)},
                     {"candidate_us", number(k.candidate_us)},
                     {"incumbent_us", number(k.incumbent_us)},
                     {"candidate_contention", number(k.candidate_contention)},
                     {"incumbent_contention", number(k.incumbent_contention)},
                     {"outside_load", number(k.outside_load)}});
  }
  return {{"decision", std::string(incumbent_decision_name(c.decision))},
          {"ratio", number(c.ratio)},
          {"lower", number(c.lower)},
          {"upper", optional_number(c.upper)},
          {"alpha", number(c.alpha)},
          {"margin", number(c.margin)},
          {"pairs", c.pairs},
          {"seconds", number(c.seconds)},
          {"full_timing", c.full_timing},
          {"disturbed", c.disturbed},
          {"contention", number(c.contention)},
          {"outside_load", number(c.outside_load)},
          {"cases", cases},
          {"problem", c.problem.empty() ? json(nullptr) : json(c.problem)}};
}

IncumbentComparison comparison_from(const json& j) {
  IncumbentComparison c;
  c.decision = parse_incumbent_decision(j.value("decision", "unavailable")).value_or(IncumbentDecision::unavailable);
  c.ratio = get_number(j, "ratio", 1);
  c.lower = get_number(j, "lower");
  c.upper = get_optional(j, "upper");
  c.alpha = get_number(j, "alpha", 0.05);
  c.margin = get_number(j, "margin", 0.01);
  c.pairs = j.value("pairs", 0);
  c.seconds = get_number(j, "seconds");
  c.full_timing = j.value("full_timing", false);
  c.disturbed = j.value("disturbed", false);
  c.contention = get_number(j, "contention");
  c.outside_load = get_number(j, "outside_load");
  for (const auto& k : j.value("cases", json::array())) {
    CaseComparison cc;
    cc.case_index = k.value("case", 0);
    cc.label = k.value("label", "");
    cc.ratio = get_number(k, "ratio", 1);
    cc.lower = get_number(k, "lower");
    cc.upper = get_optional(k, "upper");
    cc.pairs = k.value("pairs", 0);
    cc.pairs_total = k.value("pairs_total", 0);
    cc.looks = k.value("looks", 0);
    cc.contention = get_number(k, "contention");
    cc.seconds = get_number(k, "seconds");
    cc.candidate_us = get_number(k, "candidate_us");
    cc.incumbent_us = get_number(k, "incumbent_us");
    cc.candidate_contention = get_number(k, "candidate_contention");
    cc.incumbent_contention = get_number(k, "incumbent_contention");
    cc.outside_load = get_number(k, "outside_load");
    c.cases.push_back(std::move(cc));
  }
  auto p = j.find("problem");
  if (p != j.end() && p->is_string()) c.problem = p->get<std::string>();
  return c;
}

}  // namespace

bool contention_disturbed(double median_contention) { return median_contention >= k_clean_contention; }

bool outside_load_seen(double outside_share) { return outside_share >= k_outside_load; }

bool waits_disturbed(const std::vector<double>& contention, bool used_clean_only) {
  size_t n = contention.size();
  if (n == 0) return false;
  auto count_at_least = [&](double share) {
    return static_cast<size_t>(std::count_if(contention.begin(), contention.end(), [&](double x) { return x >= share; }));
  };
  bool waiting_used = !used_clean_only && static_cast<double>(count_at_least(k_clean_contention)) > k_disturbed_share * static_cast<double>(n);
  return waiting_used || 2 * count_at_least(k_busy_contention) > n;
}

bool timing_disturbed(const CaseTiming& t) { return t.disturbed; }

std::string_view verdict_name(Verdict v) {
  for (const auto& [verdict, name] : k_names) {
    if (verdict == v) return name;
  }
  return "rejected";
}

std::optional<Verdict> parse_verdict(std::string_view s) {
  for (const auto& [verdict, name] : k_names) {
    if (name == s) return verdict;
  }
  return std::nullopt;
}

std::vector<std::string> verdict_name_list() {
  std::vector<std::string> names;
  for (const auto& [verdict, name] : k_names) names.emplace_back(name);
  return names;
}

std::string_view verdict_names() {
  static const std::string names = util::join(verdict_name_list(), ", ");
  return names;
}

std::string EvalResult::to_json() const {
  json j;
  j["verdict"] = std::string(verdict_name(verdict));
  j["message"] = message;
  j["diagnostics"] = diagnostics;
  j["op"] = op;
  j["target"] = target;
  j["toolchain"] = toolchain;
  j["code_hash"] = code_hash;
  j["seed"] = seed;
  json cs = json::array();
  for (const auto& c : cases) {
    cs.push_back({{"case", c.case_index},
                  {"label", c.label},
                  {"ok", c.ok},
                  {"max_abs_err", number(c.max_abs_err)},
                  {"first_mismatch", c.first_mismatch.empty() ? json(nullptr) : json(c.first_mismatch)}});
  }
  j["cases"] = cs;
  json ts = json::array();
  for (const auto& t : timing) {
    json samples = json::array();
    for (double s : t.samples_us) samples.push_back(number(s));
    ts.push_back({{"case", t.case_index},
                  {"label", t.label},
                  {"median_us", number(t.median_us)},
                  {"ci95_us", number(t.ci95_us)},
                  {"samples", samples},
                  {"calls_per_batch", t.calls_per_batch},
                  {"reference_us", number(t.reference_us)},
                  {"reference_ci95_us", number(t.reference_ci95_us)},
                  {"library_us", optional_number(t.library_us)},
                  {"library_ci95_us", optional_number(t.library_ci95_us)},
                  {"roofline_us", number(t.roofline_us)},
                  {"fraction_of_roofline", number(t.fraction_of_roofline)},
                  {"floor_us", number(t.floor_us)},
                  {"fresh_us", number(t.fresh_us)},
                  {"contention", number(t.contention)},
                  {"outside_load", number(t.outside_load)},
                  {"wall_us", optional_number(t.wall_us)},
                  {"disturbed", t.disturbed},
                  {"roofline_bound", t.roofline_bound},
                  {"roofline_gbps", number(t.roofline_gbps)},
                  {"roofline_gflops", number(t.roofline_gflops)},
                  {"roofline_working_set_bytes", t.roofline_working_set_bytes},
                  {"beyond_roofline", t.beyond_roofline}});
    // Only when the bandwidth was measured beside the timing: results without it read as before.
    if (t.roofline_gbps_profile > 0) ts.back()["roofline_gbps_profile"] = number(t.roofline_gbps_profile);
  }
  j["timing"] = ts;
  j["speedup_vs_reference"] = optional_number(speedup_vs_reference);
  j["speedup_vs_library"] = optional_number(speedup_vs_library);
  j["fraction_of_roofline"] = optional_number(fraction_of_roofline);
  j["library_config"] = library_config ? library_config_to_json(*library_config) : json(nullptr);
  j["library_forced"] = library_config && library_config->forced;
  j["roofline_notes"] = roofline_notes;
  j["compile_seconds"] = number(compile_seconds);
  j["compile_cached"] = compile_cached;
  j["wall_seconds"] = number(wall_seconds);
  j["disturbed"] = disturbed;
  if (incumbent) j["incumbent"] = comparison_json(*incumbent);
  return j.dump(2);
}

Result<EvalResult> EvalResult::from_json(std::string_view text) {
  try {
    json j = json::parse(text);
    EvalResult r;
    auto v = parse_verdict(j.at("verdict").get<std::string>());
    if (!v) return fail(ErrorKind::corrupt, "unknown verdict '{}'", j.at("verdict").get<std::string>());
    r.verdict = *v;
    r.message = j.value("message", "");
    r.diagnostics = j.value("diagnostics", "");
    r.op = j.value("op", "");
    r.target = j.value("target", "");
    r.toolchain = j.value("toolchain", "");
    r.code_hash = j.value("code_hash", "");
    r.seed = j.value("seed", uint64_t{0});
    for (const auto& c : j.value("cases", json::array())) {
      CaseCheck cc;
      cc.case_index = c.at("case").get<int>();
      cc.label = c.value("label", "");
      cc.ok = c.at("ok").get<bool>();
      cc.max_abs_err = get_number(c, "max_abs_err");
      auto fm = c.find("first_mismatch");
      if (fm != c.end() && fm->is_string()) cc.first_mismatch = fm->get<std::string>();
      r.cases.push_back(std::move(cc));
    }
    for (const auto& t : j.value("timing", json::array())) {
      CaseTiming ct;
      ct.case_index = t.at("case").get<int>();
      ct.label = t.value("label", "");
      ct.median_us = get_number(t, "median_us");
      ct.ci95_us = get_number(t, "ci95_us");
      for (const auto& s : t.value("samples", json::array())) ct.samples_us.push_back(s.is_null() ? 0.0 : s.get<double>());
      ct.calls_per_batch = t.value("calls_per_batch", int64_t{0});
      ct.reference_us = get_number(t, "reference_us");
      ct.reference_ci95_us = get_number(t, "reference_ci95_us");
      ct.library_us = get_optional(t, "library_us");
      ct.library_ci95_us = get_optional(t, "library_ci95_us");
      ct.roofline_us = get_number(t, "roofline_us");
      ct.fraction_of_roofline = get_number(t, "fraction_of_roofline");
      ct.floor_us = get_number(t, "floor_us");
      ct.fresh_us = get_number(t, "fresh_us");
      ct.contention = get_number(t, "contention");
      ct.outside_load = get_number(t, "outside_load");
      ct.wall_us = get_optional(t, "wall_us");
      ct.disturbed = t.value("disturbed", false);
      ct.roofline_bound = t.value("roofline_bound", "");
      ct.roofline_gbps = get_number(t, "roofline_gbps");
      ct.roofline_gbps_profile = get_number(t, "roofline_gbps_profile");
      ct.roofline_gflops = get_number(t, "roofline_gflops");
      ct.roofline_working_set_bytes = t.value("roofline_working_set_bytes", uint64_t{0});
      ct.beyond_roofline = t.value("beyond_roofline", false);
      r.timing.push_back(std::move(ct));
    }
    r.speedup_vs_reference = get_optional(j, "speedup_vs_reference");
    r.speedup_vs_library = get_optional(j, "speedup_vs_library");
    r.fraction_of_roofline = get_optional(j, "fraction_of_roofline");
    if (auto lc = j.find("library_config"); lc != j.end() && lc->is_object()) r.library_config = library_config_from_json(*lc);
    r.roofline_notes = j.value("roofline_notes", std::vector<std::string>{});
    r.compile_seconds = get_number(j, "compile_seconds");
    r.compile_cached = j.value("compile_cached", false);
    r.wall_seconds = get_number(j, "wall_seconds");
    r.disturbed = j.value("disturbed", false);
    if (auto it = j.find("incumbent"); it != j.end() && it->is_object()) r.incumbent = comparison_from(*it);
    return r;
  } catch (const json::exception& e) {
    return fail(ErrorKind::corrupt, "evaluation result JSON is unreadable: {}", e.what());
  }
}

}  // namespace kope::eval
