// run/op_state.h — what a run directory knows about one op, and its restore from the event log.
//
// OpState is everything the loop (agent/loop.h) and the reports (report/run_data.h) read about
// an op: its attempts, the memory case each was recorded as, a logged answer whose attempt was
// not (the run died in between), its reflections, whether it finished and why. The loop keeps
// it current as it logs each step; restore_states() rebuilds it from the log alone, so a
// resumed run and a report see exactly what was logged. Plain values; thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kope/error.h"
#include "kope/memory.h"
#include "run/attempt.h"
#include "run/events.h"

namespace kope::run {

// A reflection's state in the log ("reflection", then "reflection_applied").
struct ReflectionRecord {
  std::string key;                 // "k<iteration>" or "end"
  std::vector<memory::LessonDelta> deltas;
  bool applied = false;
  int64_t tokens_prompt = 0;
  int64_t tokens_completion = 0;
  double cost_usd = 0;
  std::vector<std::string> lesson_ids;
};

// The op pack (agent/forms.h) an op's first prompt fixed: the text its per-op part shows in every
// prompt of the op, and its items' admission. Logged as the first prompt event's "op_pack".
struct OpPackRecord {
  std::string text;
  std::vector<Admission> items;
};
nlohmann::json op_pack_json(const OpPackRecord& pack);
// Lenient on the items (as admission_from_json); fails with corrupt without a text.
Result<OpPackRecord> op_pack_from_json(const nlohmann::json& j);

// Everything the loop knows about one op, rebuilt from the event log on resume.
struct OpState {
  std::vector<Attempt> attempts;
  std::map<int, int64_t> case_ids;          // iteration -> memory case id
  std::optional<AnswerEvent> pending;       // a logged answer whose attempt was not logged
  std::map<std::string, ReflectionRecord> reflections;
  bool started = false;
  bool done = false;
  std::string stop_reason;
  std::vector<std::string> errors;          // llm failures that stopped the op, for the report
  std::set<std::string> notes_shown;        // general notes ("note:N") its prompts admitted so far
  std::optional<OpPackRecord> op_pack;      // fixed by its first prompt (none in mode none)
  // What memory held about the op when it started (op_started's "experience"): "held-out"
  // (the run excluded its earlier experience), "seen" (memory held earlier experience of it and
  // the run used it) or "unseen"; "" in a run written before the guard existed.
  std::string experience;
  // Quarantined wins re-verified at the end of the op ("reverified" events), by iteration.
  std::map<int, ReverifiedEvent> reverified;
  std::optional<int> promoted;              // the last re-verified win that became the incumbent

  // The promoted re-verified win when there is one (re-verification follows every attempt),
  // else the latest attempt with improved == true.
  const Attempt* incumbent() const;
  int64_t tokens_prompt() const;            // attempts + reflections (+ a pending answer)
  int64_t tokens_completion() const;
  double cost_usd() const;
  double wall_seconds() const;
};

// Rebuilds every op's state from a run's events (keyed by op name). Fails with corrupt naming
// the event when one is malformed or the attempts are out of order.
Result<std::map<std::string, OpState>> restore_states(const std::vector<nlohmann::json>& events);

// Serialising lesson deltas for the event log ("reflection" events).
nlohmann::json delta_to_json(const memory::LessonDelta& d);
Result<memory::LessonDelta> delta_from_json(const nlohmann::json& j);

}  // namespace kope::run
