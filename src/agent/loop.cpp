#include "agent/loop.h"

#include <cctype>
#include <chrono>
#include <cmath>
#include <memory>

#include "agent/judge.h"
#include "agent/llm_policy.h"
#include "agent/op_context.h"
#include "agent/plan.h"
#include "agent/recorder.h"
#include "agent/reflector.h"
#include "agent/replay_policy.h"
#include "util/strings.h"

namespace kope::agent {

using nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

// The op's best speed over the reference so far, as the progress lines show it (0: none yet).
double best_speedup(const OpState& st) {
  const Attempt* inc = st.incumbent();
  return inc ? inc->speedup_vs_reference.value_or(0) : 0;
}

// One op's loop (docs/design.md §1, the rules in loop.h): before each iteration the stopping
// rules and the plan (plan.h); then the policy proposes a candidate (policy.h), the judge
// evaluates and decides (judge.h), the recorder logs and records it (recorder.h), and the
// reflector may reflect on it (reflector.h).
class Loop {
 public:
  Loop(const OpEnvironment& env, const spec::OpSpec& op, OpState& state)
      : m_ctx(env, op, state), m_policy(make_policy(m_ctx)), m_judge(m_ctx), m_recorder(m_ctx), m_reflector(m_ctx) {}

  Result<OpEnd> run();

 private:
  Status start();
  Result<std::string> experience_of_op();
  // One iteration; false when the policy had no candidate (m_end, m_end_reason say why).
  Result<bool> step();
  Result<OpEnd> finish();

  OpContext m_ctx;
  std::unique_ptr<CandidatePolicy> m_policy;
  Judge m_judge;
  Recorder m_recorder;
  Reflector m_reflector;
  OpEnd m_end = OpEnd::finished;
  std::string m_end_reason;
  std::string m_end_detail;  // StopDecision::detail
};

Result<OpEnd> Loop::run() {
  KOPE_TRY(start());
  for (;;) {
    if (m_ctx.cancelled()) {
      m_end = OpEnd::cancelled;
      break;
    }
    if (auto stop = stop_decision(m_ctx.state, m_ctx.cfg)) {
      m_end_reason = stop->reason;
      m_end_detail = stop->detail;
      break;
    }
    KOPE_ASSIGN(bool went_on, step());
    if (!went_on) break;
  }
  return finish();
}

Result<bool> Loop::step() {
  const OpState& st = m_ctx.state;
  int k = static_cast<int>(st.attempts.size()) + 1;
  Plan plan = plan_next(st, m_ctx.cfg);
  auto t0 = Clock::now();
  // An answer logged by a process that died before its attempt: its model time was spent there.
  const bool resumed_answer = st.pending.has_value();
  KOPE_ASSIGN(Next next, m_policy->propose(k, plan));
  if (!next.proposal) {
    m_end = next.end;
    m_end_reason = next.stop_reason;
    return false;
  }
  Attempt& a = next.proposal->attempt;
  if (a.code) KOPE_TRY(m_judge.evaluate(a));
  KOPE_ASSIGN(AssessedCase assessed, m_judge.decide(a));
  a.journal = journal(a, st, m_ctx.op);
  // A resumed answer's model time was spent by the process that asked.
  a.wall_seconds = std::chrono::duration<double>(Clock::now() - t0).count() + a.llm_seconds * (resumed_answer ? 1 : 0);
  KOPE_TRY(m_recorder.add(std::move(a), std::move(assessed)));  // its attempt event settles the pending answer
  const Attempt& added = st.attempts.back();
  if (m_ctx.env.progress) {
    m_ctx.env.progress->attempt_done(m_ctx.op.name, added, best_speedup(st), st.tokens_prompt() + st.tokens_completion());
  }
  if (m_policy->reflects()) KOPE_TRY(m_reflector.after(added));
  return true;
}

// What memory holds about the op as it starts: "held-out" when the run excludes its earlier
// experience, else "seen" when memory holds a case of it (same name or spec hash) from another
// run, else "unseen".
Result<std::string> Loop::experience_of_op() {
  if (m_ctx.env.holdout.ops.contains(m_ctx.op.name)) return std::string("held-out");
  // Whether another run recorded a case `f` finds (false where the store cannot filter cases).
  auto earlier = [&](memory::CaseFilter f) -> Result<bool> {
    f.not_run_id = m_ctx.env.run_id;
    f.limit = 1;
    auto found = m_ctx.env.store->cases(f);
    if (!found && found.error().kind != ErrorKind::unavailable) return std::unexpected(std::move(found).error());
    return found && !found->empty();
  };
  memory::CaseFilter by_name;
  by_name.op = m_ctx.op.name;
  KOPE_ASSIGN(bool seen, earlier(by_name));
  if (!seen && !m_ctx.op.spec_hash.empty()) {
    memory::CaseFilter by_hash;
    by_hash.spec_hash = m_ctx.op.spec_hash;
    KOPE_ASSIGN(seen, earlier(by_hash));
  }
  return std::string(seen ? "seen" : "unseen");
}

// Logs the op's start once, then finishes what a killed run left half done: memory writes, then
// logged reflections, then the reflection the last attempt called for.
Status Loop::start() {
  const OpState& st = m_ctx.state;
  if (!st.started) {
    run::OpStartedEvent e;
    e.policy = run::policy_name(m_ctx.cfg.policy);
    e.mode = context::mode_name(m_ctx.cfg.mode);
    KOPE_ASSIGN(e.experience, experience_of_op());
    KOPE_TRY(m_ctx.emit(std::move(e)));
  }
  if (m_ctx.env.progress) {
    m_ctx.env.progress->op_started(m_ctx.op.name);
    if (!st.attempts.empty()) {
      // So that an op which ends without a new attempt says where it stands, not "0 attempts".
      m_ctx.env.progress->op_resumed(m_ctx.op.name, st.attempts.back().iteration, best_speedup(st),
                                     st.tokens_prompt() + st.tokens_completion());
    }
  }
  for (const auto& a : st.attempts) {
    if (!st.case_ids.contains(a.iteration)) KOPE_TRY(m_recorder.record(a));
  }
  KOPE_TRY(m_reflector.resume());
  if (!st.attempts.empty() && m_policy->reflects()) KOPE_TRY(m_reflector.after(st.attempts.back()));
  return {};
}

Result<OpEnd> Loop::finish() {
  const OpState& st = m_ctx.state;
  ProgressSink* progress = m_ctx.env.progress;
  if (m_end != OpEnd::finished) {
    std::string why = m_end == OpEnd::cancelled ? "cancelled" : "llm_unavailable";
    KOPE_TRY(m_ctx.emit(run::OpStoppedEvent{why, st.errors}));
    if (progress) progress->op_finished(m_ctx.op.name, why);
    return m_end;
  }
  // Quarantined wins are re-verified before the end reflection, which then sees the incumbent.
  const Attempt* before = st.incumbent();
  KOPE_TRY(m_judge.reverify_quarantined());
  if (const Attempt* promoted = st.incumbent(); progress && promoted && promoted != before) {
    progress->best_changed(m_ctx.op.name, best_speedup(st));
  }
  if (m_policy->reflects()) KOPE_TRY(m_reflector.at_end(m_end_reason, m_end_detail));
  const Attempt* inc = st.incumbent();
  run::OpDoneEvent done;
  done.stop_reason = m_end_reason;
  done.stop_rule = run::stop_rule_name(m_ctx.cfg.stop_rule);
  done.stop_detail = m_end_detail;
  done.attempts = static_cast<int64_t>(st.attempts.size());
  done.solved = inc != nullptr;
  if (inc) done.best_iteration = inc->iteration;
  KOPE_TRY(m_ctx.emit(std::move(done)));
  if (progress) progress->op_finished(m_ctx.op.name, m_end_reason);
  return OpEnd::finished;
}

}  // namespace

