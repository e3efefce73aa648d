#include "agent/plan.h"

#include "agent/loop.h"
#include "agent/replay.h"

namespace kope::agent {

bool reached_roofline(const Attempt& inc, double target) {
  if (inc.timings.empty()) return inc.fraction_of_roofline && *inc.fraction_of_roofline >= target;
  for (const auto& t : inc.timings) {
    if (!(t.fraction_of_roofline >= target)) return false;
  }
  return true;
}

std::optional<std::string> stop_reason(const run::OpState& state, const run::LoopConfig& cfg) {
  const auto& attempts = state.attempts;
  int limit = cfg.policy == Policy::replay ? cfg.replay_limit : cfg.max_iterations;
  if (static_cast<int>(attempts.size()) >= limit) return "iterations";
  if (auto replayed = replay_stop_reason(cfg, state)) return replayed;
  if (cfg.token_budget > 0 && state.tokens_prompt() + state.tokens_completion() >= cfg.token_budget) {
    return "token_budget";
  }
  if (cfg.time_limit_seconds > 0 && state.wall_seconds() >= cfg.time_limit_seconds) return "time_limit";
  const Attempt* inc = state.incumbent();
  if (inc && cfg.roofline_target > 0 && reached_roofline(*inc, cfg.roofline_target)) return "roofline";
  if (inc && cfg.patience > 0 && cfg.policy != Policy::replay) {
    int since = static_cast<int>(attempts.size()) - inc->iteration;
    if (since >= cfg.patience) return "no_improvement";
  }
  return std::nullopt;
}

Plan plan_next(const run::OpState& state, const run::LoopConfig& cfg) {
  Plan p;
  const auto& attempts = state.attempts;
  const Attempt* inc = state.incumbent();
  if (!attempts.empty() && !attempts.back().correct()) {
    int repairs = 0;
    for (auto it = attempts.rbegin(); it != attempts.rend() && !it->correct() && it->stage == memory::Stage::repair; ++it) {
      ++repairs;
    }
    if (repairs < cfg.max_consecutive_repairs) {
      p.stage = memory::Stage::repair;
      p.parent_iteration = attempts.back().iteration;
      return p;
    }
  }
  if (inc) {
    p.stage = memory::Stage::refine;
    p.parent_iteration = inc->iteration;
  }
  return p;
}

}  // namespace kope::agent
