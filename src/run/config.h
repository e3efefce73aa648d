// run/config.h — a run's configuration as config.json holds it.
//
// LoopConfig is what the loop of one op obeys (agent/loop.h: stopping rules, budgets, the
// incumbent margin, context mode, reflection, evaluation settings); RunConfig adds what the run
// was started with (selectors, backend, seed, memory, model profile without secrets, target,
// toolchain) and the ops with their folders and spec hashes. Both round-trip through JSON;
// config.json carries "version" (config_from_json reads only the version it writes).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "context/context.h"
#include "kope/error.h"
#include "kope/eval.h"
#include "run/policy.h"

namespace kope::run {

// The patience rule that ends an op once more attempts are unlikely to pay (agent/plan.h):
// `fixed`, `patience` attempts without a new incumbent; `gap`, patience that grows with the
// incumbent's gap to its roofline (gap_patience, gap_floor); `evidence`, the gap rule's patience
// shortened where memory says refinements of similar operators on this machine seldom won.
enum class StopRule { fixed, gap, evidence };
std::string_view stop_rule_name(StopRule r);              // "fixed", "gap", "evidence"
std::optional<StopRule> parse_stop_rule(std::string_view s);  // nullopt for any other string

struct LoopConfig {
  Policy policy = Policy::llm;
  int max_iterations = 8;
  int64_t token_budget = 0;          // per op, prompt + completion; 0 = unlimited
  double time_limit_seconds = 0;     // per op; 0 = unlimited
  double roofline_target = 0.8;      // stop once every timed case of the incumbent reaches this
                                     // fraction of its working-set roofline; 0 = off
  double library_target = 0;         // stop once the incumbent is this many times as fast as the
                                     // library baseline (ops with one); 0 = off
  int patience = 4;                  // iterations without a new incumbent; 0 = off
  StopRule stop_rule = StopRule::fixed;
  int gap_patience = 2;              // gap rule: attempts without a new incumbent near the roof; 0 = off
  double gap_floor = 0.3;            // gap rule: applies once the incumbent reaches this fraction
  double min_improvement = 0.01;
  int max_consecutive_repairs = 2;
  double notable_speedup = 1.5;
  bool reflect = true;
  context::Mode mode = context::Mode::active;
  context::Budget budget;            // window, generation, reserve, caps (from the model profile)
  int retrieval_limit = 40;          // items asked for in active mode (the broad query: half)
  int passive_retrieval_limit = 400; // passive mode: every relevant item up to the window
  int replay_limit = 3;              // replay: at most this many kernels tried per op
  bool replay_all = false;           // replay: go on after a kernel is correct here (agent/replay.h)
  std::optional<uint64_t> seed;      // derives the model's and the evaluator's seeds
  eval::EvalOptions eval_options;
  // Fast verdicts: a candidate is timed against the incumbent in alternating batches until the
  // evaluator's sequential rule decides (eval/decision.h); only a candidate found faster is timed
  // to the full CI. Off: every candidate is timed to the full CI and compared with the
  // incumbent's recorded timings.
  bool fast_verdict = true;
  std::vector<double> backoff_seconds = {10, 60};  // waits after the client gave up (rate limit, 5xx)
  int context_shrink_retries = 3;
};

struct RunConfig {
  std::string run_id;
  std::string created_at;
  std::vector<std::string> selectors;
  int level = 0;                  // 0: any
  std::string backend = "cpu";
  // Library baselines: "environment" or "best" (eval::CpuEvaluatorOptions::library_config).
  std::string library_config = "environment";
  std::string suite_root;
  LoopConfig loop;
  int jobs = 1;
  uint64_t seed = 0;
  std::string memory_path;
  // The contamination guard: experience about the run's ops (same name or spec hash) from
  // earlier runs is left out of retrieval and replay (memory::Holdout); the run's own is used.
  bool holdout = false;
  std::string llm_profile;        // "" with the replay policy
  nlohmann::json model = nlohmann::json::object();  // provider, model, base_url, window, ... (no secrets)
  std::string target;
  std::string toolchain;
  // The ISA level candidates are compiled for (hw/isa.h: "native", "x86-64-v3", ...): a resume
  // compiles for it again. Runs from before it: "native".
  std::string isa = "native";
  struct OpRef {
    std::string name;
    std::string dir;
    std::string spec_hash;
  };
  std::vector<OpRef> ops;
};

nlohmann::json config_to_json(const RunConfig& c);
Result<RunConfig> config_from_json(const nlohmann::json& j);
nlohmann::json loop_config_to_json(const LoopConfig& c);
Result<LoopConfig> loop_config_from_json(const nlohmann::json& j);

// "20260501-120000-3fa2": UTC time plus random hex.
std::string new_run_id();

nlohmann::json config_to_json(const RunConfig& c);
// Fails with corrupt naming the field when `j` is not a config this kope wrote.
Result<RunConfig> config_from_json(const nlohmann::json& j);
nlohmann::json loop_config_to_json(const LoopConfig& c);
Result<LoopConfig> loop_config_from_json(const nlohmann::json& j);

// "20260501-120000-3fa2": UTC time plus random hex.
std::string new_run_id();

}  // namespace kope::run
