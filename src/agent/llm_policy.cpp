#include "agent/llm_policy.h"

#include <fmt/format.h>

#include "agent/answer.h"
#include "agent/forms.h"
#include "agent/retrieval.h"
#include "util/fs.h"

namespace kope::agent {

Result<Next> LlmPolicy::propose(int k, const Plan& plan) {
  ModelAnswer answer;
  if (m_ctx.state.pending && m_ctx.state.pending->iteration == k) {
    // Answered before the run died: not asked again.
    answer.event = *m_ctx.state.pending;
    KOPE_ASSIGN(answer.text, util::read_file(m_ctx.env.run_dir / answer.event.answer_file));
  } else {
    KOPE_TRY(m_ctx.reference_source());
    m_ctx.phase(k, plan.stage, "retrieving");
    // The task's own lessons: in the hot tier, so left out of the same prompt's retrieval.
    KOPE_ASSIGN(std::vector<memory::Lesson> learned, lessons_learned_here(m_ctx));
    KOPE_ASSIGN(KnowledgeCandidates knowledge, gather_knowledge(m_ctx, plan, learned));
    KOPE_ASSIGN(PromptInput input, prompt_input(plan, k, learned));
    KOPE_ASSIGN(TurnOutcome turn, m_turn.ask(k, plan, input, knowledge));
    if (!turn.answer) return Next{std::nullopt, turn.end, ""};
    answer = std::move(*turn.answer);
  }
  return Next{from_answer(answer, plan), OpEnd::finished, ""};
}

Result<PromptInput> LlmPolicy::prompt_input(const Plan& plan, int k, const std::vector<memory::Lesson>& learned) {
  const auto& env = m_ctx.env;
  PromptInput in;
  in.op = &m_ctx.op;
  in.reference_source = m_ctx.reference_loaded().value_or("");
  HardwareGuide fallback;
  fallback.backend = env.evaluator->backend();
  in.hardware = render_hardware(*env.hw, env.evaluator->toolchain_id(), env.guide ? *env.guide : fallback);
  in.toolchain = env.evaluator->toolchain_id();
  in.stage = plan.stage;
  in.iteration = k;
  in.max_iterations = m_ctx.cfg.max_iterations;
  const Attempt* inc = m_ctx.state.incumbent();
  if (inc) {
    auto code = m_ctx.code_of(*inc);
    in.incumbent = render_incumbent(*inc, code ? *code : std::string("(source unavailable)"), m_ctx.lang());
  }
  if (!m_ctx.state.attempts.empty()) {
    const Attempt& last = m_ctx.state.attempts.back();
    // The attempt a repair mends: the last one, or the one before a bad answer (plan.h).
    const Attempt& failed = plan.stage == memory::Stage::repair && plan.parent_iteration
                                ? m_ctx.attempt(*plan.parent_iteration)
                                : last;
    if (&failed != &last) in.feedback = render_feedback(failed, inc, m_ctx.lang());
    in.feedback += render_feedback(last, inc, m_ctx.lang());
    if (!failed.correct() && failed.has_code && plan.stage == memory::Stage::repair) {
      auto code = m_ctx.code_of(failed);
      if (code) {
        in.feedback += "The failed attempt's code:\n" + fence_code(cut_at_lines(*code, k_max_code_shown), m_ctx.lang());
      }
    } else if (last.correct() && last.has_code && inc && inc->iteration != last.iteration) {
      // A correct attempt that did not replace the incumbent: what it changed, so the next one
      // can build on it or avoid it without rebuilding it from its description.
      auto code = m_ctx.code_of(last);
      auto inc_code = m_ctx.code_of(*inc);
      if (code && inc_code && *code != *inc_code) {
        // The whole diff or the whole code, never part of a diff: a model building on the
        // attempt cannot rebuild the hunks it was not shown.
        std::string diff = diff_within(*inc_code, *code, SIZE_MAX, 3);
        bool as_diff = !diff.empty() && diff.size() <= k_max_diff_shown;
        in.feedback += as_diff
                           ? fmt::format("Attempt {}'s code, as a diff against the incumbent:\n```diff\n{}```\n", last.iteration, diff)
                           : fmt::format("Attempt {}'s code (too changed from the incumbent to show as a diff):\n{}", last.iteration,
                                         fence_code(cut_at_lines(*code, k_max_code_shown), m_ctx.lang()));
      } else if (code && inc_code) {
        in.feedback += fmt::format("Attempt {}'s code is the incumbent's, unchanged.\n", last.iteration);
      }
    }
    in.tried = render_tried(m_ctx.state.attempts);
    in.learned = render_learned(learned);
  }
  return in;
}

Proposal LlmPolicy::from_answer(const ModelAnswer& answer, const Plan& plan) const {
  const run::AnswerEvent& e = answer.event;
  Proposal p;
  Attempt& a = p.attempt;
  a.iteration = e.iteration;
  a.stage = plan.stage;
  a.parent_iteration = plan.parent_iteration;
  static_cast<run::PromptFacts&>(a) = e;  // the prompt's facts and the call's usage, whole
  static_cast<run::ModelUsage&>(a) = e;
  ParsedAnswer parsed = parse_answer(answer.text);
  a.optimisation = parsed.optimisation;
  a.header_found = parsed.header_found;
  a.answer_form = parsed.form;
  a.answer_edits = static_cast<int>(parsed.edits.size());
  if (parsed.form == AnswerForm::edits) {
    // Edits are applied exactly to the incumbent's source, or the attempt is a bad_answer that
    // says why; never replaced by a guess.
    const Attempt* inc = m_ctx.state.incumbent();
    std::string why;
    if (parsed.has_code) {
      why = "the answer holds both a whole kernel and edits; give one or the other";
    } else if (plan.stage != memory::Stage::refine) {
      why = fmt::format("the answer gives edits in the {} stage; edits are taken only against the incumbent when refining, "
                        "so give the whole kernel",
                        memory::stage_name(plan.stage));
    } else if (!parsed.edit_problem.empty()) {
      why = parsed.edit_problem;
    } else if (!inc) {
      why = "the answer gives edits but there is no incumbent to apply them to; give the whole kernel";
    } else if (auto source = m_ctx.code_of(*inc); !source) {
      why = "the incumbent's source could not be read to apply the edits to: " + source.error().message;
    } else if (auto applied = apply_edits(*source, parsed.edits); !applied) {
      why = applied.error().message;
    } else {
      a.code = std::move(*applied);
      return p;
    }
    a.verdict = eval::Verdict::bad_answer;
    a.message = why;
    a.diagnostics = answer.text.empty() ? "" : "The answer began:\n" + cut_at_lines(answer.text, 600, 12);
    return p;
  }
  if (parsed.has_code) {
    a.code = std::move(parsed.code);
    return p;
  }
  std::string why = e.provider_problem;
  if (why.empty()) why = parsed.problem;
  if (e.finish_reason == "length") why += " (the answer hit the output-token limit)";
  a.verdict = eval::Verdict::compile_error;
  a.message = why == k_no_code_message ? why : std::string(k_no_code_message) + ": " + why;
  a.diagnostics = answer.text.empty() ? "" : "The answer began:\n" + cut_at_lines(answer.text, 600, 12);
  return p;
}

}  // namespace kope::agent
