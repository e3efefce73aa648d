// agent/plan.h — the loop's decisions before an iteration: whether to stop, and what to try.
//
// Pure functions of the op's state and the loop settings (docs/design.md §1; the rules are
// spelled out in loop.h), so that a resumed run decides exactly as an uninterrupted one.
#pragma once

#include <optional>
#include <string>

#include "kope/memory.h"
#include "run/config.h"
#include "run/op_state.h"

namespace kope::agent {

// What the next iteration does: its stage, and the attempt it begins from.
struct Plan {
  memory::Stage stage = memory::Stage::draft;
  std::optional<int> parent_iteration;
};

// Repair the last attempt while it failed (at most max_consecutive_repairs in a row), else
// refine the incumbent, else draft. A bad_answer (an answer that gave no candidate, such as
// edits that did not apply) changed nothing, so it is asked again in the same stage from the
// same parent (the feedback says what failed); a bad answer to a repair counts as a repair.
Plan plan_next(const run::OpState& state, const run::LoopConfig& cfg);

// Why the op stops now: the rule's name and, for the patience rules, the facts it weighed.
struct StopDecision {
  // "iterations", "token_budget", "time_limit", "roofline", "library", "no_improvement" (the fixed
  // patience rule), "near_roof" (the gap rule), "unlikely_to_pay" (the evidence rule), or a
  // replay rule (agent/replay.h).
  std::string reason;
  // For the patience rules: "4 attempts without a new incumbent (patience 4 at 55% of the
  // roofline)"; for "library": "1.31x the library (target 1.20x)"; "" for the others.
  std::string detail;
};

// The stopping rule that ends the op now, or nullopt to go on. Checked in this order: the
// iteration limit, replay's rules, the token budget, the time limit, the incumbent reaching
// roofline_target on every timed case, the incumbent reaching library_target times the library's
// speed (ops with a library baseline), then the patience rule cfg.stop_rule selects (the same
// whatever the context mode): `fixed`, cfg.patience attempts without a new incumbent; `gap`,
// see gap_patience; `evidence`, see evidence_patience, else as `gap`. No patience rule applies to
// replay. Pure.
std::optional<StopDecision> stop_decision(const run::OpState& state, const run::LoopConfig& cfg);
// A clause saying why an op stopped, for a reader who does not know kope's rule names:
// "stop: library, the best kernel reached the library target: 1.31x the library (target 1.20x)". Unknown reasons
// (a replay rule, a newer kope's) are named as they are, with the detail when there is one.
std::string stop_sentence(std::string_view reason, std::string_view detail);
// stop_decision's reason alone.
std::optional<std::string> stop_reason(const run::OpState& state, const run::LoopConfig& cfg);

// The incumbent's fraction of its roofline: the least over its timed cases that have a
// roofline, else its recorded fraction_of_roofline; nullopt when neither is known.
std::optional<double> roof_fraction(const run::Attempt& incumbent);

// The gap rule's patience for an incumbent at `fraction` of its roofline: `base` attempts, plus
// one for each full k_gap_step of the gap 1 − fraction (a bigger gap allows more attempts):
// base 2 gives 2 at 0.9, 3 at 0.7, 4 at 0.5, 5 at 0.3. nullopt below `floor`, where much is
// left to gain and only the other limits stop the op (likewise when the fraction is unknown).
inline constexpr double k_gap_step = 0.2;
std::optional<int> gap_patience(double fraction, int base, double floor);

// The evidence rule's patience, where memory has spoken: the op pack recorded `ev`, at least
// k_evidence_min_refinements refinements of operators of the op's category on this machine, and
// their smoothed win rate w = (wins + 1) / (refinements + 2) is below k_evidence_even (a
// refinement there won less often than not). Then the patience is the gap rule's at the
// incumbent's `fraction` without its floor (an unknown fraction counts as 0, the widest gap),
// scaled by w / k_evidence_even, rounded, and at least 1: 6 at 15% of the roof becomes 2 where
// 1 of 8 refinements won. nullopt otherwise, where the gap rule decides. The rule is the same in
// every context mode; mode none's op has no op pack, so no evidence: finding out sooner that more
// attempts will not pay is one way memory saves tokens.
inline constexpr int k_evidence_min_refinements = 3;
inline constexpr double k_evidence_even = 0.5;
std::optional<int> evidence_patience(std::optional<double> fraction, int base, const run::RefineEvidence& ev);

}  // namespace kope::agent
