#include "agent/judge.h"

#include <algorithm>

#include <fmt/format.h>

#include "agent/prompt.h"
#include "agent/recorder.h"
#include "agent/reverify.h"
#include "util/hash.h"
#include "util/strings.h"

namespace kope::agent {

using run::Attempt;
using run::TimingSummary;
using nlohmann::json;

namespace {

// How long a re-time waits for the machine to be quiet before timing (EvalOptions::quiet_wait_seconds).
constexpr double k_quiet_wait_seconds = 30;

bool compared_side_by_side(const Attempt& a) { return run::incumbent_decision(a.decision).has_value(); }

bool compared_with_incumbent(const eval::EvalResult& r) {
  return r.incumbent && r.incumbent->decision != eval::IncumbentDecision::unavailable;
}

// The evidence a replacement would rest on: the candidate's timings and the comparison, or, without
// a comparison, also the incumbent's recorded timings.
bool disturbed_evidence(const eval::EvalResult& r, const Attempt& inc) {
  if (eval_disturbed(r)) return true;
  return !compared_with_incumbent(r) && inc.timing_disturbed();
}

}  // namespace

Status Judge::evaluate(Attempt& a) {
  if (!a.code) return fail(ErrorKind::internal, "judge: attempt {} of {} has no code to evaluate", a.iteration, m_ctx.op.name);
  const int k = a.iteration;
  const std::string& code = *a.code;
  a.has_code = true;
  a.code_hash = util::sha256_hex(code);
  KOPE_ASSIGN(a.code_file, m_ctx.write_run_file(fmt::format("candidates/{}/{}.cpp", m_ctx.op_dir, k), code));
  eval::EvalOptions opts = m_ctx.cfg.eval_options;
  opts.seed = m_ctx.data_seed();
  const Attempt* inc = m_ctx.state.incumbent();
  if (inc && m_ctx.cfg.fast_verdict && opts.time && inc->has_code) {
    // Fast verdict: the evaluator times the candidate against the incumbent itself.
    if (auto src = m_ctx.code_of(*inc)) {
      opts.incumbent_source = std::move(*src);
      opts.incumbent_margin = m_ctx.cfg.min_improvement;
    }
  }
  m_ctx.phase(k, a.stage, "evaluating");
  KOPE_ASSIGN(eval::EvalResult r, m_ctx.env.evaluator->evaluate(m_ctx.op, code, opts));
  if (inc && r.verdict == eval::Verdict::correct) {
    Attempt first = a;
    apply_eval_result(first, r);
    first.evidence_disturbed = disturbed_evidence(r, *inc);
    eval::ReplacementDecision d = replacement(first, *inc);
    if (d.retime) {
      KOPE_ASSIGN(r, retime(a, first, d, opts));
    }
  }
  apply_eval_result(a, r);
  a.evidence_disturbed = inc && r.verdict == eval::Verdict::correct && disturbed_evidence(r, *inc);
  return {};
}

// Evidence that would replace the incumbent while other work ran beside it: evaluated once more,
// after waiting for the machine to be quiet.
Result<eval::EvalResult> Judge::retime(Attempt& a, const Attempt& first, const eval::ReplacementDecision& why,
                                       eval::EvalOptions opts) {
  const int k = a.iteration;
  KOPE_TRY(m_ctx.emit(run::RetimeEvent{k, compared_side_by_side(first) ? first.decision_contention : first.contention,
                                        compared_side_by_side(first) ? first.decision : run::Decision::recorded_timings,
                                        why.reason}));
  opts.seed = m_ctx.data_seed();
  opts.quiet_wait_seconds = k_quiet_wait_seconds;
  m_ctx.phase(k, a.stage, "re-timing (disturbed)");
  KOPE_ASSIGN(eval::EvalResult again, m_ctx.env.evaluator->evaluate(m_ctx.op, *a.code, opts));
  a.retimed = true;
  return again;
}

eval::ReplacementDecision Judge::replacement(const Attempt& a, const Attempt& inc) const {
  eval::ReplacementEvidence e;
  e.compared = compared_side_by_side(a);
  e.margin = m_ctx.cfg.min_improvement;
  e.disturbed = a.evidence_disturbed;
  e.retimed = a.retimed;
  if (e.compared) {
    e.decision = run::incumbent_decision(a.decision).value_or(eval::IncumbentDecision::undecided);
    e.ratio = a.speedup_vs_incumbent.value_or(1);
    e.lower = a.decision_lower.value_or(0);
    if (a.decision_upper) e.upper = *a.decision_upper;
    e.contention = a.decision_contention;
    e.outside_load = a.decision_outside_load;
  } else {
    e.ratio = relative_speed(inc.timings, a.timings).value_or(0);
    e.contention = std::max(a.contention, inc.contention);
  }
  return eval::decide_replacement(e);
}

bool Judge::replaces(Attempt& a, const Attempt& inc) const {
  if (!compared_side_by_side(a)) {
    a.decision = run::Decision::recorded_timings;
    a.speedup_vs_incumbent = relative_speed(inc.timings, a.timings);
  }
  eval::ReplacementDecision d = replacement(a, inc);
  a.margin_demanded = d.margin_demanded;
  a.decided_by = d.rule;
  a.decided_by_reason = d.reason;
  // A re-time the evaluation did not get (it asks for one only before it): not replaced.
  return d.replaces && !d.retime;
}

namespace {

// A correct attempt that did not become the incumbent (a quarantined win is no stall: it waits
// for its re-verification).
bool stalled(const Attempt& a) { return a.correct() && !a.improved && a.quarantine_reason.empty(); }

// "attempt 3 0.97x the incumbent, timed beside it (undecided)" / "attempt 4 0.80x the incumbent".
std::string stall_outcome(const Attempt& a) {
  if (!a.speedup_vs_incumbent) return fmt::format("attempt {} not compared with it", a.iteration);
  auto d = run::incumbent_decision(a.decision);
  return fmt::format("attempt {} {:.2f}x the incumbent{}", a.iteration, *a.speedup_vs_incumbent,
                     d ? fmt::format(", timed beside it ({})", eval::incumbent_decision_name(*d)) : std::string());
}

}  // namespace

Result<AssessedCase> Judge::decide(Attempt& a) const {
  const OpState& st = m_ctx.state;
  const Attempt* inc = st.incumbent();
  const Attempt* parent = a.parent_iteration ? &m_ctx.attempt(*a.parent_iteration) : nullptr;
  if (parent && !a.parent_case_id) a.parent_case_id = m_ctx.case_id(parent->iteration);
  std::optional<double> r;
  if (a.correct()) a.improved = inc ? replaces(a, *inc) : true;
  // r and the outcome label are the memory's (its rule over the parent case it holds, or a
  // replay's source case); the journal states them, so they are asked for before recording.
  AssessedCase out{case_record(m_ctx, a), {}};
  KOPE_ASSIGN(out.assessment, m_ctx.env.store->assess_attempt(out.record));
  const memory::CaseAssessment& step = out.assessment;
  if (a.correct()) {
    r = step.ratio;
    a.speedup_vs_parent = r;
    out.record.speedup_vs_parent = r;  // the case states r as the attempt does
  }
  a.outcome = step.outcome;
  if (a.correct() && !step.quarantine_reason.empty()) {
    // An implausible win is no incumbent until re-verified at the end of the op.
    a.quarantine_reason = step.quarantine_reason;
    a.improved = false;
  }
  if (!st.attempts.empty() && a.correct() && !st.attempts.back().correct()) {
    const Attempt& prev = st.attempts.back();
    a.notable = true;
    a.notable_reason = fmt::format("attempt {} is correct after attempt {} failed ({}: {})", a.iteration, prev.iteration,
                                   eval::verdict_name(prev.verdict), util::truncate_text(prev.message, 160, 1));
  } else if (a.improved && inc && r) {
    // Timed beside the incumbent it began from, the gain is that comparison's (the same load for
    // both); memory's r compares timings recorded at other times, which under load can be off
    // by 2x, and a reflection triggered by it would write an overstated lesson.
    bool beside = compared_side_by_side(a) && a.speedup_vs_incumbent && parent && parent->iteration == inc->iteration;
    double gain = beside ? *a.speedup_vs_incumbent : *r;
    if (gain >= m_ctx.cfg.notable_speedup) {
      a.notable = true;
      a.notable_reason = beside ? fmt::format("attempt {} is {:.2f}x the speed of the kernel it began from, timed beside it",
                                              a.iteration, gain)
                                : fmt::format("attempt {} is {:.2f}x faster than the kernel it began from", a.iteration, gain);
    }
  } else if (inc && stalled(a) && !st.attempts.empty() && stalled(st.attempts.back()) &&
             (st.attempts.size() < 2 || !stalled(st.attempts[st.attempts.size() - 2]))) {
    // The second correct attempt in a row that did not replace the incumbent: what the stall
    // teaches reaches the task's later prompts (the hot tier's own lessons) instead of waiting
    // for the end (the real-model run of 2026-12-07: conv2d_1x1's undecided refinements wrote
    // their lessons only when the task ended). Once per stall: a third in a row is not notable.
    const Attempt& prev = st.attempts.back();
    a.notable = true;
    a.notable_reason = fmt::format("attempts {} and {} were correct but neither replaced the incumbent (attempt {}): {}; {}",
                                   prev.iteration, a.iteration, inc->iteration, stall_outcome(prev), stall_outcome(a));
  }
  return out;
}

Status Judge::reverify_quarantined() {
  const OpState& st = m_ctx.state;
  for (const auto& [k, logged] : st.reverified) KOPE_TRY(apply_reverification(logged));
  for (const Attempt& a : st.attempts) {
    if (a.quarantine_reason.empty() || !a.correct() || st.reverified.contains(a.iteration)) continue;
    auto case_id = m_ctx.case_id(a.iteration);
    if (!case_id) return fail(ErrorKind::internal, "reverify: attempt {} of {} was not recorded", a.iteration, m_ctx.op.name);
    KOPE_ASSIGN(std::string code, m_ctx.code_of(a));
    eval::EvalOptions opts = m_ctx.cfg.eval_options;
    // Fresh inputs: a seed of its own (without a run seed, a random one).
    opts.seed = m_ctx.cfg.seed ? std::optional<uint64_t>(m_ctx.derived_seed(a.iteration, "reverify")) : std::nullopt;
    m_ctx.phase(a.iteration, a.stage, "re-verifying a quarantined win");
    KOPE_ASSIGN(Reverification v, reverify(*m_ctx.env.evaluator, m_ctx.op, code, case_timings(a), opts));
    run::ReverifiedEvent e;
    e.iteration = a.iteration;
    e.case_id = *case_id;
    e.confirmed = v.confirmed;
    e.quarantine_reason = a.quarantine_reason;
    e.reason = v.reason;
    e.seed = v.seed;
    e.verdict = v.verdict;
    e.speedup_vs_reference = v.speedup_vs_reference;
    e.speed_kept = v.speed_kept;
    // Promoted when it beats the incumbent by the incumbent rule's margin on recorded timings.
    const Attempt* inc = st.incumbent();
    auto faster = inc ? relative_speed(inc->timings, a.timings) : std::nullopt;
    e.promoted = v.confirmed && (!inc || (faster && *faster > 1 + m_ctx.cfg.min_improvement));
    KOPE_TRY(m_ctx.emit(e));  // applied: re-verified, and the incumbent when promoted
    m_ctx.note(fmt::format("attempt {} (quarantined: {}) {}{}", a.iteration, a.quarantine_reason, v.reason,
                           e.promoted ? "; it is the new incumbent" : ""));
    KOPE_TRY(apply_reverification(e));
  }
  return {};
}

Status Judge::apply_reverification(const run::ReverifiedEvent& r) const {
  KOPE_ASSIGN(std::optional<memory::CaseRecord> c, m_ctx.env.store->get_case(r.case_id));
  if (!c || c->quarantine_status != memory::QuarantineStatus::quarantined) return {};  // already applied (or imported without it)
  return m_ctx.env.store->verify_case(r.case_id, r.confirmed, r.reason);
}

void apply_eval_result(Attempt& a, const eval::EvalResult& r) {
  a.verdict = r.verdict;
  a.message = r.message;
  a.diagnostics = cut_at_lines(r.diagnostics, 4000, 60);
  a.cases_total = static_cast<int>(r.cases.size());
  a.cases_passed = 0;
  a.first_mismatch.clear();
  a.wrong_cases.clear();
  for (const auto& c : r.cases) {
    if (c.ok) {
      ++a.cases_passed;
    } else if (r.verdict == eval::Verdict::wrong_result && !c.first_mismatch.empty() && a.wrong_cases.size() < run::k_wrong_cases_kept) {
      a.wrong_cases.push_back("case " + c.label + ": " + c.first_mismatch);
    }
  }
  if (!a.wrong_cases.empty()) a.first_mismatch = a.wrong_cases.front();
  a.timings.clear();
  for (const auto& t : r.timing) {
    TimingSummary& s = a.timings.emplace_back();
    static_cast<eval::CaseFigures&>(s) = t;  // the side-by-side figures are added below
  }
  a.library_config = r.library_config;
  a.speedup_vs_reference = r.speedup_vs_reference;
  a.speedup_vs_library = r.speedup_vs_library;
  a.fraction_of_roofline = r.fraction_of_roofline;
  a.eval_seed = r.seed;
  a.eval_seconds = r.wall_seconds;
  a.contention = 0;
  for (const auto& t : r.timing) a.contention = std::max(a.contention, t.contention);
  a.decision = run::Decision::none;
  a.decision_lower.reset();
  a.decision_upper.reset();
  a.decision_pairs = 0;
  a.decision_contention = 0;
  a.decision_outside_load = 0;
  a.early_figures = false;
  if (r.incumbent && r.incumbent->decision != eval::IncumbentDecision::unavailable) {
    const eval::IncumbentComparison& c = *r.incumbent;
    a.decision = run::decision_of(c.decision);
    if (c.lower > 0) a.decision_lower = c.lower;
    a.decision_upper = c.upper;
    a.decision_pairs = c.pairs;
    a.early_figures = !c.full_timing;
    a.speedup_vs_incumbent = c.ratio;
    a.contention = std::max(a.contention, c.contention);
    a.decision_contention = c.contention;
    a.decision_outside_load = c.outside_load;
    for (const eval::CaseComparison& cc : c.cases) {
      for (TimingSummary& s : a.timings) {
        if (s.case_index != cc.case_index) continue;
        if (cc.candidate_us > 0) s.side_candidate_us = cc.candidate_us;
        if (cc.incumbent_us > 0) s.side_incumbent_us = cc.incumbent_us;
        s.side_ratio = cc.ratio;
        s.side_candidate_contention = cc.candidate_contention;
        s.side_incumbent_contention = cc.incumbent_contention;
      }
    }
  }
}

bool eval_disturbed(const eval::EvalResult& r) {
  for (const auto& t : r.timing) {
    if (eval::timing_disturbed(t)) return true;
  }
  return r.incumbent && r.incumbent->decision != eval::IncumbentDecision::unavailable && r.incumbent->disturbed;
}

}  // namespace kope::agent
