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

Result<std::map<std::string, OpState>> restore_states(const std::vector<json>& events) {
  std::map<std::string, OpState> states;
  for (const auto& e : events) {
    if (!e.contains("op") || !e["op"].is_string()) continue;
    OpState& st = states[e["op"].get<std::string>()];
    std::string type = e.value("type", "");
    try {
      if (type == "op_started") {
        st.started = true;
        st.experience = e.value("experience", "");
      } else if (type == "prompt") {
        if (e.value("purpose", "") != "reflect") {
          for (const auto& id : e.value("admitted", std::vector<std::string>{})) {
            if (id.starts_with("note:")) st.notes_shown.insert(id);
          }
          if (!st.op_pack && e.contains("op_pack")) {
            KOPE_ASSIGN(st.op_pack, op_pack_from_json(e["op_pack"]));
          }
        }
      } else if (type == "answer") {
        KOPE_ASSIGN(st.pending, answer_from_json(e));
      } else if (type == "attempt") {
        KOPE_ASSIGN(Attempt a, attempt_from_json(e.at("attempt")));
        if (a.iteration != static_cast<int>(st.attempts.size()) + 1) {
          return fail(ErrorKind::corrupt, "event log: op {} attempt {} follows attempt {}", e["op"].get<std::string>(),
                      a.iteration, st.attempts.size());
        }
        if (st.pending && st.pending->iteration == a.iteration) st.pending.reset();
        st.attempts.push_back(std::move(a));
      } else if (type == "recorded") {
        st.case_ids[e.at("iteration").get<int>()] = e.at("case_id").get<int64_t>();
      } else if (type == "reflection") {
        ReflectionRecord rec;
        rec.key = e.at("key").get<std::string>();
        for (const auto& d : e.value("deltas", json::array())) {
          KOPE_ASSIGN(auto delta, delta_from_json(d));
          rec.deltas.push_back(std::move(delta));
        }
        rec.tokens_prompt = e.value("tokens_prompt", int64_t{0});
        rec.tokens_completion = e.value("tokens_completion", int64_t{0});
        rec.cost_usd = e.value("cost_usd", 0.0);
        st.reflections[rec.key] = std::move(rec);
      } else if (type == "reflection_applied") {
        auto it = st.reflections.find(e.at("key").get<std::string>());
        if (it != st.reflections.end()) {
          it->second.applied = true;
          it->second.lesson_ids = e.value("lesson_ids", std::vector<std::string>{});
        }
      } else if (type == "reverified") {
        KOPE_ASSIGN(ReverifiedEvent r, reverified_from_json(e));
        if (r.promoted) st.promoted = r.iteration;
        st.reverified[r.iteration] = std::move(r);
      } else if (type == "op_done") {
        st.done = true;
        st.stop_reason = e.value("stop_reason", "");
      } else if (type == "op_stopped") {
        st.errors = e.value("errors", std::vector<std::string>{});
      }
    } catch (const json::exception& ex) {
      return fail(ErrorKind::corrupt, "event log: malformed '{}' event (seq {}): {}", type, e.value("seq", int64_t{0}), ex.what());
    }
  }
  return states;
}

json op_pack_json(const OpPackRecord& pack) { return json{{"text", pack.text}, {"items", admission_json(pack.items)}}; }

Result<OpPackRecord> op_pack_from_json(const json& j) {
  if (!j.is_object() || !j.contains("text") || !j["text"].is_string()) {
    return fail(ErrorKind::corrupt, "event log: an op_pack without its text");
  }
  return OpPackRecord{j["text"].get<std::string>(), admission_from_json(j.value("items", json::array()))};
}

json delta_to_json(const memory::LessonDelta& d) {
  const memory::Lesson& l = d.lesson;
  return json{{"op", std::string(memory::delta_op_name(d.op))},
              {"lesson_id", d.lesson_id},
              {"kind", std::string(memory::lesson_kind_name(l.kind))},
              {"title", l.title},
              {"text", l.text},
              {"error_signature", l.error_signature},
              {"scope", {{"category", l.scope.category}, {"backend", l.scope.backend}, {"target", l.scope.target},
                         {"toolchain", l.scope.toolchain}}},
              {"source_cases", l.source_cases},
              {"merge_into", d.merge_into},
              {"reason", d.reason},
              {"source_case", d.source_case ? json(*d.source_case) : json(nullptr)}};
}

Result<memory::LessonDelta> delta_from_json(const json& j) {
  using Op = memory::LessonDelta::Op;
  memory::LessonDelta d;
  std::string op = j.value("op", "add");
  if (op == "add") d.op = Op::add;
  else if (op == "edit") d.op = Op::edit;
  else if (op == "upvote") d.op = Op::upvote;
  else if (op == "downvote") d.op = Op::downvote;
  else if (op == "deprecate") d.op = Op::deprecate;
  else if (op == "merge") d.op = Op::merge;
  else return fail(ErrorKind::corrupt, "unknown lesson delta op '{}'", op);
  d.lesson_id = j.value("lesson_id", "");
  std::string kind = j.value("kind", "strategy");
  d.lesson.kind = kind == "pitfall" ? memory::LessonKind::pitfall
                  : kind == "fix"   ? memory::LessonKind::fix
                  : kind == "recipe" ? memory::LessonKind::recipe
                                     : memory::LessonKind::strategy;
  d.lesson.title = j.value("title", "");
  d.lesson.text = j.value("text", "");
  d.lesson.error_signature = j.value("error_signature", "");
  if (j.contains("scope")) {
    const auto& s = j["scope"];
    d.lesson.scope = {s.value("category", ""), s.value("backend", ""), s.value("target", ""), s.value("toolchain", "")};
  }
  d.lesson.source_cases = j.value("source_cases", std::vector<int64_t>{});
  d.merge_into = j.value("merge_into", "");
  d.reason = j.value("reason", "");
  if (j.contains("source_case") && !j["source_case"].is_null()) d.source_case = j["source_case"].get<int64_t>();
  return d;
}

}  // namespace kope::run
