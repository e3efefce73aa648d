// fakes/fakes.h — fast, deterministic stand-ins for the evaluator, the memory store and the
// model, used by the agent's unit tests, the report's demo runs and bench/agent_bench (which
// measures the agent's own overhead, so model latency and evaluation must cost nothing).
// Test support: compiled into kope_test_support, which only tests and benchmarks link; the kope
// executable contains none of it.
//
// FakeEvaluator reads its verdict from directives in the candidate's source:
//   // fake-verdict: wrong_result        (default: correct when kope_kernel is defined)
//   // fake-time-us: 250                 (per call on every timed case; default: the reference's;
//                                         a list gives one value per evaluation of this source,
//                                         the last repeating: a speed that does not hold)
//   // fake-message: something broke     (the evaluator's one-line message)
//   // fake-contention: 0.3, 0           (median contention of the timings, one value per
//                                         evaluation of this source; the last repeats)
//   // fake-outside-load: 0              (the outside load beside the timings, a list like the
//                                         above; default: at least k_outside_load when the
//                                         contention disturbs, else 0)
// Given EvalOptions::incumbent_source, it also answers the comparison: the ratio of the two
// fake times with a ±1% interval, decided by eval::classify_ratio_interval.
// InMemoryStore implements the agent's memory::Store in memory (natural-key idempotence, the
// store's rules through memory::assess_case, lessons changed by deltas, simple scored retrieval,
// crediting idempotent per prompt id). It has no administration (memory::StoreAdmin).
// ScriptedLlm answers through a function and records every call.
// All three are thread-safe.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <vector>

#include "kope/eval.h"
#include "kope/llm.h"
#include "kope/memory.h"

namespace kope::fakes {

class FakeEvaluator : public eval::Evaluator {
 public:
  struct Config {
    double reference_us = 1000;
    std::optional<double> library_us = 800;
    double roofline_us = 100;
    double floor_us = 0;  // every timed case's hardware floor (0: none, as without a profile)
    std::string target = "x86_64-avx2-fma";
    std::string toolchain = "g++ (fake) 12 | -O3";
    std::string backend = "cpu";
    std::optional<HardwareProfile> hardware;  // what hardware() says (default: a profile of `target` alone)
  };
  FakeEvaluator() : FakeEvaluator(Config{}) {}
  explicit FakeEvaluator(Config c);

  Result<eval::EvalResult> evaluate(const spec::OpSpec& op, std::string_view source,
                                    const eval::EvalOptions& options) override;
  Target target() const override;
  std::string toolchain_id() const override { return m_config.toolchain; }
  std::string backend() const override { return m_config.backend; }
  const HardwareProfile& hardware() const override { return m_hw; }

  int calls() const;
  std::vector<std::string> sources() const;  // every source evaluated, in order

 private:
  Config m_config;
  HardwareProfile m_hw;
  mutable std::mutex m_mutex;
  std::vector<std::string> m_sources;
};

class InMemoryStore : public memory::Store {
 public:
  Result<memory::RecordedCase> record_attempt(const memory::CaseRecord& c) override;
  Result<memory::CaseAssessment> assess_attempt(const memory::CaseRecord& c) override;
  Result<std::optional<memory::CaseRecord>> get_case(int64_t id) override;
  Result<std::optional<memory::CaseRecord>> find_case(const std::string& natural_key) override;
  Result<std::vector<memory::CaseRecord>> best_cases(const std::string& op, const std::string& target, int limit) override;
  Result<std::string> apply(const memory::LessonDelta& delta) override;
  Result<std::vector<memory::Lesson>> lessons(const memory::LessonScope& filter) override;
  Result<std::vector<memory::RetrievedItem>> retrieve(const memory::RetrievalQuery& q) override;
  Status log_retrieval(const memory::RetrievalLogEntry& entry) override;
  Status credit(const std::string& prompt_id, double reward) override;
  Result<std::vector<memory::CaseRecord>> cases(const memory::CaseFilter& filter) override;
  Status verify_case(int64_t id, bool confirmed, const std::string& note) override;

  // Test access.
  std::vector<memory::CaseRecord> all_cases() const;
  std::vector<memory::LessonDelta> deltas() const;
  std::vector<memory::RetrievalLogEntry> retrieval_log() const;
  std::map<std::string, double> credited() const;  // prompt id -> reward
  double case_value(int64_t id) const;
  int record_calls() const;
  std::map<int64_t, std::string> review_notes() const;  // case id -> verify_case's note

 private:
  mutable std::mutex m_mutex;
  std::vector<memory::CaseRecord> m_cases;  // id = index + 1
  std::map<std::string, int64_t> m_by_key;
  std::vector<memory::Lesson> m_lessons;
  std::vector<memory::LessonDelta> m_deltas;
  std::vector<memory::RetrievalLogEntry> m_log;
  std::map<std::string, double> m_credited;
  std::map<int64_t, double> m_case_values;
  std::map<int64_t, std::string> m_review_notes;
  int m_record_calls = 0;

  Result<memory::CaseAssessment> assess_locked(const memory::CaseRecord& c) const;
};

class ScriptedLlm : public llm::LlmClient {
 public:
  using Handler = std::function<llm::LlmResult<llm::ChatResponse>(const std::vector<llm::Message>&, const llm::ChatParams&)>;
  struct Call {
    std::vector<llm::Message> messages;
    llm::ChatParams params;
  };
  ScriptedLlm(llm::Profile profile, Handler handler) : m_profile(std::move(profile)), m_handler(std::move(handler)) {}

  llm::LlmResult<llm::ChatResponse> chat(const std::vector<llm::Message>& messages, const llm::ChatParams& params) override;
  const llm::Profile& profile() const override { return m_profile; }
  std::vector<Call> calls() const;

 private:
  llm::Profile m_profile;
  Handler m_handler;
  mutable std::mutex m_mutex;
  std::vector<Call> m_calls;
};

// A ChatResponse with `text`, usage estimated as bytes/4 of the prompt and of the answer.
llm::ChatResponse fake_response(const std::vector<llm::Message>& messages, std::string text);

}  // namespace kope::fakes
