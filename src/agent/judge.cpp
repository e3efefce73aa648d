#include "agent/judge.h"

#include <algorithm>

#include "agent/prompt.h"

namespace kope::agent {

using run::Attempt;
using run::TimingSummary;

void apply_eval_result(Attempt& a, const eval::EvalResult& r) {
  a.verdict = std::string(eval::verdict_name(r.verdict));
  a.message = r.message;
  a.diagnostics = cut_at_lines(r.diagnostics, 4000, 60);
  a.cases_total = static_cast<int>(r.cases.size());
  a.cases_passed = 0;
  a.first_mismatch.clear();
  for (const auto& c : r.cases) {
    if (c.ok) {
      ++a.cases_passed;
    } else if (r.verdict == eval::Verdict::wrong_result && a.first_mismatch.empty() && !c.first_mismatch.empty()) {
      a.first_mismatch = "case " + c.label + ": " + c.first_mismatch;
    }
  }
  a.timings.clear();
  for (const auto& t : r.timing) {
    TimingSummary s;
    s.case_index = t.case_index;
    s.label = t.label;
    s.median_us = t.median_us;
    s.ci95_us = t.ci95_us;
    s.reference_us = t.reference_us;
    s.library_us = t.library_us;
    s.roofline_us = t.roofline_us;
    s.fraction_of_roofline = t.fraction_of_roofline;
    s.disturbed = t.disturbed;
    s.contention = t.contention;
    s.roofline_bound = t.roofline_bound;
    s.roofline_gbps = t.roofline_gbps;
    s.roofline_gflops = t.roofline_gflops;
    s.roofline_working_set_bytes = t.roofline_working_set_bytes;
    s.beyond_roofline = t.beyond_roofline;
    s.floor_us = t.floor_us;
    a.timings.push_back(std::move(s));
  }
  a.library_config = r.library_config;
  a.speedup_vs_reference = r.speedup_vs_reference;
  a.speedup_vs_library = r.speedup_vs_library;
  a.fraction_of_roofline = r.fraction_of_roofline;
  a.eval_seed = r.seed;
  a.eval_seconds = r.wall_seconds;
  a.contention = 0;
  for (const auto& t : r.timing) a.contention = std::max(a.contention, t.contention);
  a.decision.clear();
  a.decision_lower.reset();
  a.decision_upper.reset();
  a.decision_pairs = 0;
  a.decision_contention = 0;
  a.early_figures = false;
  if (r.incumbent && r.incumbent->decision != eval::IncumbentDecision::unavailable) {
    const eval::IncumbentComparison& c = *r.incumbent;
    a.decision = std::string(eval::incumbent_decision_name(c.decision));
    if (c.lower > 0) a.decision_lower = c.lower;
    a.decision_upper = c.upper;
    a.decision_pairs = c.pairs;
    a.early_figures = !c.full_timing;
    a.speedup_vs_incumbent = c.ratio;
    a.contention = std::max(a.contention, c.contention);
    a.decision_contention = c.contention;
  }
}

bool eval_disturbed(const eval::EvalResult& r) {
  for (const auto& t : r.timing) {
    if (eval::timing_disturbed(t)) return true;
  }
  return r.incumbent && r.incumbent->decision != eval::IncumbentDecision::unavailable && r.incumbent->disturbed;
}

}  // namespace kope::agent
