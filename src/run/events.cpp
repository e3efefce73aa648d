#include "run/events.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <functional>
#include <type_traits>

#include <fmt/format.h>

#include "util/fs.h"
#include "util/strings.h"
#include "util/time.h"

namespace kope::run {

using nlohmann::json;

Result<std::unique_ptr<EventLog>> EventLog::open(const std::filesystem::path& path) {
  std::unique_ptr<EventLog> log(new EventLog());
  log->m_path = path;
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) {
    KOPE_ASSIGN(auto events, read_events(path));
    for (const auto& e : events) log->m_next_seq = std::max<int64_t>(log->m_next_seq, e.value("seq", int64_t{0}) + 1);
    // A torn last line (a crash mid-append) would otherwise sit in the middle of the log once
    // new events follow it: rewrite the file with the complete events only.
    KOPE_ASSIGN(std::string text, util::read_file(path));
    std::string clean;
    for (const auto& e : events) clean += e.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    size_t complete_lines = 0;
    for (const auto& line : util::split(text, '\n')) complete_lines += util::trim(line).empty() ? 0 : 1;
    if (complete_lines != events.size() || (!text.empty() && text.back() != '\n')) {
      KOPE_TRY(util::write_file_atomic(path, clean));
    }
  }
  return log;
}

Status EventLog::append(const Event& event, const std::string& op) {
  json line = to_json(event);
  if (!op.empty()) line["op"] = op;
  return append(std::move(line));
}

