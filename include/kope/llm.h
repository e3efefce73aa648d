// kope/llm.h — talking to language models: the client interface the agent uses.
//
// One interface, several providers (OpenAI-compatible chat completions, Anthropic Messages),
// plus a fake for tests. A failed call is an LlmError with a class the caller can react to
// (shrink the context, back off, stop); retries of transient failures happen inside the client.
// Clients are thread-safe; rate limits and the concurrency cap are shared by all callers that
// use the same client object. API keys never appear in errors, logs or transcripts.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kope/error.h"

namespace kope::llm {

struct Message {
  enum class Role { system, user, assistant };
  Role role = Role::user;
  std::string content;
};

struct ChatParams {
  std::optional<int> max_output_tokens;  // default: the profile's
  std::optional<double> temperature;     // default: the profile's
  std::optional<uint64_t> seed;          // passed on where the provider supports it
  std::string purpose;                   // "draft", "refine", "reflect", ... (for transcripts)
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;
  bool estimated = false;  // the provider reported no usage; counts are estimates
};

struct ChatResponse {
  std::string text;
  std::string finish_reason;  // "stop", "length", "content_filter", ...
  Usage usage;
  double latency_seconds = 0;
  std::string request_id;     // the provider's id, for support tickets
  std::string model;          // the model that answered
  int attempts = 1;           // 1 + retries made
  double cost_usd = 0;        // from the profile's prices
};

// Why a call failed, for the caller to react.
enum class FailureClass {
  transport,         // connection refused/reset, DNS, TLS
  timeout,           // connect, idle or total timeout
  http_status,       // an HTTP status not otherwise classified
  rate_limited,      // 429 after all retries
  server_error,      // 5xx after all retries
  unauthorized,      // 401/403
  not_found,         // unknown model or endpoint (404)
  bad_request,       // other 4xx
  provider_error,    // an error body from the provider
  context_length,    // the prompt is too long for the model: shrink and retry
  content_filtered,  // the provider refused to answer
  malformed,         // unreadable, truncated or schema-violating response
  cancelled,         // the caller asked to stop
};

std::string_view failure_class_name(FailureClass c);

struct LlmError {
  FailureClass cls = FailureClass::transport;
  std::string message;  // one line, key-free
  int http_status = 0;
  int attempts = 1;
  bool retryable() const;
};

template <class T>
using LlmResult = std::expected<T, LlmError>;

// A model profile (from TOML config, environment and CLI flags).
struct Profile {
  std::string name = "default";
  std::string provider = "openai";   // "openai" (any OpenAI-compatible endpoint), "anthropic"
  std::string base_url;              // e.g. https://api.openai.com/v1
  std::string model;
  std::string api_key_env = "OPENAI_API_KEY";
  int64_t context_window = 128000;
  int64_t max_output_tokens = 8192;
  double temperature = 0.2;
  double price_input_per_mtok = 0;   // USD per million tokens
  double price_output_per_mtok = 0;
  double requests_per_minute = 0;    // 0: unlimited
  double tokens_per_minute = 0;
  int concurrency = 4;
  bool stream = false;
  std::chrono::milliseconds connect_timeout{10000};
  std::chrono::milliseconds idle_timeout{120000};
  std::chrono::milliseconds total_timeout{600000};
  int max_retries = 5;
};

class LlmClient {
 public:
  virtual ~LlmClient() = default;
  // One chat completion. Retries transient failures internally (with backoff, honouring
  // Retry-After) and returns the final failure classified. Thread-safe.
  virtual LlmResult<ChatResponse> chat(const std::vector<Message>& messages, const ChatParams& params) = 0;
  virtual const Profile& profile() const = 0;
};

// Builds the client for a profile. Fails with config when the profile is incomplete (no model,
// no base URL, missing key variable) — the message says what to set.
Result<std::unique_ptr<LlmClient>> make_client(const Profile& profile);

// Rough token count of a text for budgeting before a call (calibrated by the caller against
// reported usage).
int64_t estimate_tokens(std::string_view text);

}  // namespace kope::llm