std::unique_ptr<CandidatePolicy> make_policy(OpContext& ctx) {
  if (ctx.cfg.policy == Policy::replay) return std::make_unique<ReplayPolicy>(ctx);
  return std::make_unique<LlmPolicy>(ctx);
}

Result<OpEnd> run_op(const OpEnvironment& env, const spec::OpSpec& op, OpState& state) {
  if (!env.evaluator || !env.store || !env.hw || !env.prompts || !env.estimator || !env.events || !env.config) {
    return fail(ErrorKind::internal, "run_op: incomplete environment");
  }
  if (env.config->policy == Policy::llm && !env.llm) return fail(ErrorKind::internal, "run_op: the llm policy needs a model client");
  if (state.done) return OpEnd::finished;
  Loop loop(env, op, state);
  return loop.run();
}

memory::TaskInfo task_info(const spec::OpSpec& op) {
  memory::TaskInfo t;
  t.op = op.name;
  t.spec_hash = op.spec_hash;
  t.category = op.category;
  t.level = op.level;
  t.signature = spec::render_signature(op);
  t.signature_shape = spec::signature_shape(op);
  json dims = json::array();
  const spec::Case* largest = nullptr;
  for (const auto* c : op.timed_cases()) {
    json d = json::object();
    for (size_t i = 0; i < op.dims.size(); ++i) d[op.dims[i]] = c->dims[i];
    dims.push_back(d);
    if (!largest || op.bytes_for(*c) > op.bytes_for(*largest)) largest = c;
  }
  t.timed_dims = dims.dump();
  if (largest) {
    double f = op.flops_for(*largest), b = op.bytes_for(*largest);
    t.arithmetic_intensity = b > 0 ? f / b : 0;
    t.log2_flops = f > 0 ? std::log2(f) : 0;
    t.log2_bytes = b > 0 ? std::log2(b) : 0;
  }
  return t;
}

std::string op_dir_name(std::string_view op) {
  std::string out;
  for (char c : op) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.') ? c : '_';
  return out.empty() ? "op" : out;
}

}  // namespace kope::agent
