#include "run/events.h"

#include <algorithm>
#include <chrono>
#include <ctime>

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

}  // namespace kope::run
