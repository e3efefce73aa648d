#include "agent/recorder.h"

#include <fmt/format.h>

#include "util/strings.h"

namespace kope::agent {

std::string format_ratio(std::optional<double> v) { return v ? fmt::format("{:.2f}x", *v) : std::string("-"); }

namespace {

// How the incumbent decision was reached, for the journal.
std::string decision_note(const Attempt& a) {
  std::string out;
  if (a.decision == run::Decision::recorded_timings) {
    out = fmt::format("compared with the incumbent's recorded timings ({}).", format_ratio(a.speedup_vs_incumbent));
  } else {
    out = fmt::format("timed against the incumbent in alternating batches: {}, {} (interval [{}, {}], {} pairs of batches){}.",
                      run::decision_name(a.decision), format_ratio(a.speedup_vs_incumbent), a.decision_lower ? fmt::format("{:.3f}", *a.decision_lower) : "0",
                      a.decision_upper ? fmt::format("{:.3f}", *a.decision_upper) : "inf", a.decision_pairs,
                      a.early_figures ? "; the timings above are the comparison's early figures, not timed to the full CI" : "");
  }
  if (a.retimed) out += " The first timing was disturbed by other load, so it was timed once more.";
  if (a.evidence_disturbed) {
    out += fmt::format(" The evidence was disturbed (waited for a CPU {:.0f}% of the time)", 100 * a.contention);
    if (a.margin_demanded) {
      out += fmt::format(": replacing the incumbent needed a speedup above {:.3f}x, {}", *a.margin_demanded,
                         a.improved ? "which it had" : "which it did not have, so the incumbent stays");
    }
    out += ".";
  }
  return out;
}

}  // namespace

std::string journal(const Attempt& a, const OpState& state, const spec::OpSpec& op) {
  std::string from;
  if (a.policy == Policy::replay) {
    from = fmt::format("a replay of memory case {} (re-verified and re-timed here)", a.source_case_id.value_or(0));
  } else if (!a.parent_iteration) {
    from = "a fresh draft";
  } else {
    const Attempt& p = state.attempts[static_cast<size_t>(*a.parent_iteration - 1)];
    from = a.stage == memory::Stage::repair
               ? fmt::format("a repair of attempt {} ({})", p.iteration, eval::verdict_name(p.verdict))
               : fmt::format("a refinement of the incumbent, attempt {} ({})", p.iteration, format_ratio(p.speedup_vs_reference));
  }
  std::string out = fmt::format("Strategy: {} attempt {} on {} ({}), {}.\n", memory::stage_name(a.stage), a.iteration,
                                op.name, op.category, from);
  out += fmt::format("Change: {}\n", a.optimisation);
  // The evaluator's message whole: a few sentences, one more when load disturbed the timing
  // (the cap is for a runaway one; a cut message reads as a cut item in later prompts).
  out += fmt::format("Status: {}{}{}\n", eval::verdict_name(a.verdict), a.message.empty() ? "" : " — ", util::truncate_text(a.message, 1200, 4));
  if (!a.first_mismatch.empty()) out += "First mismatch: " + a.first_mismatch + "\n";
  if (a.correct()) {
    out += fmt::format("Numbers: {} vs reference, {} vs library{}, {} vs parent", format_ratio(a.speedup_vs_reference),
                       format_ratio(a.speedup_vs_library),
                       a.library_config && a.speedup_vs_library ? a.library_config->forced_note() : std::string(),
                       format_ratio(a.speedup_vs_parent));
    if (a.fraction_of_roofline) out += fmt::format(", {:.0f}% of the roofline", 100 * *a.fraction_of_roofline);
    out += fmt::format("; label {}.", run::label_name(a.outcome));
    for (const auto& t : a.timings) {
      if (t.disturbed) {
        out += fmt::format(" {}: {:.2f} us (reference {:.2f} us; timed under outside load, the kernel waited for a CPU {:.0f}% of "
                           "the time).", t.label, t.median_us, t.reference_us, 100 * t.contention);
      } else {
        out += fmt::format(" {}: {:.2f} us (reference {:.2f} us).", t.label, t.median_us, t.reference_us);
      }
    }
    out += "\n";
  } else if (a.cases_total > 0) {
    out += fmt::format("Numbers: {} of {} cases passed; label {}.\n", a.cases_passed, a.cases_total, run::label_name(a.outcome));
  }
  if (a.correct() && a.decision != run::Decision::none) out += "Decision: " + decision_note(a) + "\n";
  std::string reading;
  if (a.correct() && !a.quarantine_reason.empty()) {
    reading = fmt::format("correct, but the memory quarantined the win ({}); it is held back from the incumbent until it "
                          "is re-verified on fresh inputs at the end of the operator",
                          a.quarantine_reason);
  } else if (a.correct()) {
    reading = a.improved ? (a.speedup_vs_incumbent ? fmt::format("new incumbent, {} faster than the previous one",
                                                                 format_ratio(a.speedup_vs_incumbent))
                                                   : "first correct kernel: the incumbent")
                         : fmt::format("correct but not faster than the incumbent ({}); the incumbent stays",
                                       format_ratio(a.speedup_vs_incumbent));
  } else if (a.verdict == eval::Verdict::bad_answer) {
    reading = "the answer gave no candidate (" + a.message + "); nothing was evaluated";
  } else if (!a.has_code) {
    reading = "the answer held no usable code";
  } else if (a.verdict == eval::Verdict::compile_error) {
    reading = "the compiler rejected it";
  } else if (a.verdict == eval::Verdict::wrong_result) {
    reading = "it computes something else than the reference";
  } else if (a.verdict == eval::Verdict::rejected) {
    reading = "it broke a kernel rule";
  } else {
    reading = "it failed at run time";
  }
  out += "Reading: " + reading + ".\n";
  return out;
}

Status Recorder::add(Attempt a, AssessedCase assessed) {
  KOPE_TRY(m_ctx.emit(run::AttemptEvent{std::move(a)}));
  return write(m_ctx.state.attempts.back(), std::move(assessed.record));
}

Status Recorder::record(const Attempt& a) {
  return write(a, case_record(m_ctx, a));
}

std::vector<memory::CaseTimingRecord> case_timings(const Attempt& a) {
  std::vector<memory::CaseTimingRecord> out;
  for (const auto& t : a.timings) {
    out.push_back({t.case_index, t.median_us, t.ci95_us, t.reference_us, t.library_us, t.disturbed, t.contention,
                   t.floor_us > 0 ? std::optional<double>(t.floor_us) : std::nullopt});
  }
  return out;
}

memory::CaseRecord case_record(const OpContext& ctx, const Attempt& a) {
  const OpEnvironment& env = ctx.env;
  memory::CaseRecord c;
  c.natural_key = ctx.key(a.iteration);
  c.run_id = env.run_id;
  c.task = task_info(ctx.op);
  c.hardware = {env.evaluator->target().str(), env.hw->cpu_model, env.hw->cores, env.hw->peak_gflops,
                env.hw->peak_gbps};
  c.toolchain = {env.evaluator->toolchain_id(), env.evaluator->backend()};
  c.parent_id = a.parent_case_id;
  c.stage = a.stage;
  c.optimisation = a.optimisation;
  c.verdict = a.verdict;
  c.message = a.message;
  c.diagnostics = a.diagnostics;
  c.timings = case_timings(a);
  c.speedup_vs_parent = a.speedup_vs_parent;
  c.speedup_vs_reference = a.speedup_vs_reference;
  c.speedup_vs_library = a.speedup_vs_library;
  c.fraction_of_roofline = a.fraction_of_roofline;
  c.tokens_prompt = a.tokens_prompt;
  c.tokens_completion = a.tokens_completion;
  return c;
}

Status Recorder::write(const Attempt& a, memory::CaseRecord c) {
  const OpEnvironment& env = m_ctx.env;
  KOPE_ASSIGN(c.code, m_ctx.code_of(a));
  c.journal = a.journal;
  c.wall_seconds = a.wall_seconds;
  KOPE_ASSIGN(memory::RecordedCase recorded, env.store->record_attempt(c));
  const int64_t id = recorded.id;
  if (a.policy == Policy::llm && !a.prompt_id.empty()) {
    memory::RetrievalLogEntry entry;
    entry.prompt_id = a.prompt_id;
    entry.case_id = id;
    entry.stage = a.stage;
    entry.items = a.memory_items;
    entry.tier_tokens = a.tier_tokens;
    KOPE_TRY(env.store->log_retrieval(entry));
    KOPE_TRY(env.store->credit(a.prompt_id, reward_for(a)));
  }
  return m_ctx.emit(run::RecordedEvent{a.iteration, id, std::move(recorded.assessment.error_signature)});
}

double reward_for(const Attempt& a) {
  return memory::stage_reward(a.stage, a.verdict, a.correct() ? a.speedup_vs_parent.value_or(1.0) : 0.0);
}

}  // namespace kope::agent
