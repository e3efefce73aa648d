// run/events.h — the run's event log: one typed event per line, appended durably.
//
// Every step that a resumed run must not redo is logged here before the next step starts
// (answers, attempts, memory writes, reflections, finished ops), each line fsynced. A run killed
// at any point (SIGKILL included) leaves at worst one torn last line, which read_events()
// ignores. The log is the source of truth for resume; memory writes are replayed from it
// idempotently (natural keys). EventLog is thread-safe; every event gets a sequence number.
//
// Each event type is one struct below, and `Event` is their variant. Their JSON form is built
// and read here only, through one name table (event_types()): to_json(const Event&) and
// parse_event(). A line of a type this build does not know is kept whole as an UnknownEvent, so
// logs written by older and newer builds stay readable. What an event does to an op's state is
// run/op_state.h's apply(), the one function that changes an OpState.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "kope/error.h"
#include "kope/memory.h"
#include "kope/verdict.h"
#include "run/attempt.h"

namespace kope::run {

// The "answer" event: a model answer kept (its text in `answer_file`) before it is parsed and
// evaluated, so that a resumed run does not ask the model again. Its JSON form carries
// "type": "answer"; the loop adds "op", the log "seq" and "time".
// The prompt's facts and the call's usage are the parts the attempt takes over whole (their
// caching fields optional on read).
struct AnswerEvent : PromptFacts, ModelUsage {
  int iteration = 0;
  memory::Stage stage = memory::Stage::draft;
  std::optional<int> parent_iteration;
  bool usage_estimated = false;
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

// The op pack (agent/forms.h) an op's first prompt fixed: the text its per-op part shows in every
// prompt of the op, and its items' admission. Logged as the first prompt event's "op_pack".
// `evidence`: see RefineEvidence (run/attempt.h).
struct OpPackRecord {
  std::string text;
  std::vector<Admission> items;
  std::optional<RefineEvidence> evidence;
};
nlohmann::json op_pack_json(const OpPackRecord& pack);
// The evidence stop rule's facts ({"category", "refinements", "wins"}), as kernel prompts and
// the op pack log them.
nlohmann::json evidence_json(const RefineEvidence& ev);
// Lenient on the items (as admission_from_json); fails with corrupt without a text.
Result<OpPackRecord> op_pack_from_json(const nlohmann::json& j);

// Serialising lesson deltas for the event log ("reflection" events).
nlohmann::json delta_to_json(const memory::LessonDelta& d);
Result<memory::LessonDelta> delta_from_json(const nlohmann::json& j);

// "run_started", or "run_resumed" when `resumed`: a run (or the Slurm coordinator) began work.
// The fields left unset are absent from the line.
struct RunStartedEvent {
  bool resumed = false;
  std::string run_id;
  std::optional<int64_t> ops;    // the run's operators
  std::optional<int64_t> jobs;   // ops in flight at once (a run in this process)
  std::string executor;          // "" in this process, "slurm" for the coordinator
  std::optional<int64_t> tasks;  // the coordinator's task runs
};

// "run_finished" when `complete`, else "run_stopped".
struct RunEndedEvent {
  bool complete = false;
  bool cancelled = false;
  std::optional<int64_t> tasks;                    // a run of task runs
  std::optional<std::vector<std::string>> errors;  // a run in this process
};

// "op_error" (carries "op"): an op's loop failed with an error the run reports.
struct OpErrorEvent {
  std::string message;
};

// "slurm_submitted": the coordinator submitted a job array.
struct SlurmSubmittedEvent {
  std::string job_id;
  std::vector<int> indices;
};

// "slurm_task_ended": a task of the array ended without finishing its run.
struct SlurmTaskEndedEvent {
  int index = 0;
  std::string job_id;
  std::string state;
  std::string reason;
};

// "op_started": an op's loop began (logged once per op).
struct OpStartedEvent {
  std::string policy;
  std::string mode;
  // What memory held about the op: "held-out", "seen" or "unseen" (OpState::experience).
  std::string experience;
};

// "prompt": a prompt about to be sent. A kernel prompt (purpose: its stage's name) carries
// every field; a reflection prompt (purpose "reflect") its key, tiers, total and scale only.
// Runs from before the one estimator logged "tokens_per_byte" instead of "token_scale".
struct PromptEvent {
  std::string purpose;
  std::optional<int> iteration;      // a kernel prompt's
  std::string key;                   // a reflection prompt's ("k<iteration>" or "end")
  std::string mode;
  std::map<std::string, int64_t> tier_tokens;  // system, hot, warm, cold
  std::optional<int64_t> total_tokens;
  int64_t limit = 0;
  int64_t knowledge_budget = 0;
  std::vector<std::string> admitted;
  std::vector<Admission> admission;
  int dropped = 0;
  bool hot_truncated = false;
  std::optional<double> token_scale;
  std::optional<double> tokens_per_byte;  // older runs only (read, never written)
  int64_t prefix_tokens = 0;
  double shrink = 1;
  std::optional<OpPackRecord> op_pack;  // the op's first kernel prompt's
  // What memory held about refinements of the op's category on this machine when this kernel
  // prompt was assembled (modes with memory; absent in mode none and in older runs, which kept
  // only the op pack's): the evidence rule reads the latest (plan.h).
  std::optional<RefineEvidence> evidence;

