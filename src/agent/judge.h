// agent/judge.h — reading an evaluation into an attempt.
#pragma once

#include "kope/eval.h"
#include "run/attempt.h"

namespace kope::agent {

// Fills verdict, message, diagnostics, checks and timings from an evaluation (and, when it holds
// a comparison with the incumbent, decision, its interval, pairs, early_figures, contention).
void apply_eval_result(run::Attempt& a, const eval::EvalResult& r);

// Whether an evaluation's timing evidence was disturbed by other load: any timed case
// (eval::timing_disturbed) or the comparison with the incumbent.
bool eval_disturbed(const eval::EvalResult& r);

}  // namespace kope::agent
