// agent/replay.h — rules of the replay policy (docs/design.md §9) that need no loop state.
//
// ReplayPolicy (replay_policy.h) gathers the candidates and the judge evaluates them; these decide
// which kernels count as the operator's own and when an operator's replay is done.
#pragma once

#include <optional>
#include <string>

#include "agent/loop.h"
#include "kope/memory.h"
#include "kope/spec.h"

namespace kope::agent {

// Whether a memory case's task is `op` itself: the same name, or the same spec hash (the hash
// covers the op.toml text and the reference). Only such kernels are replayed for an op that
// memory holds a kernel of its own for; another op's kernel with the same parameter types is a
// candidate only for an op without one.
bool replay_same_op(const memory::TaskInfo& task, const spec::OpSpec& op);

// Below this share of the library's speed here a replayed kernel does not end its op's replay:
// the op's next kernel is tried. (The report notes every op below it; between it and 1.0 a
// second kernel changed the suite's geomean by little and cost a tenth more time.)
inline constexpr double k_replay_library_floor = 0.9;

// Whether `a` is no slower than the plain reference it was timed beside (a kernel without a
// figure counts as such). A library slower than the reference is no bar: neither the library
// target nor the replay's stop counts a kernel that is slower than the reference itself.
inline bool keeps_up_with_reference(const run::Attempt& a) { return a.speedup_vs_reference.value_or(1.0) >= 1.0; }

// The replay policy's stop reason before the next attempt, beyond the attempt limit
// (`replay_limit`, checked by the loop as "iterations"): "replay_verified" once a replayed
// kernel is correct here (it is the incumbent), at least k_replay_library_floor of the
// library's speed here and faster than the reference here, unless `replay_all` asks for every kernel up to the limit. A kernel that
// fails here, or trails the library by more or the reference, does not stop the op: the next candidate is tried
// (and becomes the incumbent only when it is faster). nullopt: go on.
std::optional<std::string> replay_stop_reason(const LoopConfig& config, const OpState& state);

}  // namespace kope::agent
