#include "agent/model_turn.h"

#include <chrono>
#include <thread>

#include <fmt/format.h>

namespace kope::agent {

using nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

std::string role_label(llm::Message::Role r) {
  switch (r) {
    case llm::Message::Role::system: return "system";
    case llm::Message::Role::user: return "user";
    case llm::Message::Role::assistant: return "assistant";
  }
  return "?";
}

}  // namespace

std::string render_transcript(const std::vector<llm::Message>& messages, std::string_view answer) {
  std::string out;
  for (const auto& m : messages) out += "## " + role_label(m.role) + "\n\n" + m.content + "\n\n";
  out += "## assistant\n\n" + std::string(answer) + "\n";
  return out;
}

Result<TurnOutcome> ModelTurn::ask(int k, const Plan& plan, const PromptInput& input, const KnowledgeCandidates& knowledge) {
  Retry retry;
  for (;;) {
    if (m_ctx.cancelled()) return TurnOutcome{std::nullopt, OpEnd::cancelled};
    KOPE_ASSIGN(AssembledPrompt prompt, assemble(k, plan, input, knowledge, retry.shrink));
    llm::ChatParams params;
    params.max_output_tokens = static_cast<int>(m_ctx.cfg.budget.generation);
    if (m_ctx.cfg.seed) params.seed = m_ctx.derived_seed(k, "llm");
    params.purpose = std::string(memory::stage_name(plan.stage));
    m_ctx.phase(k, plan.stage, "waiting for the model");
    auto t0 = Clock::now();
    auto r = m_ctx.env.llm->chat(prompt.messages, params);
    Reply reply;
    reply.latency = std::chrono::duration<double>(Clock::now() - t0).count();
    if (r) {
      reply.text = r->text;
      reply.finish = r->finish_reason;
      reply.usage = r->usage;
      reply.cost = r->cost_usd;
      if (!reply.usage.estimated && reply.usage.prompt_tokens > 0) {
        m_ctx.env.estimator->calibrate(prompt.total_tokens, reply.usage.prompt_tokens);
      }
    } else {
      KOPE_ASSIGN(AfterFailure next, after_failure(k, r.error(), prompt, retry));
      if (next.action == AfterFailure::Action::retry) continue;
      if (next.action == AfterFailure::Action::stop) return TurnOutcome{std::nullopt, next.end};
      reply.provider_problem = std::move(next.problem);
    }
    KOPE_ASSIGN(ModelAnswer answer, keep(k, plan, prompt, reply));
    return TurnOutcome{std::move(answer), OpEnd::finished};
  }
}

Result<AssembledPrompt> ModelTurn::assemble(int k, const Plan& plan, const PromptInput& input,
                                            const KnowledgeCandidates& knowledge, double shrink) {
  context::Budget budget = m_ctx.cfg.budget;
  budget.warm_cap *= shrink;
  budget.cold_cap *= shrink;
  budget.cold_cap_learned *= shrink;
  for (int64_t* cap : {&budget.memory_draft, &budget.memory_repair, &budget.memory_refine}) {
    *cap = static_cast<int64_t>(static_cast<double>(*cap) * shrink);
  }
  m_ctx.phase(k, plan.stage, "assembling");
  // The last shrink leaves all memory out, the op pack included.
  KnowledgeCandidates without_pack;
  if (shrink == 0) {
    without_pack = knowledge;
    without_pack.op_pack.clear();
    without_pack.op_pack_text.clear();
  }
  KOPE_ASSIGN(AssembledPrompt prompt, assemble_prompt(*m_ctx.env.prompts, input, shrink == 0 ? without_pack : knowledge, budget,
                                                      m_ctx.cfg.mode, *m_ctx.env.estimator));
  // The op pack is fixed by the op's first prompt: logged with it, then reused unchanged.
  std::optional<run::OpPackRecord> new_pack;
  if (!m_ctx.state.op_pack && m_ctx.cfg.mode != context::Mode::none) {
    run::OpPackRecord pack;
    pack.text = knowledge.op_pack_text;
    pack.evidence = knowledge.evidence;
    for (const auto& a : prompt.admission) {
      if (a.section == "op_pack") pack.items.push_back(a);
    }
    new_pack = std::move(pack);
  }
  run::PromptEvent event;
  event.iteration = k;
  event.purpose = memory::stage_name(plan.stage);
  event.mode = context::mode_name(m_ctx.cfg.mode);
  event.tier_tokens = prompt.tier_tokens;
  event.total_tokens = prompt.total_tokens;
  event.limit = prompt.limit;
  event.knowledge_budget = prompt.knowledge_budget;
  event.admitted = prompt.admitted;
  event.admission = prompt.admission;
  event.dropped = prompt.dropped;
  event.hot_truncated = prompt.hot_truncated;
  event.token_scale = prompt.token_scale;
  event.prefix_tokens = prompt.prefix_tokens;
  event.shrink = shrink;
  event.op_pack = std::move(new_pack);
  if (m_ctx.cfg.mode != context::Mode::none) event.evidence = knowledge.evidence;
  // Applied, it fixes the op pack and marks the notes shown (not offered again in this task).
  KOPE_TRY(m_ctx.emit(std::move(event)));
  return prompt;
}

