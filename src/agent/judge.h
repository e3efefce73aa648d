// agent/judge.h — evaluating a candidate and deciding what it means for the op.
//
// Judge::evaluate writes the candidate's source (Attempt::code) to the run directory
// (candidates/<op>/<k>.cpp),
// has the evaluator judge it (with fast verdicts, timed against the incumbent's source) and,
// when evidence disturbed by other load would replace the incumbent, evaluates it once more
// after waiting for a quiet machine ("retime"; eval::decide_replacement says when).
// Judge::decide applies the incumbent rule, asks the store for r (speedup_vs_parent) and the
// outcome label, and says whether the attempt is notable (a reflection trigger); the rules are spelled
// out in loop.h. A win the store quarantines is held back from the incumbent; at the end of the
// op Judge::reverify_quarantined evaluates each such win again on fresh inputs (reverify.h),
// logs a "reverified" event, tells the memory (Store::verify_case) and promotes a confirmed win
// that beats the incumbent.
#pragma once

#include <optional>
#include <string>

#include "agent/op_context.h"
#include "agent/recorder.h"
#include "eval/decision.h"
#include "kope/eval.h"
#include "kope/memory.h"
#include "run/attempt.h"

namespace kope::agent {

class Judge {
 public:
  explicit Judge(OpContext& ctx) : m_ctx(ctx) {}

  // Writes `a.code` (set) to the run directory and fills `a`'s other code fields, verdict and
  // timings. Fails only when the evaluator or the run directory fails (a failing kernel is a
  // verdict).
  Status evaluate(Attempt& a);
  // Sets parent_case_id, improved (and the decision's figures), speedup_vs_parent, outcome,
  // quarantine_reason and notable for `a` against the op's state before it. r, the outcome and
  // the quarantine are the store's (Store::assess_attempt, asked once: the ratio of recorded
  // speedups vs the reference over the parent case, for a replay its source case). Returns the
  // case it built and had assessed, for the recorder to record; fails only when the store does.
  Result<AssessedCase> decide(Attempt& a) const;
  // Re-verifies the op's quarantined correct attempts not re-verified yet, in order, and
  // repeats the memory's verify_case for logged ones it has not applied (a resumed run).
  // Fails only when the evaluator, the event log or the memory fails.
  Status reverify_quarantined();

 private:
  // The incumbent rule (eval::decide_replacement) over the correct `a`'s evidence against `inc`.
  eval::ReplacementDecision replacement(const Attempt& a, const Attempt& inc) const;
  // `first`: the first evaluation's figures; `why`: the rule that asked for the re-time.
  Result<eval::EvalResult> retime(Attempt& a, const Attempt& first, const eval::ReplacementDecision& why, eval::EvalOptions opts);
  // Whether the correct `a` replaces the incumbent `inc` (decision, margin and decided_by set).
  bool replaces(Attempt& a, const Attempt& inc) const;
  // Tells the memory the outcome of a logged re-verification unless it already knows it.
  Status apply_reverification(const run::ReverifiedEvent& r) const;

  OpContext& m_ctx;
};

// Fills verdict, message, diagnostics, checks and timings from an evaluation (and, when it holds
// a comparison with the incumbent, decision, its interval, pairs, early_figures, contention).
void apply_eval_result(run::Attempt& a, const eval::EvalResult& r);

// Whether an evaluation's timing evidence was disturbed by other load: any timed case
// (eval::timing_disturbed) or the comparison with the incumbent.
bool eval_disturbed(const eval::EvalResult& r);

}  // namespace kope::agent