  bool reflect() const { return purpose == "reflect"; }
};

// "llm_error": a model call failed (the loop then waits, shrinks, goes on or stops).
struct LlmErrorEvent {
  int iteration = 0;
  std::string cls;  // llm::failure_class_name
  std::string message;
  int http_status = 0;
  std::string stop_error;  // when the failure stops the op: why (one of OpState::errors); absent else
};

// "retime": evidence that would replace the incumbent was disturbed; evaluated once more.
struct RetimeEvent {
  int iteration = 0;
  double contention = 0;
  Decision decision = Decision::none;  // the comparison's decision, or recorded_timings
  std::string reason;
};

// "attempt": an iteration's record, logged before memory records it.
struct AttemptEvent {
  Attempt attempt;
};

// "recorded": memory recorded iteration `iteration` as case `case_id`.
struct RecordedEvent {
  int iteration = 0;
  int64_t case_id = 0;
  // The error signature memory computed for the case ("" for a correct one, and in runs written
  // before it was logged): the next repair's query and the reflection read it.
  std::string error_signature = {};
};

// "reflection": a reflection's lessons, logged before memory applies them.
struct ReflectionEvent {
  std::string key;  // "k<iteration>" or "end"
  std::string trigger;
  std::optional<int> attempt;  // the attempt it is about (absent in older runs)
  std::vector<memory::LessonDelta> deltas;
  std::vector<std::string> problems;
  bool parsed = false;
  int64_t tokens_prompt = 0;
  int64_t tokens_completion = 0;
  double cost_usd = 0;
};

// "reflection_failed": the reflection's model call failed (a reflection never stops the op).
struct ReflectionFailedEvent {
  std::string key;
  std::string cls;
  std::string message;
};

// "reflection_applied": memory applied the reflection `key`'s deltas.
struct ReflectionAppliedEvent {
  std::string key;
  std::vector<std::string> lesson_ids;
  std::vector<std::string> problems;
};

// "op_stopped": an op's loop stopped before its end (cancelled, or the model unavailable).
struct OpStoppedEvent {
  std::string reason;  // "cancelled" or "llm_unavailable"
  std::vector<std::string> errors;
};

// "op_done": an op finished.
struct OpDoneEvent {
  std::string stop_reason;
  std::string stop_rule;
  std::string stop_detail;
  int64_t attempts = 0;
  bool solved = false;
  std::optional<int> best_iteration;
};

// A line of a type this build does not know, kept whole.
struct UnknownEvent {
  nlohmann::json json;
};

using Event = std::variant<RunStartedEvent, RunEndedEvent, OpErrorEvent, SlurmSubmittedEvent, SlurmTaskEndedEvent,
                           OpStartedEvent, PromptEvent, AnswerEvent, LlmErrorEvent, RetimeEvent, AttemptEvent,
                           RecordedEvent, ReflectionEvent, ReflectionFailedEvent, ReflectionAppliedEvent,
                           ReverifiedEvent, OpStoppedEvent, OpDoneEvent, UnknownEvent>;

// One line of the log: its event, the op it belongs to ("" for the run's own events), its
// sequence number and time (as the log stamped them; 0 and "" for an event not yet logged).
struct LoggedEvent {
  Event event;
  std::string op;
  int64_t seq = 0;
  std::string time;
};

// The event's JSON line without "op", "seq" and "time" (an UnknownEvent's whole).
nlohmann::json to_json(const Event& e);
// The line's event, through the name table: a known type read by its reader (which fails with
// corrupt naming the type and seq on a malformed event), an unknown type kept whole.
Result<LoggedEvent> parse_event(const nlohmann::json& line);
// Every type name the table knows, in the table's order.
std::vector<std::string_view> event_types();

class EventLog {
 public:
  // Opens (creating when missing) the log at `path`; the next sequence number follows the
  // events already there.
  static Result<std::unique_ptr<EventLog>> open(const std::filesystem::path& path);

  // Appends `event` (with "op": `op` when not empty) with "seq" and "time" (ISO 8601 UTC)
  // added; fsyncs before returning. Fails with io when the line cannot be written.
  Status append(const Event& event, const std::string& op = {});
  // Appends a raw JSON line as it is (a type this build does not write; tests).
  Status append(nlohmann::json event);
  const std::filesystem::path& path() const { return m_path; }

 private:
  EventLog() = default;
  std::filesystem::path m_path;
  std::mutex m_mutex;
  int64_t m_next_seq = 1;
};

// Reads every complete line of the log as JSON. A malformed last line (a torn write) is skipped;
// a malformed line before the end fails with corrupt naming the file and line.
Result<std::vector<nlohmann::json>> read_events(const std::filesystem::path& path);
// The log's events, typed (parse_event over read_events' lines).
Result<std::vector<LoggedEvent>> read_log(const std::filesystem::path& path);
Result<std::vector<LoggedEvent>> parse_events(const std::vector<nlohmann::json>& lines);

}  // namespace kope::run
