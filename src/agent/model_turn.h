// agent/model_turn.h — one model call of the loop: prompt, call, backoff, shrink, transcript.
//
// ask() assembles the prompt for iteration k under the token budget and logs it ("prompt"),
// calls the model and keeps what came back before anything else happens to it: the answer's
// text in candidates/<op>/<k>.answer.md, the exchange in transcripts/<op>/<k>-<stage>.md, and
// the "answer" event (run::AnswerEvent) in the log. A failed call is logged ("llm_error") and
// then, by its class: a prompt too long for the model's window is rebuilt with the warm and
// cold caps halved (at most context_shrink_retries times, the last without memory) after the
// estimator learned the miss; a rate limit or an unavailable server is waited out
// (backoff_seconds, one wait each, cancellable); a filtered or malformed answer becomes an
// answer without text (its provider_problem says why); a refused key, an unknown model or a
// bad request fail the run; anything else, once the waits are used up, ends the op as
// llm_unavailable with the reason in OpState::errors.
#pragma once

#include <optional>
#include <string>

#include "agent/op_context.h"
#include "agent/plan.h"
#include "agent/prompt.h"
#include "run/events.h"

namespace kope::agent {

// A model answer as the loop goes on with it: the logged event and the answer's text.
struct ModelAnswer {
  run::AnswerEvent event;
  std::string text;
};

// What a turn ended with: an answer, or none and why the op stops (cancelled, llm_unavailable).
struct TurnOutcome {
  std::optional<ModelAnswer> answer;
  OpEnd end = OpEnd::finished;
};

class ModelTurn {
 public:
  explicit ModelTurn(OpContext& ctx) : m_ctx(ctx) {}

  // Fails only when kope cannot go on: the event log or the run directory cannot be written,
  // the prompt does not fit even with its hot tier cut, or the model refuses the credentials,
  // the model name or the request.
  Result<TurnOutcome> ask(int k, const Plan& plan, const PromptInput& input, const KnowledgeCandidates& knowledge);

 private:
  // Where a turn stands between calls.
  struct Retry {
    double shrink = 1.0;  // factor on the warm and cold caps
    size_t backoffs = 0;
    int shrinks = 0;
  };
  // The model's reply, or what stands in for it.
  struct Reply {
    std::string text;
    std::string finish = "stop";
    std::string provider_problem;
    llm::Usage usage;
    double cost = 0;
    double latency = 0;
  };
  // What to do after a failed call.
  struct AfterFailure {
    enum class Action { retry, stop, answer_without_text };
    Action action = Action::stop;
    OpEnd end = OpEnd::llm_unavailable;
    std::string problem;  // answer_without_text: why
    static AfterFailure again() { return {Action::retry, OpEnd::finished, {}}; }
    static AfterFailure stop(OpEnd why) { return {Action::stop, why, {}}; }
    static AfterFailure without_text(std::string why) { return {Action::answer_without_text, OpEnd::finished, std::move(why)}; }
  };

  Result<AssembledPrompt> assemble(int k, const Plan& plan, const PromptInput& input, const KnowledgeCandidates& knowledge,
                                   double shrink);
  Result<AfterFailure> after_failure(int k, const llm::LlmError& err, const AssembledPrompt& prompt, Retry& retry);
  Result<ModelAnswer> keep(int k, const Plan& plan, const AssembledPrompt& prompt, const Reply& reply);
  void wait_backoff(double seconds) const;

  OpContext& m_ctx;
};

// The transcript of one exchange: every message under its role's heading, then the answer.
std::string render_transcript(const std::vector<llm::Message>& messages, std::string_view answer);

}  // namespace kope::agent
