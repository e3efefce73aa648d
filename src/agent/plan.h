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
// refine the incumbent, else draft.
Plan plan_next(const run::OpState& state, const run::LoopConfig& cfg);

// The stopping rule that ends the op now ("iterations", "token_budget", "time_limit",
// "roofline", "no_improvement"), or nullopt to go on.
std::optional<std::string> stop_reason(const run::OpState& state, const run::LoopConfig& cfg);

}  // namespace kope::agent
