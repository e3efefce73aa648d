// agent/llm_policy.h — the model writes each candidate.
//
// propose() gathers the knowledge (retrieval.h), builds the prompt's input from the op's state
// (the reference, the incumbent, the last attempt's feedback and, for a repair, its code, the
// tried-table) and asks the model (model_turn.h); then it parses the answer (answer.h). An
// answer logged before the run died is not asked again: its text is read back from the run
// directory. An answer without usable code becomes a compile_error attempt with message
// "no code in answer: <why>".
#pragma once

#include "agent/model_turn.h"
#include "agent/policy.h"

namespace kope::agent {

class LlmPolicy : public CandidatePolicy {
 public:
  explicit LlmPolicy(OpContext& ctx) : m_ctx(ctx), m_turn(ctx) {}
  Result<Next> propose(int k, const Plan& plan) override;
  bool reflects() const override { return true; }

 private:
  // `learned`: the task's own lessons the hot tier shows (lessons_learned_here).
  Result<PromptInput> prompt_input(const Plan& plan, int k, const std::vector<memory::Lesson>& learned);
  Proposal from_answer(const ModelAnswer& answer, const Plan& plan) const;

  OpContext& m_ctx;
  ModelTurn m_turn;
};

}  // namespace kope::agent
