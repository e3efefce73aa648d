// agent/loop.h — the per-operator loop (docs/design.md §1).
//
// For one operator, each iteration k: retrieve from memory for the current state → assemble
// the prompt under the token budget (Active Context Management) → call the model → parse the
// answer → evaluate → record the attempt in memory → credit the memory items the prompt used.
//
// Stages: `draft` while no correct kernel exists, `repair` after a failed attempt (at most
// `max_consecutive_repairs` in a row, then a fresh draft or a refinement of the incumbent),
// `refine` once there is an incumbent.
// Lineage: a repair began from the failed attempt, a refinement from the incumbent, a draft from
// nothing, a replayed kernel from the memory case it came from.
// Incumbent: replaced only by a candidate correct on every case and faster on the timed cases:
// the geometric mean over the timed cases of incumbent time / candidate time must exceed
// 1 + min_improvement (so timing noise alone does not churn it). With fast_verdict the
// evaluator times candidate and incumbent interleaved and its decision (the ratio's interval
// above 1 + min_improvement) is the rule; otherwise the candidate's times are compared with the
// incumbent's recorded ones. Disturbed evidence (eval::timing_disturbed on a timed case, or a
// disturbed comparison) never replaces the incumbent alone: the candidate is evaluated once
// more ("retime" event); if that is disturbed too, the measured speedup must also exceed
// (1 + min_improvement) / (1 − contention), a margin beyond what the waiting for a CPU could
// explain (contention of the comparison's pairs, or of both recorded timings without one,
// capped at 0.9; Attempt::margin_demanded). A side-by-side win whose only disturbance is waits
// without outside load beside the comparison (the kernels' own) raises no margin and is not
// re-timed; a re-time first waits for a quiet machine. eval::decide_replacement is the rule;
// Attempt::decided_by names the part that decided. The journal says which happened.
// r (speedup_vs_parent, which the outcome label is computed from, as the memory computes it):
// against the parent kernel when the parent is correct and timed, else against the reference;
// for a replay, the ratio of the speedups vs reference here and at the source case.
// Stopping (checked before each iteration): iterations, per-op tokens (prompt + completion,
// reflections included), per-op wall time, the incumbent reaching `roofline_target` of the
// roofline, the patience rule `stop_rule` selects (once there is an incumbent; plan.h), and for replay
// no candidates left or (unless replay_all) a replayed kernel correct here. An answer without
// usable code is recorded as verdict `compile_error` with message "no code in answer: <why>"
// and counts as an attempt; a refine answer of search/replace edits is applied to the
// incumbent's source (answer.h), and one that gives no candidate is verdict `bad_answer`.
// Reflection (unless switched off): after a fix that follows a failure, after an improvement of
// at least `notable_speedup` over the parent, after the second correct attempt in a row that did
// not replace the incumbent, and when the op ends; at most three lesson deltas.
// Rewards credited to the prompt's memory items (the memory's stage rewards): draft/repair 1 for
// a correct kernel, 0.25 for one that compiled and ran but failed (wrong_result, runtime_error,
// timeout, resource_limit), 0 otherwise (compile_error, no code, rejected, bad_answer); refine ln(r)
// clipped to [−1, 1], −1 when not correct.
//
// Where each part lives: the stopping rules and the plan in plan.h; the candidate's source in
// policy.h (LlmPolicy in llm_policy.h: retrieval.h for the memory, model_turn.h for the call,
// its backoff, context shrink and transcript; ReplayPolicy in replay_policy.h); evaluation and
// the incumbent rule, r and the label in judge.h; the journal, the event log and the memory
// case in recorder.h; the three reflections in reflector.h; what they share in op_context.h.
// The run directory's types (Attempt, OpState, the events, config.json, results.json) are
// src/run/'s.
//
// Crash safety: every step is logged (run/events.h) before the next begins; run_op() continues from
// an OpState rebuilt from the log without redoing a logged answer, attempt or reflection, and
// memory writes are repeated idempotently (natural key "<run id>/<op>/<iteration>").
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/prompt.h"
#include "context/context.h"
#include "kope/eval.h"
#include "kope/hw.h"
#include "kope/llm.h"
#include "kope/memory.h"
#include "kope/spec.h"
#include "run/attempt.h"
#include "run/config.h"
#include "run/events.h"
#include "run/op_state.h"