Status EventLog::append(nlohmann::json event) {
  std::lock_guard lock(m_mutex);
  event["seq"] = m_next_seq;
  event["time"] = util::now_iso8601();
  KOPE_TRY(util::append_line_durable(m_path, event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
  ++m_next_seq;
  return {};
}

Result<std::vector<nlohmann::json>> read_events(const std::filesystem::path& path) {
  KOPE_ASSIGN(std::string text, util::read_file(path));
  std::vector<nlohmann::json> out;
  std::vector<std::string> lines = util::split(text, '\n');
  // Index of the last non-empty line: the only one allowed to be torn.
  size_t last = lines.size();
  for (size_t i = lines.size(); i-- > 0;) {
    if (!util::trim(lines[i]).empty()) {
      last = i;
      break;
    }
  }
  for (size_t i = 0; i < lines.size(); ++i) {
    if (util::trim(lines[i]).empty()) continue;
    auto j = nlohmann::json::parse(lines[i], nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      if (i == last) break;  // torn by a crash mid-append
      return fail(ErrorKind::corrupt, "{}:{}: malformed event line (the run directory is damaged)", path.string(), i + 1);
    }
    out.push_back(std::move(j));
  }
  return out;
}

Result<std::vector<LoggedEvent>> parse_events(const std::vector<json>& lines) {
  std::vector<LoggedEvent> out;
  out.reserve(lines.size());
  for (const auto& line : lines) {
    KOPE_ASSIGN(LoggedEvent e, parse_event(line));
    out.push_back(std::move(e));
  }
  return out;
}

Result<std::vector<LoggedEvent>> read_log(const std::filesystem::path& path) {
  KOPE_ASSIGN(auto lines, read_events(path));
  auto events = parse_events(lines);
  if (!events) return std::unexpected(std::move(events.error()).with_context(path.string() + ": "));
  return events;
}

int64_t estimate_cached_tokens(const std::vector<Attempt>& earlier, const std::string& prefix_hash,
                               int64_t prefix_tokens, int64_t tokens_prompt) {
  if (prefix_hash.empty()) return 0;
  for (auto a = earlier.rbegin(); a != earlier.rend(); ++a) {
    if (a->prefix_hash.empty()) continue;  // no model call (replay) or an older record
    return a->prefix_hash == prefix_hash ? std::clamp<int64_t>(prefix_tokens, 0, tokens_prompt) : 0;
  }
  return 0;
}

json to_json(const AnswerEvent& e) {
  json items = json::array();
  for (const auto& [id, score] : e.memory_items) items.push_back(json::array({id, score}));
  return json{{"type", "answer"},
              {"iteration", e.iteration},
              {"stage", std::string(memory::stage_name(e.stage))},
              {"parent_iteration", e.parent_iteration ? json(*e.parent_iteration) : json(nullptr)},
              {"prompt_id", e.prompt_id},
              {"tier_tokens", e.tier_tokens},
              {"prompt_tokens_estimated", e.prompt_tokens_estimated},
              {"knowledge_budget", e.knowledge_budget},
              {"memory_items", items},
              {"admission", admission_json(e.admission)},
              {"tokens_prompt", e.tokens_prompt},
              {"tokens_completion", e.tokens_completion},
              {"usage_estimated", e.usage_estimated},
              {"cost_usd", e.cost_usd},
              {"tokens_cached", e.tokens_cached},
              {"tokens_cache_write", e.tokens_cache_write},
              {"tokens_cached_estimated", e.tokens_cached_estimated},
              {"prefix_tokens", e.prefix_tokens},
              {"prefix_hash", e.prefix_hash},
              {"cached_price_ratio", e.cached_price_ratio ? json(*e.cached_price_ratio) : json(nullptr)},
              {"llm_seconds", e.llm_seconds},
              {"finish_reason", e.finish_reason},
              {"provider_problem", e.provider_problem},
              {"answer_file", e.answer_file}};
}

Result<AnswerEvent> answer_from_json(const json& j) {
  try {
    AnswerEvent e;
    e.iteration = j.at("iteration").get<int>();
    e.stage = memory::parse_stage(j.value("stage", "draft")).value_or(memory::Stage::draft);
    if (!j.at("parent_iteration").is_null()) e.parent_iteration = j.at("parent_iteration").get<int>();
    e.prompt_id = j.value("prompt_id", "");
    e.tier_tokens = j.value("tier_tokens", std::map<std::string, int64_t>{});
    e.prompt_tokens_estimated = j.value("prompt_tokens_estimated", int64_t{0});
    e.knowledge_budget = j.value("knowledge_budget", int64_t{0});
    for (const auto& it : j.value("memory_items", json::array())) {
      e.memory_items.emplace_back(it.at(0).get<std::string>(), it.at(1).get<double>());
    }
    e.admission = admission_from_json(j.value("admission", json::array()));
    e.tokens_prompt = j.value("tokens_prompt", int64_t{0});
    e.tokens_completion = j.value("tokens_completion", int64_t{0});
    e.usage_estimated = j.value("usage_estimated", false);
    e.cost_usd = j.value("cost_usd", 0.0);
    e.tokens_cached = j.value("tokens_cached", int64_t{0});
    e.tokens_cache_write = j.value("tokens_cache_write", int64_t{0});
    e.tokens_cached_estimated = j.value("tokens_cached_estimated", false);
    e.prefix_tokens = j.value("prefix_tokens", int64_t{0});
    e.prefix_hash = j.value("prefix_hash", "");
    if (auto r = j.find("cached_price_ratio"); r != j.end() && r->is_number()) e.cached_price_ratio = r->get<double>();
    e.llm_seconds = j.value("llm_seconds", 0.0);
    e.finish_reason = j.value("finish_reason", "");
    e.provider_problem = j.value("provider_problem", "");
    e.answer_file = j.at("answer_file").get<std::string>();
    return e;
  } catch (const json::exception& ex) {
    return fail(ErrorKind::corrupt, "malformed answer event: {}", ex.what());
  }
}

json to_json(const ReverifiedEvent& e) {
  auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  return json{{"type", "reverified"},
              {"iteration", e.iteration},
              {"case_id", e.case_id},
              {"confirmed", e.confirmed},
              {"quarantine_reason", e.quarantine_reason},
              {"reason", e.reason},
              {"seed", e.seed},
              {"verdict", std::string(eval::verdict_name(e.verdict))},
              {"speedup_vs_reference", opt(e.speedup_vs_reference)},
              {"speed_kept", opt(e.speed_kept)},
              {"promoted", e.promoted}};
}

Result<ReverifiedEvent> reverified_from_json(const json& j) {
  auto opt = [&](const char* key) {
    return j.contains(key) && j[key].is_number() ? std::optional<double>(j[key].get<double>()) : std::nullopt;
  };
  try {
    ReverifiedEvent e;
    e.iteration = j.at("iteration").get<int>();
    e.case_id = j.at("case_id").get<int64_t>();
    e.confirmed = j.at("confirmed").get<bool>();
    e.quarantine_reason = j.value("quarantine_reason", "");
    e.reason = j.value("reason", "");
    e.seed = j.value("seed", uint64_t{0});
    std::string verdict = j.value("verdict", "correct");
    auto v = eval::parse_verdict(verdict);
    if (!v) return fail(ErrorKind::corrupt, "reverified event: unknown verdict '{}' (expected one of {})", verdict, eval::verdict_names());
    e.verdict = *v;
    e.speedup_vs_reference = opt("speedup_vs_reference");
    e.speed_kept = opt("speed_kept");
    e.promoted = j.value("promoted", false);
    return e;
  } catch (const json::exception& ex) {
    return fail(ErrorKind::corrupt, "malformed reverified event: {}", ex.what());
  }
}

json evidence_json(const RefineEvidence& ev) {
  return json{{"category", ev.category}, {"refinements", ev.refinements}, {"wins", ev.wins}};
}

namespace {

Result<RefineEvidence> evidence_from_json(const json& e, std::string_view where) {
  try {
    return RefineEvidence{e.value("category", ""), e.at("refinements").get<int>(), e.at("wins").get<int>()};
  } catch (const json::exception& ex) {
    return fail(ErrorKind::corrupt, "event log: a malformed {} evidence: {}", where, ex.what());
  }
}

}  // namespace

json op_pack_json(const OpPackRecord& pack) {
  json j{{"text", pack.text}, {"items", admission_json(pack.items)}};
  if (pack.evidence) j["evidence"] = evidence_json(*pack.evidence);
  return j;
}

Result<OpPackRecord> op_pack_from_json(const json& j) {
  if (!j.is_object() || !j.contains("text") || !j["text"].is_string()) {
    return fail(ErrorKind::corrupt, "event log: an op_pack without its text");
  }
  OpPackRecord pack{j["text"].get<std::string>(), admission_from_json(j.value("items", json::array())), std::nullopt};
  if (auto e = j.find("evidence"); e != j.end() && e->is_object()) {
    KOPE_ASSIGN(pack.evidence, evidence_from_json(*e, "op_pack"));
  }
  return pack;
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


namespace {

// `key`'s value, `def` when missing or null; a value of another type throws json's type_error
// (the readers' callers turn it into corrupt).
template <typename T>
T get(const json& j, const char* key, T def) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? def : it->get<T>();
}

template <typename T>
std::optional<T> get_opt(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  return it->get<T>();
}

template <typename T>
json opt_json(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

json event_json(const RunStartedEvent& e) {
  json j{{"type", e.resumed ? "run_resumed" : "run_started"}, {"run_id", e.run_id}};
  if (e.ops) j["ops"] = *e.ops;
  if (e.jobs) j["jobs"] = *e.jobs;
  if (!e.executor.empty()) j["executor"] = e.executor;
  if (e.tasks) j["tasks"] = *e.tasks;
  return j;
}

json event_json(const RunEndedEvent& e) {
  json j{{"type", e.complete ? "run_finished" : "run_stopped"}, {"complete", e.complete}, {"cancelled", e.cancelled}};
  if (e.tasks) j["tasks"] = *e.tasks;
  if (e.errors) j["errors"] = *e.errors;
  return j;
}

json event_json(const OpErrorEvent& e) { return {{"type", "op_error"}, {"message", e.message}}; }

json event_json(const SlurmSubmittedEvent& e) {
  return {{"type", "slurm_submitted"}, {"job_id", e.job_id}, {"indices", e.indices}};
}

json event_json(const SlurmTaskEndedEvent& e) {
  return {{"type", "slurm_task_ended"}, {"index", e.index}, {"job_id", e.job_id}, {"state", e.state}, {"reason", e.reason}};
}

json event_json(const OpStartedEvent& e) {
  return {{"type", "op_started"}, {"policy", e.policy}, {"mode", e.mode}, {"experience", e.experience}};
}

json event_json(const PromptEvent& e) {
  if (e.reflect()) {
    return {{"type", "prompt"}, {"purpose", e.purpose}, {"key", e.key}, {"total_tokens", e.total_tokens.value_or(0)},
            {"token_scale", e.token_scale.value_or(0)}, {"tier_tokens", e.tier_tokens}};
  }
  json j{{"type", "prompt"},
         {"iteration", e.iteration.value_or(0)},
         {"purpose", e.purpose},
         {"mode", e.mode},
         {"tier_tokens", e.tier_tokens},
         {"total_tokens", e.total_tokens.value_or(0)},
         {"limit", e.limit},
         {"knowledge_budget", e.knowledge_budget},
         {"admitted", e.admitted},
         {"admission", admission_json(e.admission)},
         {"dropped", e.dropped},
         {"hot_truncated", e.hot_truncated},
         {"token_scale", e.token_scale.value_or(0)},
         {"prefix_tokens", e.prefix_tokens},
         {"shrink", e.shrink}};
  if (e.op_pack) j["op_pack"] = op_pack_json(*e.op_pack);
  if (e.evidence) j["evidence"] = evidence_json(*e.evidence);
  return j;
}

json event_json(const AnswerEvent& e) { return to_json(e); }

json event_json(const LlmErrorEvent& e) {
  json j{{"type", "llm_error"}, {"iteration", e.iteration}, {"class", e.cls}, {"message", e.message},
         {"http_status", e.http_status}};
  if (!e.stop_error.empty()) j["stop_error"] = e.stop_error;
  return j;
}

json event_json(const RetimeEvent& e) {
  return {{"type", "retime"}, {"iteration", e.iteration}, {"contention", e.contention}, {"decision", std::string(decision_name(e.decision))},
          {"reason", e.reason}};
}

json event_json(const AttemptEvent& e) { return {{"type", "attempt"}, {"attempt", to_json(e.attempt)}}; }

json event_json(const RecordedEvent& e) {
  json j = {{"type", "recorded"}, {"iteration", e.iteration}, {"case_id", e.case_id}};
  if (!e.error_signature.empty()) j["error_signature"] = e.error_signature;
  return j;
}

json event_json(const ReflectionEvent& e) {
  json deltas = json::array();
  for (const auto& d : e.deltas) deltas.push_back(delta_to_json(d));
  return {{"type", "reflection"},
          {"key", e.key},
          {"trigger", e.trigger},
          {"attempt", opt_json(e.attempt)},
          {"deltas", deltas},
          {"problems", e.problems},
          {"parsed", e.parsed},
          {"tokens_prompt", e.tokens_prompt},
          {"tokens_completion", e.tokens_completion},
          {"cost_usd", e.cost_usd}};
}

json event_json(const ReflectionFailedEvent& e) {
  return {{"type", "reflection_failed"}, {"key", e.key}, {"class", e.cls}, {"message", e.message}};
}

json event_json(const ReflectionAppliedEvent& e) {
  return {{"type", "reflection_applied"}, {"key", e.key}, {"lesson_ids", e.lesson_ids}, {"problems", e.problems}};
}

json event_json(const ReverifiedEvent& e) { return to_json(e); }

json event_json(const OpStoppedEvent& e) { return {{"type", "op_stopped"}, {"reason", e.reason}, {"errors", e.errors}}; }

json event_json(const OpDoneEvent& e) {
  return {{"type", "op_done"},
          {"stop_reason", e.stop_reason},
          {"stop_rule", e.stop_rule},
          {"stop_detail", e.stop_detail},
          {"attempts", e.attempts},
          {"solved", e.solved},
          {"best_iteration", opt_json(e.best_iteration)}};
}

json event_json(const UnknownEvent& e) { return e.json; }

// The readers: lenient on fields older runs lack, strict (json's exceptions) on what the state
// needs.
Result<Event> read_run_started(const json& j) {
  RunStartedEvent e;
  e.resumed = j.at("type").get<std::string>() == "run_resumed";
  e.run_id = get<std::string>(j, "run_id", "");
  e.ops = get_opt<int64_t>(j, "ops");
  e.jobs = get_opt<int64_t>(j, "jobs");
  e.executor = get<std::string>(j, "executor", "");
  e.tasks = get_opt<int64_t>(j, "tasks");
  return e;
}

Result<Event> read_run_ended(const json& j) {
  RunEndedEvent e;
  e.complete = get(j, "complete", j.at("type").get<std::string>() == "run_finished");
  e.cancelled = get(j, "cancelled", false);
  e.tasks = get_opt<int64_t>(j, "tasks");
  e.errors = get_opt<std::vector<std::string>>(j, "errors");
  return e;
}

Result<Event> read_op_error(const json& j) { return OpErrorEvent{get<std::string>(j, "message", "")}; }

Result<Event> read_slurm_submitted(const json& j) {
  return SlurmSubmittedEvent{get<std::string>(j, "job_id", ""), get(j, "indices", std::vector<int>{})};
}

Result<Event> read_slurm_task_ended(const json& j) {
  return SlurmTaskEndedEvent{get(j, "index", 0), get<std::string>(j, "job_id", ""), get<std::string>(j, "state", ""),
                             get<std::string>(j, "reason", "")};
}

Result<Event> read_op_started(const json& j) {
  return OpStartedEvent{get<std::string>(j, "policy", ""), get<std::string>(j, "mode", ""),
                        get<std::string>(j, "experience", "")};
}

Result<Event> read_prompt(const json& j) {
  PromptEvent e;
  e.purpose = get<std::string>(j, "purpose", "");
  e.iteration = get_opt<int>(j, "iteration");
  e.key = get<std::string>(j, "key", "");
  e.mode = get<std::string>(j, "mode", "");
  // Tiers as the checker reads them: an entry that is not an integer counts as 0.
  if (auto t = j.find("tier_tokens"); t != j.end() && t->is_object()) {
    for (const auto& [name, v] : t->items()) e.tier_tokens[name] = v.is_number_integer() ? v.get<int64_t>() : 0;
  }
  if (auto t = j.find("total_tokens"); t != j.end() && t->is_number()) e.total_tokens = t->get<int64_t>();
  e.limit = get(j, "limit", int64_t{0});
  e.knowledge_budget = get(j, "knowledge_budget", int64_t{0});
  e.admitted = get(j, "admitted", std::vector<std::string>{});
  e.admission = admission_from_json(j.value("admission", json::array()));
  e.dropped = get(j, "dropped", 0);
  e.hot_truncated = get(j, "hot_truncated", false);
  if (auto t = j.find("token_scale"); t != j.end() && t->is_number()) e.token_scale = t->get<double>();
  if (auto t = j.find("tokens_per_byte"); t != j.end() && t->is_number()) e.tokens_per_byte = t->get<double>();
  e.prefix_tokens = get(j, "prefix_tokens", int64_t{0});
  e.shrink = get(j, "shrink", 1.0);
  if (!e.reflect() && j.contains("op_pack")) {
    KOPE_ASSIGN(e.op_pack, op_pack_from_json(j["op_pack"]));
  }
  if (auto ev = j.find("evidence"); !e.reflect() && ev != j.end() && ev->is_object()) {
    KOPE_ASSIGN(e.evidence, evidence_from_json(*ev, "prompt"));
  }
  return e;
}

Result<Event> read_answer(const json& j) {
  KOPE_ASSIGN(AnswerEvent e, answer_from_json(j));
  return e;
}

Result<Event> read_llm_error(const json& j) {
  return LlmErrorEvent{get(j, "iteration", 0), get<std::string>(j, "class", ""), get<std::string>(j, "message", ""),
                       get(j, "http_status", 0), get<std::string>(j, "stop_error", "")};
}

Result<Event> read_retime(const json& j) {
  const auto name = get<std::string>(j, "decision", "");
  auto decision = parse_decision(name);
  if (!decision) return fail(ErrorKind::corrupt, "retime event: unknown incumbent decision '{}'", name);
  return RetimeEvent{get(j, "iteration", 0), get(j, "contention", 0.0), *decision, get<std::string>(j, "reason", "")};
}

Result<Event> read_attempt(const json& j) {
  KOPE_ASSIGN(Attempt a, attempt_from_json(j.at("attempt")));
  return AttemptEvent{std::move(a)};
}

Result<Event> read_recorded(const json& j) {
  return RecordedEvent{j.at("iteration").get<int>(), j.at("case_id").get<int64_t>(), j.value("error_signature", "")};
}

Result<Event> read_reflection(const json& j) {
  ReflectionEvent e;
  e.key = j.at("key").get<std::string>();
  e.trigger = get<std::string>(j, "trigger", "");
  if (auto a = j.find("attempt"); a != j.end() && a->is_number_integer()) e.attempt = a->get<int>();
  for (const auto& d : j.value("deltas", json::array())) {
    KOPE_ASSIGN(auto delta, delta_from_json(d));
    e.deltas.push_back(std::move(delta));
  }
  e.problems = get(j, "problems", std::vector<std::string>{});
  e.parsed = get(j, "parsed", false);
  e.tokens_prompt = get(j, "tokens_prompt", int64_t{0});
  e.tokens_completion = get(j, "tokens_completion", int64_t{0});
  e.cost_usd = get(j, "cost_usd", 0.0);
  return e;
}

Result<Event> read_reflection_failed(const json& j) {
  return ReflectionFailedEvent{get<std::string>(j, "key", ""), get<std::string>(j, "class", ""),
                               get<std::string>(j, "message", "")};
}

Result<Event> read_reflection_applied(const json& j) {
  return ReflectionAppliedEvent{j.at("key").get<std::string>(), get(j, "lesson_ids", std::vector<std::string>{}),
                                get(j, "problems", std::vector<std::string>{})};
}

Result<Event> read_reverified(const json& j) {
  KOPE_ASSIGN(ReverifiedEvent e, reverified_from_json(j));
  return e;
}

Result<Event> read_op_stopped(const json& j) {
  return OpStoppedEvent{get<std::string>(j, "reason", ""), get(j, "errors", std::vector<std::string>{})};
}

Result<Event> read_op_done(const json& j) {
  OpDoneEvent e;
  e.stop_reason = get<std::string>(j, "stop_reason", "");
  e.stop_rule = get<std::string>(j, "stop_rule", "");
  e.stop_detail = get<std::string>(j, "stop_detail", "");
  e.attempts = get(j, "attempts", int64_t{0});
  e.solved = get(j, "solved", false);
  e.best_iteration = get_opt<int>(j, "best_iteration");
  return e;
}

// The name table: every type name the log holds and its reader (a type's writer, event_json,
// writes the same name).
struct EventType {
  std::string_view name;
  Result<Event> (*read)(const json&);
};

constexpr EventType k_event_types[] = {
    {"run_started", read_run_started},
    {"run_resumed", read_run_started},
    {"run_finished", read_run_ended},
    {"run_stopped", read_run_ended},
    {"op_error", read_op_error},
    {"slurm_submitted", read_slurm_submitted},
    {"slurm_task_ended", read_slurm_task_ended},
    {"op_started", read_op_started},
    {"prompt", read_prompt},
    {"answer", read_answer},
    {"llm_error", read_llm_error},
    {"retime", read_retime},
    {"attempt", read_attempt},
    {"recorded", read_recorded},
    {"reflection", read_reflection},
    {"reflection_failed", read_reflection_failed},
    {"reflection_applied", read_reflection_applied},
    {"reverified", read_reverified},
    {"op_stopped", read_op_stopped},
    {"op_done", read_op_done},
};

}  // namespace

std::vector<std::string_view> event_types() {
  std::vector<std::string_view> out;
  for (const auto& t : k_event_types) out.push_back(t.name);
  return out;
}

json to_json(const Event& e) {
  return std::visit([](const auto& x) { return event_json(x); }, e);
}

Result<LoggedEvent> parse_event(const json& line) {
  LoggedEvent out;
  std::string type;
  try {
    if (auto t = line.find("type"); t != line.end() && t->is_string()) type = t->get<std::string>();
    out.op = get<std::string>(line, "op", "");
    out.seq = get(line, "seq", int64_t{0});
    out.time = get<std::string>(line, "time", "");
    const EventType* known = nullptr;
    for (const auto& t : k_event_types) {
      if (t.name == type) known = &t;
    }
    if (!known) {
      out.event = UnknownEvent{line};
      return out;
    }
    KOPE_ASSIGN(out.event, known->read(line));
  } catch (const json::exception& ex) {
    return fail(ErrorKind::corrupt, "event log: malformed '{}' event (seq {}): {}", type, line.value("seq", int64_t{0}),
                ex.what());
  }
  return out;
}

}  // namespace kope::run
