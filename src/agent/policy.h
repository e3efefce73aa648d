// agent/policy.h — where an iteration's candidate comes from (run::Policy names the two kinds).
//
// A CandidatePolicy proposes the candidate of iteration k under the loop's plan; the loop then
// judges it (judge.h), records it (recorder.h) and, where the policy reflects, reflects on it
// (reflector.h). LlmPolicy (llm_policy.h) asks the model; ReplayPolicy (replay_policy.h)
// re-verifies kernels from memory.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "agent/op_context.h"
#include "agent/plan.h"
#include "kope/memory.h"

namespace kope::agent {

// A candidate for the judge: the attempt as far as the policy knows it (iteration, stage and
// lineage, what was applied, tokens and prompt figures) with the source to evaluate in
// Attempt::code, which then travels with the attempt; nullopt when there is none (an answer
// without usable code: the attempt already carries its compile_error or bad_answer verdict).
struct Proposal {
  Attempt attempt;
};

// The policy's answer for iteration k: a proposal, or none and how the op ends.
struct Next {
  std::optional<Proposal> proposal;
  OpEnd end = OpEnd::finished;
  std::string stop_reason;  // with end == finished: why ("replay_exhausted")
};

class CandidatePolicy {
 public:
  virtual ~CandidatePolicy() = default;
  // Fails only when kope cannot go on (memory, event log, run directory, a refused model call).
  virtual Result<Next> propose(int k, const Plan& plan) = 0;
  // Whether the op reflects on its attempts (the model writes the lessons).
  virtual bool reflects() const = 0;
};

// The policy `ctx.cfg.policy` names.
std::unique_ptr<CandidatePolicy> make_policy(OpContext& ctx);

}  // namespace kope::agent
