#include "run/attempt.h"

#include <algorithm>
#include <cmath>

#include "eval/library.h"
#include "util/strings.h"

namespace kope::run {

using nlohmann::json;

namespace {

template <class T>
json opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

template <class T>
std::optional<T> get_opt(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  return it->get<T>();
}

json timing_json(const TimingSummary& t) {
  json j{{"case", t.case_index},          {"label", t.label},
         {"median_us", t.median_us},      {"ci95_us", t.ci95_us},
         {"reference_us", t.reference_us}, {"library_us", opt(t.library_us)},
         {"roofline_us", t.roofline_us},  {"fraction_of_roofline", t.fraction_of_roofline},
         {"disturbed", t.disturbed},      {"contention", t.contention},
         {"roofline_bound", t.roofline_bound}, {"roofline_gbps", t.roofline_gbps},
         {"roofline_gflops", t.roofline_gflops}, {"roofline_working_set_bytes", t.roofline_working_set_bytes},
         {"beyond_roofline", t.beyond_roofline}, {"floor_us", t.floor_us},
         {"side_candidate_us", opt(t.side_candidate_us)}, {"side_incumbent_us", opt(t.side_incumbent_us)},
         {"side_ratio", opt(t.side_ratio)}, {"side_candidate_contention", opt(t.side_candidate_contention)},
         {"side_incumbent_contention", opt(t.side_incumbent_contention)}};
  // Only when the bandwidth was measured beside the timing: an older run's line writes back the same.
  if (t.roofline_gbps_profile > 0) j["roofline_gbps_profile"] = t.roofline_gbps_profile;
  return j;
}

TimingSummary timing_from(const json& j) {
  TimingSummary t;
  t.case_index = j.value("case", 0);
  t.label = j.value("label", "");
  t.median_us = j.value("median_us", 0.0);
  t.ci95_us = j.value("ci95_us", 0.0);
  t.reference_us = j.value("reference_us", 0.0);
  t.library_us = get_opt<double>(j, "library_us");
  t.roofline_us = j.value("roofline_us", 0.0);
  t.fraction_of_roofline = j.value("fraction_of_roofline", 0.0);
  t.disturbed = j.value("disturbed", false);
  t.contention = j.value("contention", 0.0);
  t.roofline_bound = j.value("roofline_bound", "");
  t.roofline_gbps = j.value("roofline_gbps", 0.0);
  t.roofline_gbps_profile = j.value("roofline_gbps_profile", 0.0);
  t.roofline_gflops = j.value("roofline_gflops", 0.0);
  t.roofline_working_set_bytes = j.value("roofline_working_set_bytes", uint64_t{0});
  t.beyond_roofline = j.value("beyond_roofline", false);
  t.floor_us = j.value("floor_us", 0.0);
  t.side_candidate_us = get_opt<double>(j, "side_candidate_us");
  t.side_incumbent_us = get_opt<double>(j, "side_incumbent_us");
  t.side_ratio = get_opt<double>(j, "side_ratio");
  t.side_candidate_contention = get_opt<double>(j, "side_candidate_contention");
  t.side_incumbent_contention = get_opt<double>(j, "side_incumbent_contention");
  return t;
}

}  // namespace

std::string_view policy_name(Policy p) { return p == Policy::replay ? "replay" : "llm"; }

std::optional<Policy> parse_policy(std::string_view name) {
  if (name == "llm") return Policy::llm;
  if (name == "replay") return Policy::replay;
  return std::nullopt;
}

namespace {

// Decision's name table: a side-by-side decision is spelled as the evaluator spells it.
struct DecisionName {
  Decision decision;
  std::optional<eval::IncumbentDecision> compared;
  std::string_view name;  // the spelling when not compared
};
constexpr DecisionName k_decision_names[] = {
    {Decision::none, std::nullopt, ""},
    {Decision::faster, eval::IncumbentDecision::faster, {}},
    {Decision::slower, eval::IncumbentDecision::slower, {}},
    {Decision::not_faster, eval::IncumbentDecision::not_faster, {}},
    {Decision::undecided, eval::IncumbentDecision::undecided, {}},
    {Decision::recorded_timings, std::nullopt, "recorded_timings"},
};

}  // namespace

std::string_view decision_name(Decision d) {
  for (const auto& n : k_decision_names) {
    if (n.decision == d) return n.compared ? eval::incumbent_decision_name(*n.compared) : n.name;
  }
  return "";
}

std::optional<Decision> parse_decision(std::string_view name) {
  for (const auto& n : k_decision_names) {
    if (decision_name(n.decision) == name) return n.decision;
  }
  return std::nullopt;
}

Decision decision_of(eval::IncumbentDecision d) {
  for (const auto& n : k_decision_names) {
    if (n.compared == d) return n.decision;
  }
  return Decision::none;
}

std::optional<eval::IncumbentDecision> incumbent_decision(Decision d) {
  for (const auto& n : k_decision_names) {
    if (n.decision == d) return n.compared;
  }
  return std::nullopt;
}

namespace {

// Every outcome, in the enum's order (memory::outcome_name spells them).
constexpr memory::Outcome k_outcomes[] = {memory::Outcome::effective, memory::Outcome::partial,
                                          memory::Outcome::ineffective, memory::Outcome::negative};

}  // namespace

std::string_view label_name(std::optional<memory::Outcome> o) { return o ? memory::outcome_name(*o) : std::string_view(); }

Result<std::optional<memory::Outcome>> parse_label(std::string_view label) {
  if (label.empty()) return std::optional<memory::Outcome>();
  for (memory::Outcome o : k_outcomes) {
    if (memory::outcome_name(o) == label) return std::optional<memory::Outcome>(o);
  }
  std::string known;
  for (memory::Outcome o : k_outcomes) known += (known.empty() ? "" : ", ") + std::string(memory::outcome_name(o));
  return fail(ErrorKind::corrupt, "unknown outcome label '{}' (expected one of {}, or none)", label, known);
}

std::string_view decided_by_name(std::optional<eval::ReplacementRule> r) {
  return r ? eval::replacement_rule_name(*r) : std::string_view();
}

Result<std::optional<eval::ReplacementRule>> parse_decided_by(std::string_view name) {
  if (name.empty()) return std::optional<eval::ReplacementRule>();
  if (auto r = eval::parse_replacement_rule(name)) return std::optional<eval::ReplacementRule>(*r);
  return fail(ErrorKind::corrupt, "unknown replacement rule '{}' (expected one of {}, or none)", name,
              eval::replacement_rule_names());
}

std::string_view answer_form_name(std::optional<AnswerForm> f) {
  if (!f) return {};
  return *f == AnswerForm::edits ? "edits" : "whole";
}

Result<std::optional<AnswerForm>> parse_answer_form(std::string_view name) {
  if (name.empty()) return std::optional<AnswerForm>();
  for (AnswerForm f : {AnswerForm::whole, AnswerForm::edits}) {
    if (answer_form_name(f) == name) return std::optional<AnswerForm>(f);
  }
  return fail(ErrorKind::corrupt, "unknown answer form '{}' (expected one of whole, edits, or none)", name);
}

json admission_json(const std::vector<Admission>& list) {
  json out = json::array();
  for (const auto& a : list) {
    out.push_back({{"id", a.id}, {"tier", a.tier}, {"section", a.section}, {"tokens", a.tokens}, {"value", a.value},
                   {"parts", a.parts}, {"reason", a.reason}, {"category", a.category}});
  }
  return out;
}

std::vector<Admission> admission_from_json(const json& list) {
  std::vector<Admission> out;
  if (!list.is_array()) return out;
  for (const auto& j : list) {
    if (!j.is_object()) continue;
    Admission a;
    a.id = j.value("id", "");
    a.tier = j.value("tier", "");
    a.section = j.value("section", "");
    a.tokens = j.value("tokens", int64_t{0});
    a.value = j.value("value", 0.0);
    if (j.contains("parts") && j["parts"].is_object()) {
      for (const auto& [k, v] : j["parts"].items()) {
        if (v.is_number()) a.parts[k] = v.get<double>();
      }
    }
    a.reason = j.value("reason", "");
    a.category = j.value("category", "");
    out.push_back(std::move(a));
  }
  return out;
}

json to_json(const Attempt& a) {
  json timings = json::array();
  for (const auto& t : a.timings) timings.push_back(timing_json(t));
  json items = json::array();
  for (const auto& [id, score] : a.memory_items) items.push_back(json::array({id, score}));
  json j{{"iteration", a.iteration},
          {"stage", std::string(memory::stage_name(a.stage))},
          {"policy", std::string(policy_name(a.policy))},
          {"parent_iteration", opt(a.parent_iteration)},
          {"parent_case_id", opt(a.parent_case_id)},
          {"source_case_id", opt(a.source_case_id)},
          {"optimisation", a.optimisation},
          {"header_found", a.header_found},
          {"has_code", a.has_code},
          {"code_file", a.code_file},
          {"code_hash", a.code_hash},
          {"verdict", std::string(eval::verdict_name(a.verdict))},
          {"message", a.message},
          {"diagnostics", a.diagnostics},
          {"first_mismatch", a.first_mismatch},
          {"cases_passed", a.cases_passed},
          {"cases_total", a.cases_total},
          {"timings", timings},
          {"speedup_vs_reference", opt(a.speedup_vs_reference)},
          {"speedup_vs_library", opt(a.speedup_vs_library)},
          {"speedup_vs_parent", opt(a.speedup_vs_parent)},
          {"speedup_vs_incumbent", opt(a.speedup_vs_incumbent)},
          {"fraction_of_roofline", opt(a.fraction_of_roofline)},
          {"library_config", a.library_config ? eval::library_config_to_json(*a.library_config) : json(nullptr)},
          {"improved", a.improved},
          {"quarantine_reason", a.quarantine_reason},
          {"incumbent_decision", a.decision == Decision::none ? json(nullptr)
                                                    : json{{"decision", std::string(decision_name(a.decision))},
                                                           {"lower", opt(a.decision_lower)},
                                                           {"upper", opt(a.decision_upper)},
                                                           {"pairs", a.decision_pairs},
                                                           {"early_figures", a.early_figures},
                                                           {"disturbed", a.evidence_disturbed},
                                                           {"retimed", a.retimed},
                                                           {"margin_demanded", opt(a.margin_demanded)},
                                                           {"contention", a.decision_contention},
                                                           {"decided_by", std::string(decided_by_name(a.decided_by))},
                                                           {"decided_by_reason", a.decided_by_reason},
                                                           {"outside_load", a.decision_outside_load}}},
          {"contention", a.contention},
          {"label", std::string(label_name(a.outcome))},
          {"tokens_prompt", a.tokens_prompt},
          {"tokens_completion", a.tokens_completion},
          {"cost_usd", a.cost_usd},
          {"tokens_cached", a.tokens_cached},
          {"tokens_cache_write", a.tokens_cache_write},
          {"tokens_cached_estimated", a.tokens_cached_estimated},
          {"prefix_tokens", a.prefix_tokens},
          {"prefix_hash", a.prefix_hash},
          {"cached_price_ratio", opt(a.cached_price_ratio)},
          {"prompt_id", a.prompt_id},
          {"prompt_tokens_estimated", a.prompt_tokens_estimated},
          {"tier_tokens", a.tier_tokens},
          {"knowledge_budget", a.knowledge_budget},
          {"memory_items", items},
          {"admission", admission_json(a.admission)},
          {"eval_seed", a.eval_seed},
          {"llm_seconds", a.llm_seconds},
          {"eval_seconds", a.eval_seconds},
          {"wall_seconds", a.wall_seconds},
          {"notable", a.notable},
          {"notable_reason", a.notable_reason},
          {"journal", a.journal},
          {"answer_form", std::string(answer_form_name(a.answer_form))},
          {"answer_edits", a.answer_edits}};
  // Written only when there are some, so a run recorded before the field reads back unchanged.
  if (!a.wrong_cases.empty()) j["wrong_cases"] = a.wrong_cases;
  return j;
}

Result<Attempt> attempt_from_json(const json& j) {
  try {
    Attempt a;
    a.iteration = j.at("iteration").get<int>();
    auto stage = memory::parse_stage(j.at("stage").get<std::string>());
    if (!stage) return fail(ErrorKind::corrupt, "attempt {}: unknown stage '{}'", a.iteration, j.at("stage").dump());
    a.stage = *stage;
    std::string policy = j.value("policy", "llm");
    auto parsed_policy = parse_policy(policy);
    if (!parsed_policy) return fail(ErrorKind::corrupt, "attempt {}: unknown policy '{}'", a.iteration, policy);
    a.policy = *parsed_policy;
    a.parent_iteration = get_opt<int>(j, "parent_iteration");
    a.parent_case_id = get_opt<int64_t>(j, "parent_case_id");
    a.source_case_id = get_opt<int64_t>(j, "source_case_id");
    a.optimisation = j.value("optimisation", "");
    a.header_found = j.value("header_found", false);
    a.has_code = j.value("has_code", false);
    a.code_file = j.value("code_file", "");
    a.code_hash = j.value("code_hash", "");
    const std::string verdict = j.at("verdict").get<std::string>();
    auto parsed_verdict = eval::parse_verdict(verdict);
    if (!parsed_verdict) return fail(ErrorKind::corrupt, "attempt {}: unknown verdict '{}'", a.iteration, verdict);
    a.verdict = *parsed_verdict;
    a.message = j.value("message", "");
    a.diagnostics = j.value("diagnostics", "");
    a.first_mismatch = j.value("first_mismatch", "");
    a.wrong_cases = j.value("wrong_cases", std::vector<std::string>{});
    a.cases_passed = j.value("cases_passed", 0);
    a.cases_total = j.value("cases_total", 0);
    for (const auto& t : j.value("timings", json::array())) a.timings.push_back(timing_from(t));
    a.speedup_vs_reference = get_opt<double>(j, "speedup_vs_reference");
    a.speedup_vs_library = get_opt<double>(j, "speedup_vs_library");
    a.speedup_vs_parent = get_opt<double>(j, "speedup_vs_parent");
    a.speedup_vs_incumbent = get_opt<double>(j, "speedup_vs_incumbent");
    a.fraction_of_roofline = get_opt<double>(j, "fraction_of_roofline");
    if (auto lc = j.find("library_config"); lc != j.end() && lc->is_object()) a.library_config = eval::library_config_from_json(*lc);
    a.improved = j.value("improved", false);
    a.quarantine_reason = j.value("quarantine_reason", "");
    if (auto d = j.find("incumbent_decision"); d != j.end() && d->is_object()) {
      const std::string decision = d->value("decision", "");
      auto parsed_decision = parse_decision(decision);
      if (!parsed_decision) return fail(ErrorKind::corrupt, "attempt {}: unknown incumbent decision '{}'", a.iteration, decision);
      a.decision = *parsed_decision;
      a.decision_lower = get_opt<double>(*d, "lower");
      a.decision_upper = get_opt<double>(*d, "upper");
      a.decision_pairs = d->value("pairs", 0);
      a.early_figures = d->value("early_figures", false);
      a.evidence_disturbed = d->value("disturbed", false);
      a.retimed = d->value("retimed", false);
      a.margin_demanded = get_opt<double>(*d, "margin_demanded");
      a.decision_contention = d->value("contention", 0.0);
      auto decided_by = parse_decided_by(d->value("decided_by", ""));
      if (!decided_by) return fail(ErrorKind::corrupt, "attempt {}: {}", a.iteration, decided_by.error().message);
      a.decided_by = *decided_by;
      a.decided_by_reason = d->value("decided_by_reason", "");
      a.decision_outside_load = d->value("outside_load", 0.0);
    }
    a.contention = j.value("contention", 0.0);
    auto outcome = parse_label(j.value("label", ""));
    if (!outcome) return fail(ErrorKind::corrupt, "attempt {}: {}", a.iteration, outcome.error().message);
    a.outcome = *outcome;
    a.tokens_prompt = j.value("tokens_prompt", int64_t{0});
    a.tokens_completion = j.value("tokens_completion", int64_t{0});
    a.cost_usd = j.value("cost_usd", 0.0);
    a.tokens_cached = j.value("tokens_cached", int64_t{0});
    a.tokens_cache_write = j.value("tokens_cache_write", int64_t{0});
    a.tokens_cached_estimated = j.value("tokens_cached_estimated", false);
    a.prefix_tokens = j.value("prefix_tokens", int64_t{0});
    a.prefix_hash = j.value("prefix_hash", "");
    a.cached_price_ratio = get_opt<double>(j, "cached_price_ratio");
    a.prompt_id = j.value("prompt_id", "");
    a.prompt_tokens_estimated = j.value("prompt_tokens_estimated", int64_t{0});
    a.tier_tokens = j.value("tier_tokens", std::map<std::string, int64_t>{});
    a.knowledge_budget = j.value("knowledge_budget", int64_t{0});
    for (const auto& it : j.value("memory_items", json::array())) {
      a.memory_items.emplace_back(it.at(0).get<std::string>(), it.at(1).get<double>());
    }
    a.admission = admission_from_json(j.value("admission", json::array()));
    a.eval_seed = j.value("eval_seed", uint64_t{0});
    a.llm_seconds = j.value("llm_seconds", 0.0);
    a.eval_seconds = j.value("eval_seconds", 0.0);
    a.wall_seconds = j.value("wall_seconds", 0.0);
    a.notable = j.value("notable", false);
    a.notable_reason = j.value("notable_reason", "");
    a.journal = j.value("journal", "");
    auto form = parse_answer_form(j.value("answer_form", ""));
    if (!form) return fail(ErrorKind::corrupt, "attempt {}: {}", a.iteration, form.error().message);
    a.answer_form = *form;
    a.answer_edits = j.value("answer_edits", 0);
    return a;
  } catch (const json::exception& e) {
    return fail(ErrorKind::corrupt, "malformed attempt record: {}", e.what());
  }
}

std::optional<double> relative_speed(const std::vector<TimingSummary>& before, const std::vector<TimingSummary>& after) {
  double log_sum = 0;
  int n = 0;
  for (const auto& b : before) {
    for (const auto& a : after) {
      if (a.case_index == b.case_index && a.median_us > 0 && b.median_us > 0) {
        log_sum += std::log(b.median_us / a.median_us);
        ++n;
      }
    }
  }
  if (n == 0) return std::nullopt;
  return std::exp(log_sum / n);
}

}  // namespace kope::run
