// run/events.h — the run's event log: one JSON object per line, appended durably.
//
// Every step that a resumed run must not redo is logged here before the next step starts
// (answers, attempts, memory writes, reflections, finished ops), each line fsynced. A run killed
// at any point (SIGKILL included) leaves at worst one torn last line, which read_events()
// ignores. The log is the source of truth for resume; memory writes are replayed from it
// idempotently (natural keys). EventLog is thread-safe; every event gets a sequence number.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kope/error.h"
#include "kope/memory.h"
#include "kope/verdict.h"
#include "run/attempt.h"

namespace kope::run {

class EventLog {
 public:
  // Opens (creating when missing) the log at `path`; the next sequence number follows the
  // events already there.
  static Result<std::unique_ptr<EventLog>> open(const std::filesystem::path& path);

  // Appends `event` with "seq" and "time" (ISO 8601 UTC) added; fsyncs before returning.
  Status append(nlohmann::json event);
  const std::filesystem::path& path() const { return m_path; }

 private:
  EventLog() = default;
  std::filesystem::path m_path;
  std::mutex m_mutex;
  int64_t m_next_seq = 1;
};

// Reads every complete event. A malformed last line (a torn write) is skipped; a malformed line
// before the end fails with corrupt naming the file and line.
Result<std::vector<nlohmann::json>> read_events(const std::filesystem::path& path);

// The "answer" event: a model answer kept (its text in `answer_file`) before it is parsed and
// evaluated, so that a resumed run does not ask the model again. Its JSON form carries
// "type": "answer"; the loop adds "op", the log "seq" and "time".
struct AnswerEvent {
  int iteration = 0;
  memory::Stage stage = memory::Stage::draft;
  std::optional<int> parent_iteration;
  std::string prompt_id;
  std::map<std::string, int64_t> tier_tokens;  // system, hot, warm, cold
  int64_t prompt_tokens_estimated = 0;
  int64_t knowledge_budget = 0;
  std::vector<std::pair<std::string, double>> memory_items;  // admitted memory items and scores
  std::vector<Admission> admission;  // why each knowledge item was admitted
  int64_t tokens_prompt = 0;
  int64_t tokens_completion = 0;
  bool usage_estimated = false;
  double cost_usd = 0;
  // Prompt caching, as run::Attempt has them (all optional on read).
  int64_t tokens_cached = 0;
  int64_t tokens_cache_write = 0;
  bool tokens_cached_estimated = false;
  int64_t prefix_tokens = 0;
  std::string prefix_hash;
  std::optional<double> cached_price_ratio;
  double llm_seconds = 0;
  std::string finish_reason = "stop";
  std::string provider_problem;  // why there is no text ("" when the provider answered)
  std::string answer_file;       // relative to the run directory
};

// kope's estimate of the cached prompt tokens of a call whose provider reported no usage
// (AnswerEvent::tokens_cached_estimated): a provider would have served the call's cacheable
// prefix from its cache when the op's previous call (the latest of `earlier` with a
// prefix_hash) had the same prefix. `prefix_tokens` capped at `tokens_prompt` then, else 0 (also
// for an empty hash).
int64_t estimate_cached_tokens(const std::vector<Attempt>& earlier, const std::string& prefix_hash,
                               int64_t prefix_tokens, int64_t tokens_prompt);

nlohmann::json to_json(const AnswerEvent& e);
// Fails with corrupt naming the missing or malformed field.
Result<AnswerEvent> answer_from_json(const nlohmann::json& j);

// The "reverified" event: a quarantined win of this run evaluated again at the end of its op,
// on fresh inputs and in a separate evaluation (agent/reverify.h), and what came of it. Logged
// before the memory learns the outcome (Store::verify_case, repeated on resume when the case is
// still quarantined there). Its JSON form carries "type": "reverified"; the loop adds "op".
struct ReverifiedEvent {
  int iteration = 0;
  int64_t case_id = 0;
  bool confirmed = false;
  std::string quarantine_reason;  // why the memory had quarantined it
  std::string reason;             // why the re-check confirmed or refuted it (the memory's note)
  uint64_t seed = 0;              // the fresh inputs' seed
  eval::Verdict verdict = eval::Verdict::correct;  // on the fresh inputs
  std::optional<double> speedup_vs_reference;  // re-timed
  std::optional<double> speed_kept;  // re-timed speed over the recorded one (1 = it held exactly)
  bool promoted = false;          // confirmed and faster than the incumbent: the op's new best
};

nlohmann::json to_json(const ReverifiedEvent& e);
// Fails with corrupt naming the missing or malformed field.
Result<ReverifiedEvent> reverified_from_json(const nlohmann::json& j);

}  // namespace kope::run
