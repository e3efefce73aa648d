// run/op_state.h — what a run directory knows about one op, and its restore from the event log.
//
// OpState is everything the loop (agent/loop.h) and the reports (report/run_data.h) read about
// an op: its attempts, the memory case each was recorded as, a logged answer whose attempt was
// not yet logged, its reflections, whether it finished and why. Only apply() changes it: the
// loop applies each event as it logs it, and restore_states() folds the log through the same
// function, so a resumed run and a report see exactly what was logged. Plain values;
// thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
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

// Everything the loop knows about one op, rebuilt from the event log on resume.
struct OpState {
  std::vector<Attempt> attempts;
  std::map<int, int64_t> case_ids;          // iteration -> memory case id
  std::map<int, std::string> error_signatures;  // iteration -> memory's error signature (failed cases)
  std::optional<AnswerEvent> pending;       // a logged answer whose attempt is not logged yet
  std::map<std::string, ReflectionRecord> reflections;
  bool started = false;
  bool done = false;
  std::string stop_reason;
  std::vector<std::string> errors;          // llm failures that stopped the op, for the report
  std::set<std::string> notes_shown;        // general notes ("note:N") its prompts admitted so far
  std::optional<OpPackRecord> op_pack;      // fixed by its first prompt (none in mode none)
  // Memory's refinement evidence as the latest kernel prompt saw it (prompt events; none in mode
  // none and in runs written before prompts carried it).
  std::optional<RefineEvidence> evidence;
  // What memory held about the op when it started (op_started's "experience"): "held-out"
  // (the run excluded its earlier experience), "seen" (memory held earlier experience of it and
  // the run used it) or "unseen"; "" in a run written before the guard existed.
  std::string experience;
  // Quarantined wins re-verified at the end of the op ("reverified" events), by iteration.
  std::map<int, ReverifiedEvent> reverified;
  std::optional<int> promoted;              // the last re-verified win that became the incumbent

  // The evidence the evidence rule weighs: the latest prompt's, else the op pack's (older runs);
  // nullptr when memory has not spoken.
  const RefineEvidence* refine_evidence() const {
    if (evidence) return &*evidence;
    return op_pack && op_pack->evidence ? &*op_pack->evidence : nullptr;
  }

  // The promoted re-verified win when there is one (re-verification follows every attempt),
  // else the latest attempt with improved == true.
  const Attempt* incumbent() const;
  int64_t tokens_prompt() const;            // attempts + reflections (+ a pending answer)
  int64_t tokens_completion() const;
  double cost_usd() const;
  double wall_seconds() const;
};

// What `e` does to an op's state: the one function that changes an OpState. The loop logs an
// event, then applies it (OpContext::emit); a resumed run and a report fold the log through it
// (restore_states), so the live state and the rebuilt one cannot drift. Events that are not
// about an op's state leave it as it is. Fails with corrupt when an attempt does not follow
// the op's last one (`op` names the op in the message).
Status apply(OpState& st, const Event& e, std::string_view op = {});

// Rebuilds every op's state from a run's events (keyed by op name; events without an op are
// skipped). Fails with corrupt naming the event when one is malformed or the attempts are out
// of order.
Result<std::map<std::string, OpState>> restore_states(const std::vector<LoggedEvent>& events);
Result<std::map<std::string, OpState>> restore_states(const std::vector<nlohmann::json>& events);

// The state as JSON, every field (for comparing states in tests, and for debugging).
nlohmann::json state_json(const OpState& st);

}  // namespace kope::run