namespace kope::agent {

// The run directory's types (src/run/), which the loop reads, extends and logs.
using run::Attempt;
using run::attempt_from_json;
using run::EventLog;
using run::LoopConfig;
using run::OpState;
using run::Policy;
using run::ReflectionRecord;
using run::TimingSummary;
using run::delta_from_json;
using run::delta_to_json;
using run::k_no_code_message;
using run::read_events;
using run::relative_speed;
using run::restore_states;
using run::to_json;

// Live-progress hooks; every method may be called from several op threads at once.
class ProgressSink {
 public:
  virtual ~ProgressSink() = default;
  virtual void op_started(const std::string& op) { (void)op; }
  virtual void phase(const std::string& op, int iteration, memory::Stage stage, std::string_view what) {
    (void)op, (void)iteration, (void)stage, (void)what;
  }
  // After each attempt: the op's best speedup so far (0 when unsolved) and tokens used.
  virtual void attempt_done(const std::string& op, const Attempt& a, double best_speedup, int64_t tokens) {
    (void)op, (void)a, (void)best_speedup, (void)tokens;
  }
  // An op a resumed run restored with attempts an earlier process made: how far it got (the
  // last attempt's number), its best speedup (0 when unsolved) and its tokens, before any new attempt.
  virtual void op_resumed(const std::string& op, int attempts, double best_speedup, int64_t tokens) {
    (void)op, (void)attempts, (void)best_speedup, (void)tokens;
  }
  // The op's best speedup changed without a new attempt (a quarantined win confirmed by its
  // re-verification at the op's end became the incumbent).
  virtual void best_changed(const std::string& op, double best_speedup) { (void)op, (void)best_speedup; }
  virtual void op_finished(const std::string& op, const std::string& stop_reason) { (void)op, (void)stop_reason; }
  virtual void note(const std::string& op, std::string_view line) { (void)op, (void)line; }
};

// The shared services one op's loop uses. Everything pointed to outlives run_op().
struct OpEnvironment {
  eval::Evaluator* evaluator = nullptr;
  memory::Store* store = nullptr;
  llm::LlmClient* llm = nullptr;           // null with the replay policy
  const HardwareProfile* hw = nullptr;
  const HardwareGuide* guide = nullptr;    // toolchain and device facts for the hardware block; may be null
  const PromptLibrary* prompts = nullptr;
  SharedEstimator* estimator = nullptr;
  EventLog* events = nullptr;
  std::filesystem::path run_dir;
  std::string run_id;
  const LoopConfig* config = nullptr;
  const std::atomic<bool>* cancel = nullptr;  // the user's stop request (Ctrl-C); may be null
  const std::atomic<bool>* abort = nullptr;   // another op hit an error the run cannot go on from
  ProgressSink* progress = nullptr;        // may be null
  // Other ops the run knows (the suite and the selection): categories for tiering, and
  // identical kernel signatures for replay.
  std::vector<const spec::OpSpec*> known_ops;
  // The contamination guard (RunConfig::holdout): inactive unless the run holds its ops out.
  memory::Holdout holdout;
  // Called after each event of an op is logged and applied, with the op's state then (tests
  // compare it with the state the log rebuilds); may be empty. Called on the op's thread.
  std::function<void(const std::string& op, const OpState& state)> on_event;
};

enum class OpEnd { finished, cancelled, llm_unavailable };

// Runs (or continues) the loop for `op` until a stopping rule ends it, the run is cancelled, or
// the model stays unavailable. Fails only when kope itself cannot go on (the evaluator or the
// memory store failed, the event log cannot be written, the model refuses the credentials or
// the model name); failing kernels are attempts, never errors.
Result<OpEnd> run_op(const OpEnvironment& env, const spec::OpSpec& op, OpState& state);

// The TaskInfo memory records for an op.
memory::TaskInfo task_info(const spec::OpSpec& op);

// The reward credited for an attempt's outcome (see the header comment).
double reward_for(const Attempt& a);

// The file-name-safe form of an op name that names its folders in the run directory
// (candidates/<dir>/, transcripts/<dir>/).
std::string op_dir_name(std::string_view op);

// The stop rule "roofline": every timed case of the incumbent at `target` of its working-set
// roofline (an incumbent without per-case timings: its geomean fraction). A small case at its
// cache roof does not stop an operator whose large cases are far from theirs.
bool reached_roofline(const Attempt& incumbent, double target);

}  // namespace kope::agent
