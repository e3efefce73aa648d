#include "run/op_state.h"

#include <fmt/format.h>

namespace kope::run {

using nlohmann::json;

const Attempt* OpState::incumbent() const {
  if (promoted && *promoted >= 1 && *promoted <= static_cast<int>(attempts.size())) {
    return &attempts[static_cast<size_t>(*promoted - 1)];
  }
  for (auto it = attempts.rbegin(); it != attempts.rend(); ++it) {
    if (it->improved) return &*it;
  }
  return nullptr;
}

int64_t OpState::tokens_prompt() const {
  int64_t t = 0;
  for (const auto& a : attempts) t += a.tokens_prompt;
  for (const auto& [k, r] : reflections) t += r.tokens_prompt;
  if (pending) t += pending->tokens_prompt;
  return t;
}

int64_t OpState::tokens_completion() const {
  int64_t t = 0;
  for (const auto& a : attempts) t += a.tokens_completion;
  for (const auto& [k, r] : reflections) t += r.tokens_completion;
  if (pending) t += pending->tokens_completion;
  return t;
}

double OpState::cost_usd() const {
  double c = 0;
  for (const auto& a : attempts) c += a.cost_usd;
  for (const auto& [k, r] : reflections) c += r.cost_usd;
  return c;
}

double OpState::wall_seconds() const {
  double w = 0;
  for (const auto& a : attempts) w += a.wall_seconds;
  return w;
}

namespace {

// The event's change to the state, one overload per event type that changes it.
struct Applier {
  OpState& st;
  std::string_view op;

  Status operator()(const OpStartedEvent& e) const {
    st.started = true;
    st.experience = e.experience;
    return {};
  }
  Status operator()(const PromptEvent& e) const {
    if (e.reflect()) return {};
    for (const auto& id : e.admitted) {
      if (id.starts_with("note:")) st.notes_shown.insert(id);  // not offered again in this task
    }
    if (!st.op_pack && e.op_pack) st.op_pack = e.op_pack;
    if (e.evidence) st.evidence = e.evidence;
    return {};
  }
  Status operator()(const AnswerEvent& e) const {
    st.pending = e;
    return {};
  }
  Status operator()(const AttemptEvent& e) const {
    const Attempt& a = e.attempt;
    if (a.iteration != static_cast<int>(st.attempts.size()) + 1) {
      return fail(ErrorKind::corrupt, "event log: op {} attempt {} follows attempt {}", op, a.iteration, st.attempts.size());
    }
    if (st.pending && st.pending->iteration == a.iteration) st.pending.reset();
    st.attempts.push_back(a);
    return {};
  }
  Status operator()(const RecordedEvent& e) const {
    st.case_ids[e.iteration] = e.case_id;
    if (!e.error_signature.empty()) st.error_signatures[e.iteration] = e.error_signature;
    return {};
  }
  Status operator()(const ReflectionEvent& e) const {
    ReflectionRecord rec;
    rec.key = e.key;
    rec.deltas = e.deltas;
    rec.tokens_prompt = e.tokens_prompt;
    rec.tokens_completion = e.tokens_completion;
    rec.cost_usd = e.cost_usd;
    st.reflections[rec.key] = std::move(rec);
    return {};
  }
  Status operator()(const ReflectionAppliedEvent& e) const {
    auto it = st.reflections.find(e.key);
    if (it != st.reflections.end()) {
      it->second.applied = true;
      it->second.lesson_ids = e.lesson_ids;
    }
    return {};
  }
  Status operator()(const ReverifiedEvent& e) const {
    if (e.promoted) st.promoted = e.iteration;
    st.reverified[e.iteration] = e;
    return {};
  }
  Status operator()(const OpDoneEvent& e) const {
    st.done = true;
    st.stop_reason = e.stop_reason;
    return {};
  }
  Status operator()(const LlmErrorEvent& e) const {
    if (!e.stop_error.empty()) st.errors.push_back(e.stop_error);
    return {};
  }
  Status operator()(const OpStoppedEvent& e) const {
    st.errors = e.errors;
    return {};
  }
  // Every other event leaves the state as it is.
  template <typename Other>
  Status operator()(const Other&) const {
    return {};
  }
};

}  // namespace

Status apply(OpState& st, const Event& e, std::string_view op) { return std::visit(Applier{st, op}, e); }

Result<std::map<std::string, OpState>> restore_states(const std::vector<LoggedEvent>& events) {
  std::map<std::string, OpState> states;
  for (const auto& e : events) {
    if (e.op.empty()) continue;
    KOPE_TRY(apply(states[e.op], e.event, e.op));
  }
  return states;
}

Result<std::map<std::string, OpState>> restore_states(const std::vector<json>& events) {
  std::vector<LoggedEvent> typed;
  typed.reserve(events.size());
  for (const auto& e : events) {
    if (!e.contains("op") || !e["op"].is_string()) continue;  // the run's own events
    KOPE_ASSIGN(LoggedEvent logged, parse_event(e));
    typed.push_back(std::move(logged));
  }
  return restore_states(typed);
}

json state_json(const OpState& st) {
  json attempts = json::array();
  for (const auto& a : st.attempts) attempts.push_back(to_json(a));
  json case_ids = json::object();
  for (const auto& [k, id] : st.case_ids) case_ids[std::to_string(k)] = id;
  json error_signatures = json::object();
  for (const auto& [k, sig] : st.error_signatures) error_signatures[std::to_string(k)] = sig;
  json reflections = json::object();
  for (const auto& [key, r] : st.reflections) {
    json deltas = json::array();
    for (const auto& d : r.deltas) deltas.push_back(delta_to_json(d));
    reflections[key] = {{"key", r.key}, {"deltas", deltas}, {"applied", r.applied}, {"tokens_prompt", r.tokens_prompt},
                        {"tokens_completion", r.tokens_completion}, {"cost_usd", r.cost_usd}, {"lesson_ids", r.lesson_ids}};
  }
  json reverified = json::object();
  for (const auto& [k, r] : st.reverified) reverified[std::to_string(k)] = to_json(Event(r));
  return {{"attempts", attempts},
          {"case_ids", case_ids},
          {"error_signatures", error_signatures},
          {"pending", st.pending ? to_json(Event(*st.pending)) : json(nullptr)},
          {"reflections", reflections},
          {"started", st.started},
          {"done", st.done},
          {"stop_reason", st.stop_reason},
          {"errors", st.errors},
          {"notes_shown", st.notes_shown},
          {"evidence", st.evidence ? evidence_json(*st.evidence) : json(nullptr)},
          {"op_pack", st.op_pack ? op_pack_json(*st.op_pack) : json(nullptr)},
          {"experience", st.experience},
          {"reverified", reverified},
          {"promoted", st.promoted ? json(*st.promoted) : json(nullptr)}};
}

}  // namespace kope::run