Result<ModelTurn::AfterFailure> ModelTurn::after_failure(int k, const llm::LlmError& err, const AssembledPrompt& prompt,
                                                         Retry& retry) {
  std::string cls(llm::failure_class_name(err.cls));
  run::LlmErrorEvent event{k, cls, err.message, err.http_status, ""};
  // A failure that ends the op says why with its event (applied, it is one of the op's errors).
  switch (err.cls) {
    case llm::FailureClass::context_length:
      if (retry.shrinks >= m_ctx.cfg.context_shrink_retries) {
        event.stop_error = "the prompt does not fit the model's window even without memory: " + err.message;
      }
      break;
    case llm::FailureClass::content_filtered:
    case llm::FailureClass::malformed:
    case llm::FailureClass::unauthorized:
    case llm::FailureClass::not_found:
    case llm::FailureClass::bad_request:
    case llm::FailureClass::cancelled:
      break;
    default:
      if (retry.backoffs >= m_ctx.cfg.backoff_seconds.size()) {
        event.stop_error = fmt::format("model unavailable ({}): {}", cls, err.message);
      }
  }
  KOPE_TRY(m_ctx.emit(std::move(event)));
  switch (err.cls) {
    case llm::FailureClass::context_length:
      if (retry.shrinks < m_ctx.cfg.context_shrink_retries) {
        ++retry.shrinks;
        retry.shrink = retry.shrinks >= m_ctx.cfg.context_shrink_retries ? 0.0 : retry.shrink * 0.5;
        // The estimate was too low for this model: learn that before rebuilding.
        m_ctx.env.estimator->calibrate(prompt.total_tokens, prompt.total_tokens * 5 / 4 + 1);
        return AfterFailure::again();
      }
      return AfterFailure::stop(OpEnd::llm_unavailable);
    case llm::FailureClass::content_filtered:
    case llm::FailureClass::malformed:
      return AfterFailure::without_text(fmt::format("the provider returned no usable answer ({}: {})", cls, err.message));
    case llm::FailureClass::unauthorized:
    case llm::FailureClass::not_found:
    case llm::FailureClass::bad_request:
      return fail(ErrorKind::remote, "the model call failed ({}): {}", cls, err.message);
    case llm::FailureClass::cancelled:
      return AfterFailure::stop(OpEnd::cancelled);
    default:
      if (retry.backoffs < m_ctx.cfg.backoff_seconds.size()) {
        double wait = m_ctx.cfg.backoff_seconds[retry.backoffs++];
        m_ctx.note(fmt::format("model unavailable ({}); waiting {:.0f} s", cls, wait));
        wait_backoff(wait);
        return AfterFailure::again();
      }
      return AfterFailure::stop(OpEnd::llm_unavailable);
  }
}

Result<ModelAnswer> ModelTurn::keep(int k, const Plan& plan, const AssembledPrompt& prompt, const Reply& reply) {
  ModelAnswer out;
  run::AnswerEvent& e = out.event;
  KOPE_ASSIGN(e.answer_file, m_ctx.write_run_file(fmt::format("candidates/{}/{}.answer.md", m_ctx.op_dir, k), reply.text));
  KOPE_TRY(m_ctx.write_transcript(
      fmt::format("transcripts/{}/{}-{}.md", m_ctx.op_dir, k, memory::stage_name(plan.stage)),
      render_transcript(prompt.messages, reply.text.empty() ? "(" + reply.provider_problem + ")" : reply.text)));
  e.iteration = k;
  e.stage = plan.stage;
  e.parent_iteration = plan.parent_iteration;
  e.prompt_id = m_ctx.key(k);
  e.tier_tokens = prompt.tier_tokens;
  e.prompt_tokens_estimated = prompt.total_tokens;
  e.knowledge_budget = prompt.knowledge_budget;
  e.memory_items = prompt.memory_items;
  e.admission = prompt.admission;
  e.tokens_prompt = reply.usage.prompt_tokens;
  e.tokens_completion = reply.usage.completion_tokens;
  e.usage_estimated = reply.usage.estimated;
  e.cost_usd = reply.cost;
  e.tokens_cached = reply.usage.cached_tokens;
  e.tokens_cache_write = reply.usage.cache_write_tokens;
  e.prefix_tokens = prompt.prefix_tokens;
  e.prefix_hash = prompt.prefix_hash;
  e.cached_price_ratio = llm::cached_price_ratio(m_ctx.env.llm->profile());
  if (reply.usage.estimated && reply.provider_problem.empty()) {
    // The provider reported no usage, so no cached figure: estimated from the op's previous call.
    e.tokens_cached =
        run::estimate_cached_tokens(m_ctx.state.attempts, prompt.prefix_hash, prompt.prefix_tokens, e.tokens_prompt);
    e.tokens_cached_estimated = e.tokens_cached > 0;
  }
  e.llm_seconds = reply.latency;
  e.finish_reason = reply.finish;
  e.provider_problem = reply.provider_problem;
  KOPE_TRY(m_ctx.emit(e));
  out.text = reply.text;
  return out;
}

void ModelTurn::wait_backoff(double seconds) const {
  auto until = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < until && !m_ctx.cancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

}  // namespace kope::agent
