// Small pieces of kope/llm.h: names, token estimates, prices, endpoint URLs, accounting.
#include "kope/llm.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <nlohmann/json.hpp>

#include "context/context.h"
#include "util/strings.h"

namespace kope::llm {

std::string_view role_name(Message::Role role) {
  switch (role) {
    case Message::Role::system:
      return "system";
    case Message::Role::user:
      return "user";
    case Message::Role::assistant:
      return "assistant";
  }
  return "user";
}

std::string_view failure_class_name(FailureClass c) {
  switch (c) {
    case FailureClass::transport:
      return "transport";
    case FailureClass::timeout:
      return "timeout";
    case FailureClass::http_status:
      return "http_status";
    case FailureClass::rate_limited:
      return "rate_limited";
    case FailureClass::server_error:
      return "server_error";
    case FailureClass::unauthorized:
      return "unauthorized";
    case FailureClass::not_found:
      return "not_found";
    case FailureClass::bad_request:
      return "bad_request";
    case FailureClass::provider_error:
      return "provider_error";
    case FailureClass::context_length:
      return "context_length";
    case FailureClass::content_filtered:
      return "content_filtered";
    case FailureClass::malformed:
      return "malformed";
    case FailureClass::cancelled:
      return "cancelled";
  }
  return "unknown";
}

bool LlmError::retryable() const {
  switch (cls) {
    case FailureClass::transport:
    case FailureClass::timeout:
    case FailureClass::rate_limited:
    case FailureClass::server_error:
    case FailureClass::malformed:
      return true;
    case FailureClass::http_status:
      return http_status == 408 || http_status == 409;
    default:
      return false;
  }
}

int64_t estimate_tokens(const std::vector<Message>& messages) {
  // Chat templates add about 4 tokens per message and 3 to prime the answer.
  int64_t tokens = 3;
  for (const auto& m : messages) tokens += 4 + context::estimate_tokens(m.content);
  return tokens;
}

double cost_usd(const Profile& profile, const Usage& usage) {
  const double cached_price =
      profile.price_cached_input_per_mtok.value_or(profile.price_input_per_mtok);
  const int64_t cached = std::clamp<int64_t>(usage.cached_tokens, 0, usage.prompt_tokens);
  const double uncached = static_cast<double>(usage.prompt_tokens - cached);
  return (uncached * profile.price_input_per_mtok + static_cast<double>(cached) * cached_price +
          static_cast<double>(usage.completion_tokens) * profile.price_output_per_mtok) /
         1e6;
}

double cached_price_ratio(const Profile& profile) {
  if (profile.cached_price_ratio) return std::clamp(*profile.cached_price_ratio, 0.0, 1.0);
  if (profile.price_cached_input_per_mtok && profile.price_input_per_mtok > 0)
    return std::clamp(*profile.price_cached_input_per_mtok / profile.price_input_per_mtok, 0.0,
                      1.0);
  return profile.provider == "anthropic" ? k_anthropic_cached_price_ratio
                                         : k_openai_cached_price_ratio;
}

namespace {

// The path part of an URL ("" for "http://host:8080").
std::string_view url_path(std::string_view url) {
  size_t scheme = url.find("://");
  size_t from = scheme == std::string_view::npos ? 0 : scheme + 3;
  size_t slash = url.find('/', from);
  if (slash == std::string_view::npos) return {};
  std::string_view path = url.substr(slash);
  size_t q = path.find_first_of("?#");
  return q == std::string_view::npos ? path : path.substr(0, q);
}

}  // namespace

std::string endpoint_url(const Profile& profile) {
  std::string base = profile.base_url;
  std::string query;
  if (size_t q = base.find('?'); q != std::string::npos) {
    query = base.substr(q);
    base.resize(q);
  }
  while (!base.empty() && base.back() == '/') base.pop_back();
  const bool anthropic = profile.provider == "anthropic";
  const std::string_view leaf = anthropic ? "/messages" : "/chat/completions";
  if (util::ends_with(base, leaf)) return base + query;
  if (url_path(base).empty()) return base + "/v1" + std::string(leaf) + query;
  return base + std::string(leaf) + query;
}

// ---- Accounting --------------------------------------------------------------------------------

void UsageTotals::add(const UsageTotals& o) {
  calls += o.calls;
  failed_calls += o.failed_calls;
  attempts += o.attempts;
  prompt_tokens += o.prompt_tokens;
  completion_tokens += o.completion_tokens;
  cached_tokens += o.cached_tokens;
  cache_write_tokens += o.cache_write_tokens;
  estimated_calls += o.estimated_calls;
  estimated_tokens += o.estimated_tokens;
  cost_usd += o.cost_usd;
  latency_seconds += o.latency_seconds;
  for (const auto& [k, v] : o.failures) failures[k] += v;
}

void RunAccounting::record(const Profile& profile, std::string_view purpose,
                           const ChatResponse& r) {
  UsageTotals t;
  t.calls = 1;
  t.attempts = r.attempts;
  t.prompt_tokens = r.usage.prompt_tokens;
  t.completion_tokens = r.usage.completion_tokens;
  t.cached_tokens = r.usage.cached_tokens;
  t.cache_write_tokens = r.usage.cache_write_tokens;
  if (r.usage.estimated) {
    t.estimated_calls = 1;
    t.estimated_tokens = r.usage.total_tokens();
  }
  t.cost_usd = r.cost_usd;
  t.latency_seconds = r.latency_seconds;
  std::lock_guard lock(m_mutex);
  m_total.add(t);
  m_by_profile[profile.name].add(t);
  m_by_purpose[std::string(purpose)].add(t);
}

void RunAccounting::record_failure(const Profile& profile, std::string_view purpose,
                                   const LlmError& e) {
  UsageTotals t;
  t.failed_calls = 1;
  t.attempts = e.attempts;
  t.failures[std::string(failure_class_name(e.cls))] = 1;
  std::lock_guard lock(m_mutex);
  m_total.add(t);
  m_by_profile[profile.name].add(t);
  m_by_purpose[std::string(purpose)].add(t);
}

UsageTotals RunAccounting::total() const {
  std::lock_guard lock(m_mutex);
  return m_total;
}

std::map<std::string, UsageTotals> RunAccounting::by_profile() const {
  std::lock_guard lock(m_mutex);
  return m_by_profile;
}

std::map<std::string, UsageTotals> RunAccounting::by_purpose() const {
  std::lock_guard lock(m_mutex);
  return m_by_purpose;
}

namespace {

nlohmann::json totals_json(const UsageTotals& t) {
  return {{"calls", t.calls},
          {"failed_calls", t.failed_calls},
          {"attempts", t.attempts},
          {"prompt_tokens", t.prompt_tokens},
          {"completion_tokens", t.completion_tokens},
          {"cached_tokens", t.cached_tokens},
          {"cache_write_tokens", t.cache_write_tokens},
          {"estimated_calls", t.estimated_calls},
          {"estimated_tokens", t.estimated_tokens},
          {"cost_usd", t.cost_usd},
          {"latency_seconds", t.latency_seconds},
          {"failures", t.failures}};
}

}  // namespace

std::string RunAccounting::to_json() const {
  std::lock_guard lock(m_mutex);
  nlohmann::json j;
  j["total"] = totals_json(m_total);
  j["by_profile"] = nlohmann::json::object();
  for (const auto& [k, v] : m_by_profile) j["by_profile"][k] = totals_json(v);
  j["by_purpose"] = nlohmann::json::object();
  for (const auto& [k, v] : m_by_purpose) j["by_purpose"][k] = totals_json(v);
  return j.dump();
}

}  // namespace kope::llm
