#include "agent/plan.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

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

std::optional<double> roof_fraction(const Attempt& inc) {
  std::optional<double> least;
  for (const auto& t : inc.timings) {
    if (t.roofline_us > 0 && (!least || t.fraction_of_roofline < *least)) least = t.fraction_of_roofline;
  }
  return least ? least : inc.fraction_of_roofline;
}

std::optional<int> gap_patience(double fraction, int base, double floor) {
  if (!(fraction >= floor)) return std::nullopt;
  double gap = std::max(0.0, 1.0 - fraction);
  // The small tolerance keeps a gap of exactly n steps (0.2 as 1 − 0.8) at n.
  return base + static_cast<int>(std::floor(gap / k_gap_step + 1e-9));
}

std::optional<int> evidence_patience(std::optional<double> fraction, int base, const run::RefineEvidence& ev) {
  if (ev.refinements < k_evidence_min_refinements) return std::nullopt;
  double w = (ev.wins + 1.0) / (ev.refinements + 2.0);
  if (w >= k_evidence_even) return std::nullopt;
  int gap = *gap_patience(std::clamp(fraction.value_or(0.0), 0.0, 1.0), base, 0.0);
  return std::max(1, static_cast<int>(std::lround(gap * w / k_evidence_even)));
}

std::string stop_sentence(std::string_view reason, std::string_view detail) {
  static const std::map<std::string_view, std::string_view> k_meaning = {
      {"iterations", "the attempt limit was reached"},
      {"token_budget", "the token budget was spent"},
      {"time_limit", "the time limit was reached"},
      {"roofline", "the best kernel reached the roofline target on every timed case"},
      {"library", "the best kernel reached the library target"},
      {"no_improvement", "too many attempts in a row found no faster kernel"},
      {"near_roof", "the best kernel is near its roofline and recent attempts found nothing faster"},
      {"unlikely_to_pay", "memory's record of similar operators says further attempts seldom paid"},
  };
  auto it = k_meaning.find(reason);
  std::string out = fmt::format("stop: {}", reason);
  if (it != k_meaning.end()) out += fmt::format(", {}", it->second);
  if (!detail.empty()) out += fmt::format(": {}", detail);
  return out;
}

std::optional<StopDecision> stop_decision(const run::OpState& state, const run::LoopConfig& cfg) {
  const auto& attempts = state.attempts;
  int limit = cfg.policy == Policy::replay ? cfg.replay_limit : cfg.max_iterations;
  if (static_cast<int>(attempts.size()) >= limit) return StopDecision{"iterations", ""};
  if (auto replayed = replay_stop_reason(cfg, state)) return StopDecision{*replayed, ""};
  if (cfg.token_budget > 0 && state.tokens_prompt() + state.tokens_completion() >= cfg.token_budget) {
    return StopDecision{"token_budget", ""};
  }
  if (cfg.time_limit_seconds > 0 && state.wall_seconds() >= cfg.time_limit_seconds) return StopDecision{"time_limit", ""};
  const Attempt* inc = state.incumbent();
  if (inc && cfg.roofline_target > 0 && reached_roofline(*inc, cfg.roofline_target)) return StopDecision{"roofline", ""};
  if (inc && cfg.library_target > 0 && inc->speedup_vs_library && *inc->speedup_vs_library >= cfg.library_target &&
      keeps_up_with_reference(*inc)) {
    return StopDecision{"library", fmt::format("{:.2f}x the library (target {:.2f}x)", *inc->speedup_vs_library, cfg.library_target)};
  }
  if (!inc || cfg.policy == Policy::replay) return std::nullopt;
  int since = static_cast<int>(attempts.size()) - inc->iteration;
  if (cfg.stop_rule == run::StopRule::fixed) {
    if (cfg.patience > 0 && since >= cfg.patience) {
      return StopDecision{"no_improvement", fmt::format("{} attempts without a new incumbent (patience {})", since, cfg.patience)};
    }
    return std::nullopt;
  }
  std::optional<double> fraction = roof_fraction(*inc);
  if (const run::RefineEvidence* latest = state.refine_evidence();
      cfg.stop_rule == run::StopRule::evidence && cfg.gap_patience > 0 && latest) {
    const run::RefineEvidence& ev = *latest;
    std::optional<int> allowed = evidence_patience(fraction, cfg.gap_patience, ev);
    if (allowed && since >= *allowed) {
      return StopDecision{"unlikely_to_pay",
                          fmt::format("{} attempts without a new incumbent (patience {}: {} of the {} refinements of {} "
                                      "operators memory holds for this machine won)",
                                      since, *allowed, ev.wins, ev.refinements, ev.category)};
    }
  }
  if (!fraction || cfg.gap_patience <= 0) return std::nullopt;
  std::optional<int> allowed = gap_patience(*fraction, cfg.gap_patience, cfg.gap_floor);
  if (allowed && since >= *allowed) {
    return StopDecision{"near_roof", fmt::format("{} attempts without a new incumbent (patience {} at {:.0f}% of the roofline)",
                                                 since, *allowed, 100 * *fraction)};
  }
  return std::nullopt;
}

std::optional<std::string> stop_reason(const run::OpState& state, const run::LoopConfig& cfg) {
  auto d = stop_decision(state, cfg);
  if (!d) return std::nullopt;
  return d->reason;
}

Plan plan_next(const run::OpState& state, const run::LoopConfig& cfg) {
  Plan p;
  const auto& attempts = state.attempts;
  const Attempt* inc = state.incumbent();
  const Attempt* last = attempts.empty() ? nullptr : &attempts.back();
  if (last && last->verdict == eval::Verdict::bad_answer && last->stage != memory::Stage::repair) {
    // Nothing was evaluated: the same stage again, from the same parent.
    p.stage = last->stage;
    p.parent_iteration = last->stage == memory::Stage::refine && inc ? std::optional<int>(inc->iteration) : last->parent_iteration;
    return p;
  }
  if (last && last->verdict == eval::Verdict::bad_answer) {
    // A bad answer to a repair: the attempt it was to repair, again (it counts as a repair).
    int repairs = 0;
    for (auto it = attempts.rbegin(); it != attempts.rend() && !it->correct() && it->stage == memory::Stage::repair; ++it) {
      ++repairs;
    }
    if (repairs < cfg.max_consecutive_repairs && last->parent_iteration) {
      p.stage = memory::Stage::repair;
      p.parent_iteration = last->parent_iteration;
      return p;
    }
  }
  if (last && last->verdict != eval::Verdict::bad_answer && !last->correct()) {
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
