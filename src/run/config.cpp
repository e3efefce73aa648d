#include "run/config.h"

#include <random>

#include <fmt/format.h>

#include "util/time.h"

#ifndef KOPE_VERSION
#define KOPE_VERSION "0"
#endif

namespace kope::run {

using nlohmann::json;

namespace {

constexpr int k_config_version = 1;

}  // namespace

std::string_view stop_rule_name(StopRule r) {
  switch (r) {
    case StopRule::gap: return "gap";
    case StopRule::evidence: return "evidence";
    case StopRule::fixed: break;
  }
  return "fixed";
}

std::optional<StopRule> parse_stop_rule(std::string_view s) {
  if (s == "fixed") return StopRule::fixed;
  if (s == "gap") return StopRule::gap;
  if (s == "evidence") return StopRule::evidence;
  return std::nullopt;
}

std::string new_run_id() {
  std::random_device rd;
  return fmt::format("{}-{:04x}", util::now_compact_utc(), rd() & 0xffff);
}

json loop_config_to_json(const LoopConfig& c) {
  return json{{"policy", std::string(policy_name(c.policy))},
              {"max_iterations", c.max_iterations},
              {"token_budget", c.token_budget},
              {"time_limit_seconds", c.time_limit_seconds},
              {"roofline_target", c.roofline_target},
              {"library_target", c.library_target},
              {"patience", c.patience},
              {"stop_rule", std::string(stop_rule_name(c.stop_rule))},
              {"gap_patience", c.gap_patience},
              {"gap_floor", c.gap_floor},
              {"min_improvement", c.min_improvement},
              {"max_consecutive_repairs", c.max_consecutive_repairs},
              {"notable_speedup", c.notable_speedup},
              {"reflect", c.reflect},
              {"context_mode", std::string(context::mode_name(c.mode))},
              {"budget",
               {{"window", c.budget.window},
                {"generation", c.budget.generation},
                {"recency_reserve", c.budget.recency_reserve},
                {"warm_cap", c.budget.warm_cap},
                {"cold_cap", c.budget.cold_cap},
                {"cold_cap_learned", c.budget.cold_cap_learned},
                {"memory_draft", c.budget.memory_draft},
                {"memory_repair", c.budget.memory_repair},
                {"memory_refine", c.budget.memory_refine},
                {"value_floor", c.budget.value_floor}}},
              {"retrieval_limit", c.retrieval_limit},
              {"passive_retrieval_limit", c.passive_retrieval_limit},
              {"replay_limit", c.replay_limit},
              {"replay_all", c.replay_all},
              {"seed", c.seed ? json(*c.seed) : json(nullptr)},
              {"eval", {{"target_ci", c.eval_options.target_ci}, {"max_seconds_per_case", c.eval_options.max_seconds_per_case},
                        {"fast_verdict", c.fast_verdict}}},
              {"backoff_seconds", c.backoff_seconds},
              {"context_shrink_retries", c.context_shrink_retries}};
}

Result<LoopConfig> loop_config_from_json(const json& j) {
  try {
    LoopConfig c;
    auto policy = parse_policy(j.at("policy").get<std::string>());
    if (!policy) return fail(ErrorKind::corrupt, "unknown policy {}", j.at("policy").dump());
    c.policy = *policy;
    c.max_iterations = j.at("max_iterations").get<int>();
    c.token_budget = j.at("token_budget").get<int64_t>();
    c.time_limit_seconds = j.at("time_limit_seconds").get<double>();
    c.roofline_target = j.at("roofline_target").get<double>();
    // Runs written before the library target existed had none.
    c.library_target = j.value("library_target", 0.0);
    c.patience = j.at("patience").get<int>();
    // Runs written before the gap rule existed stopped by the fixed rule.
    std::string stop_rule = j.value("stop_rule", "fixed");
    auto rule = parse_stop_rule(stop_rule);
    if (!rule) return fail(ErrorKind::corrupt, "unknown stop_rule \"{}\" (fixed, gap or evidence)", stop_rule);
    c.stop_rule = *rule;
    c.gap_patience = j.value("gap_patience", c.gap_patience);
    c.gap_floor = j.value("gap_floor", c.gap_floor);
    c.min_improvement = j.at("min_improvement").get<double>();
    c.max_consecutive_repairs = j.at("max_consecutive_repairs").get<int>();
    c.notable_speedup = j.at("notable_speedup").get<double>();
    c.reflect = j.at("reflect").get<bool>();
    auto mode = context::parse_mode(j.at("context_mode").get<std::string>());
    if (!mode) return fail(ErrorKind::corrupt, "unknown context mode {}", j.at("context_mode").dump());
    c.mode = *mode;
    const json& b = j.at("budget");
    c.budget.window = b.at("window").get<int64_t>();
    c.budget.generation = b.at("generation").get<int64_t>();
    c.budget.recency_reserve = b.at("recency_reserve").get<int64_t>();
    c.budget.warm_cap = b.at("warm_cap").get<double>();
    c.budget.cold_cap = b.at("cold_cap").get<double>();
    // Runs written before the grown cold cap existed had one cap for every cold item.
    c.budget.cold_cap_learned = b.value("cold_cap_learned", c.budget.cold_cap);
    // Stage budgets (absent in runs made before them: the defaults apply when such a run resumes).
    c.budget.memory_draft = b.value("memory_draft", c.budget.memory_draft);
    c.budget.memory_repair = b.value("memory_repair", c.budget.memory_repair);
    c.budget.memory_refine = b.value("memory_refine", c.budget.memory_refine);
    c.budget.value_floor = b.value("value_floor", c.budget.value_floor);
    c.retrieval_limit = j.at("retrieval_limit").get<int>();
    c.passive_retrieval_limit = j.at("passive_retrieval_limit").get<int>();
    c.replay_limit = j.at("replay_limit").get<int>();
    c.replay_all = j.value("replay_all", true);  // runs made before the setting tried every kernel
    if (!j.at("seed").is_null()) c.seed = j.at("seed").get<uint64_t>();
    c.eval_options.target_ci = j.at("eval").at("target_ci").get<double>();
    c.eval_options.max_seconds_per_case = j.at("eval").at("max_seconds_per_case").get<double>();
    c.fast_verdict = j.at("eval").value("fast_verdict", true);
    c.backoff_seconds = j.at("backoff_seconds").get<std::vector<double>>();
    c.context_shrink_retries = j.at("context_shrink_retries").get<int>();
    return c;
  } catch (const json::exception& e) {
    return fail(ErrorKind::corrupt, "malformed loop settings: {}", e.what());
  }
}

json config_to_json(const RunConfig& c) {
  json ops = json::array();
  for (const auto& o : c.ops) ops.push_back({{"name", o.name}, {"dir", o.dir}, {"spec_hash", o.spec_hash}});
  return json{{"version", k_config_version},
              {"kope_version", KOPE_VERSION},
              {"run_id", c.run_id},
              {"created_at", c.created_at},
              {"selectors", c.selectors},
              {"level", c.level},
              {"backend", c.backend},
              {"suite_root", c.suite_root},
              {"loop", loop_config_to_json(c.loop)},
              {"jobs", c.jobs},
              {"seed", c.seed},
              {"memory", c.memory_path},
              {"holdout", c.holdout},
              {"library_config", c.library_config},
              {"llm_profile", c.llm_profile},
              {"model", c.model},
              {"target", c.target},
              {"toolchain", c.toolchain},
              {"isa", c.isa},
              {"ops", ops}};
}

Result<RunConfig> config_from_json(const json& j) {
  try {
    if (j.value("version", 0) != k_config_version) {
      return fail(ErrorKind::corrupt, "config.json has format version {} (this kope reads {})", j.value("version", 0),
                  k_config_version);
    }
    RunConfig c;
    c.run_id = j.at("run_id").get<std::string>();
    c.created_at = j.value("created_at", "");
    c.selectors = j.value("selectors", std::vector<std::string>{});
    c.level = j.value("level", 0);
    c.backend = j.value("backend", "cpu");
    c.suite_root = j.value("suite_root", "");
    KOPE_ASSIGN(c.loop, loop_config_from_json(j.at("loop")));
    c.jobs = j.value("jobs", 1);
    c.seed = j.value("seed", uint64_t{0});
    c.memory_path = j.value("memory", "");
    c.holdout = j.value("holdout", false);
    c.library_config = j.value("library_config", "environment");
    c.llm_profile = j.value("llm_profile", "");
    c.model = j.value("model", json::object());
    c.target = j.value("target", "");
    c.toolchain = j.value("toolchain", "");
    c.isa = j.value("isa", "native");
    for (const auto& o : j.at("ops")) {
      c.ops.push_back({o.at("name").get<std::string>(), o.at("dir").get<std::string>(), o.value("spec_hash", "")});
    }
    return c;
  } catch (const json::exception& e) {
    return fail(ErrorKind::corrupt, "malformed config.json: {}", e.what());
  }
}

}  // namespace kope::run
