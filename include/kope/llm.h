// kope/llm.h — talking to language models: the client interface the agent uses.
//
// One interface, several providers (OpenAI-compatible chat completions, Anthropic Messages),
// plus a scripted fake for tests (fakes::ScriptedLlm, src/fakes/fakes.h). A failed call is an LlmError with a class the
// caller can react to (shrink the context, back off, stop); retries of transient failures happen
// inside the client. Clients are thread-safe; rate limits and the concurrency cap are shared by
// all callers that use the same client object (and, by default, by all clients made for the same
// profile in this process). API keys never appear in errors, logs or transcripts.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kope/error.h"

namespace kope::llm {

struct Message {
  enum class Role { system, user, assistant };
  Role role = Role::user;
  std::string content;
  // Extension: the first `cache_prefix` bytes of `content` are a stable prefix that later calls
  // repeat byte for byte (a provider cache breakpoint goes after them; 0: none).
  size_t cache_prefix = 0;
};

std::string_view role_name(Message::Role role);  // "system", "user", "assistant"

// Set once to stop every call that watches it: calls in flight end within ~50 ms with
// FailureClass::cancelled, waits (backoff, rate limits, concurrency) stop at once.
// Thread-safe.
class CancelToken {
 public:
  void cancel() noexcept { m_cancelled.store(true, std::memory_order_relaxed); }
  bool cancelled() const noexcept { return m_cancelled.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> m_cancelled{false};
};

struct ChatParams {
  std::optional<int> max_output_tokens;  // default: the profile's
  std::optional<double> temperature;     // default: the profile's
  std::optional<uint64_t> seed;          // passed on where the provider supports it
  std::string purpose;                   // "draft", "refine", "reflect", ... (for transcripts)
  // Extensions (all optional):
  std::shared_ptr<const CancelToken> cancel;  // stops this call (besides the client's token)
  std::optional<bool> stream;                 // default: the profile's
};

// Token counts of one call. prompt_tokens counts every input token, cached ones included;
// cached_tokens is the part served from the provider's prompt cache (OpenAI
// prompt_tokens_details.cached_tokens, DeepSeek prompt_cache_hit_tokens, Anthropic
// cache_read_input_tokens; Anthropic's input_tokens + cache reads + cache writes = prompt_tokens).
// cache_write_tokens is the part written to the cache by this call (Anthropic
// cache_creation_input_tokens; 0 for providers that cache by themselves).
struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;
  bool estimated = false;  // the provider reported no usage; counts are estimates
  // Extensions:
  int64_t cache_write_tokens = 0;

  int64_t total_tokens() const { return prompt_tokens + completion_tokens; }
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
  // Extensions:
  double total_seconds = 0;        // the whole chat() call: attempts, backoff and limiter waits
  double first_byte_seconds = 0;   // of the successful attempt: request sent -> first byte
  std::string call_id;             // this call's id in the transcript ("c000042")
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
  // True when the same request may succeed later unchanged: transport, timeout, rate_limited,
  // server_error, malformed, and HTTP 408/409. False for everything that needs a change
  // (context_length, unauthorized, not_found, bad_request, content_filtered, ...) or a stop.
  bool retryable() const;
  // Extensions:
  std::string request_id;  // the provider's id when the failing response carried one
  std::string call_id;     // this call's id in the transcript
};

template <class T>
using LlmResult = std::expected<T, LlmError>;

// Default timeouts of a profile. connect: TCP and TLS handshake; idle: no byte received (a
// streamed answer is watched from the request on, a non-streamed one from its first byte, since
// servers send it only when complete); total: one attempt, start to last byte.
inline constexpr std::chrono::milliseconds k_default_connect_timeout{10000};
inline constexpr std::chrono::milliseconds k_default_idle_timeout{120000};
inline constexpr std::chrono::milliseconds k_default_total_timeout{600000};

// A model profile (from TOML config, environment and CLI flags).
struct Profile {
  std::string name = "default";
  std::string provider = "openai";   // "openai" (any OpenAI-compatible endpoint), "anthropic"
  std::string base_url;              // e.g. https://api.openai.com/v1 (see endpoint_url())
  std::string model;
  std::string api_key_env = "OPENAI_API_KEY";  // "" : the server needs no key
  int64_t context_window = 128000;
  int64_t max_output_tokens = 8192;
  double temperature = 0.2;
  double price_input_per_mtok = 0;   // USD per million tokens
  double price_output_per_mtok = 0;
  double requests_per_minute = 0;    // 0: unlimited
  double tokens_per_minute = 0;
  int concurrency = 4;
  bool stream = false;
  std::chrono::milliseconds connect_timeout = k_default_connect_timeout;
  std::chrono::milliseconds idle_timeout = k_default_idle_timeout;
  std::chrono::milliseconds total_timeout = k_default_total_timeout;
  int max_retries = 5;
  // Extensions:
  std::optional<double> price_cached_input_per_mtok;  // default: price_input_per_mtok
  std::optional<double> cached_price_ratio;  // in [0, 1]; default: see cached_price_ratio()
  std::chrono::milliseconds retry_base_delay{1000};   // backoff: base * 2^(retry-1), jittered
  std::chrono::milliseconds retry_max_delay{60000};   // cap of the computed backoff
  std::chrono::milliseconds retry_after_cap{120000};  // cap of a server's Retry-After
  std::string extra_body_json;           // JSON object merged into every request body
  std::vector<std::string> omit_params;  // top-level request fields never sent
  std::string source;                    // where it was defined: "kope.toml:12", "environment"
};

// The URL a profile's requests go to. OpenAI-compatible: a base URL with a path (".../v1",
// ".../api/paas/v4", ".../compatible-mode/v1") gets "/chat/completions" appended, as the OpenAI
// SDKs do; a bare host ("http://localhost:8080") gets "/v1/chat/completions"; a URL already
// ending in "/chat/completions" is used as it is. Anthropic: the same with "/messages" and
// "/v1/messages". A trailing '/' is ignored.
std::string endpoint_url(const Profile& profile);

// Cost in USD of `usage` at the profile's prices (cached input at the cached price).
double cost_usd(const Profile& profile, const Usage& usage);

// Default price of a cached prompt token relative to an uncached one, per provider: Anthropic
// bills cache reads at 0.1x, OpenAI (and most OpenAI-compatible providers) at 0.5x.
inline constexpr double k_anthropic_cached_price_ratio = 0.1;
inline constexpr double k_openai_cached_price_ratio = 0.5;

// The price of a cached prompt token relative to an uncached one, in [0, 1], for
// billed-equivalent token figures: the profile's cached_price_ratio when set, else
// price_cached_input_per_mtok / price_input_per_mtok when both prices are set (> 0 input price),
// else the provider's default above.
double cached_price_ratio(const Profile& profile);

// Totals of many calls (one profile, one purpose, or a whole run).
struct UsageTotals {
  int64_t calls = 0;             // successful calls
  int64_t failed_calls = 0;      // calls that ended in an LlmError
  int64_t attempts = 0;          // HTTP attempts, retries included, failed calls included
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;
  int64_t cache_write_tokens = 0;
  int64_t estimated_calls = 0;   // calls whose usage was estimated (provider reported none)
  int64_t estimated_tokens = 0;  // the part of the token counts above that is estimated
  double cost_usd = 0;
  double latency_seconds = 0;    // sum of successful attempts' latencies
  std::map<std::string, int64_t> failures;  // failure_class_name -> count

  void add(const UsageTotals& other);
};

// Run-wide accumulator of tokens, cost and failures. Thread-safe; share one (through
// ClientOptions) between every client and thread of a run.
class RunAccounting {
 public:
  void record(const Profile& profile, std::string_view purpose, const ChatResponse& response);
  void record_failure(const Profile& profile, std::string_view purpose, const LlmError& error);

  UsageTotals total() const;
  std::map<std::string, UsageTotals> by_profile() const;  // key: profile name
  std::map<std::string, UsageTotals> by_purpose() const;  // key: ChatParams::purpose ("" kept)
  // {"total": {...}, "by_profile": {...}, "by_purpose": {...}}, for run directories.
  std::string to_json() const;

 private:
  mutable std::mutex m_mutex;
  UsageTotals m_total;
  std::map<std::string, UsageTotals> m_by_profile;
  std::map<std::string, UsageTotals> m_by_purpose;
};

// What a client shares with the rest of the run. Everything is optional.
struct ClientOptions {
  // JSONL file every request, response, retry and failure is appended to (one line per event,
  // flushed and fsynced, keys redacted). Empty: no transcript. Several clients may share a file.
  std::filesystem::path transcript;
  std::shared_ptr<RunAccounting> accounting;  // every call is recorded here
  std::shared_ptr<const CancelToken> cancel;  // stops every call of this client
  // Share rate limits and the concurrency cap with every other client made for the same
  // profile (name, endpoint, model, limits) in this process.
  bool share_limits = true;
  // Jitter source for backoff, uniform in [0, 1); default: a seeded random generator. Called
  // from the calling thread (must be thread-safe if the client is used by several threads).
  std::function<double()> jitter;
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
// no base URL, missing key variable) — the message says what to set. A missing key is accepted
// for servers on this machine or a private network (local llama.cpp, vLLM, Ollama, ...) and when
// api_key_env is "": such requests carry no Authorization header.
Result<std::unique_ptr<LlmClient>> make_client(const Profile& profile);
Result<std::unique_ptr<LlmClient>> make_client(const Profile& profile,
                                               const ClientOptions& options);

// Rough token count of a whole prompt: the texts (context::estimate_tokens, kope's one
// estimate) plus the chat template's per-message overhead.
int64_t estimate_tokens(const std::vector<Message>& messages);

// ---- Profiles: loading and resolving --------------------------------------------------------
//
// Config files are TOML with one [llm.<name>] table per profile (keys: the Profile fields;
// timeouts as connect_timeout_s, idle_timeout_s, total_timeout_s, retry_base_delay_s,
// retry_max_delay_s, retry_after_cap_s in seconds; extra_body a table; omit_params an array)
// and an optional `default = "<name>"` in [llm]. Read, lowest precedence first:
//   1. the user config: $XDG_CONFIG_HOME/kope/config.toml (else ~/.config/kope/config.toml);
//   2. the project file: kope.toml, else .kope/config.toml, in the project directory or the
//      nearest parent that has one.
// A profile defined in both is merged key by key (the project wins). When no file defines a
// profile, one profile "default" comes from the environment: OPENAI_BASE_URL (else
// https://api.openai.com/v1), OPENAI_API_KEY and KOPE_MODEL (KOPE_PROVIDER=anthropic switches to
// ANTHROPIC_BASE_URL / ANTHROPIC_API_KEY). The default profile is $KOPE_PROFILE, else [llm]
// default, else the only profile, else the one named "default".

struct ProfileSources {
  std::filesystem::path project_dir;               // empty: the current directory
  std::optional<std::filesystem::path> user_config;  // nullopt: the XDG location; "" : none
  bool environment = true;  // build the environment profile when no file defines one
};

struct ProfileSet {
  std::vector<Profile> profiles;  // in name order
  std::string default_name;       // empty when none can be chosen
  std::vector<std::filesystem::path> files;  // the config files read

  const Profile* find(std::string_view name) const;
};

// Values given on the command line; each set one replaces the profile's.
struct ProfileOverrides {
  std::optional<std::string> provider, base_url, model, api_key_env;
  std::optional<int64_t> context_window, max_output_tokens;
  std::optional<double> temperature;
  std::optional<bool> stream;
  std::optional<std::chrono::milliseconds> connect_timeout, idle_timeout, total_timeout;
  std::optional<int> max_retries, concurrency;

  bool empty() const;
};

// Reads the config files. Fails with config naming file:line:column and the key for a
// malformed file or value; succeeds with an empty set when nothing is configured.
Result<ProfileSet> load_profiles(const ProfileSources& sources = {});

// The profile named `name` (empty: the default) with `overrides` applied and checked. Fails
// with not_found for an unknown name (listing the known ones), and with config saying how to
// configure a model when none is configured or the result has no model / base URL.
Result<Profile> resolve_profile(std::string_view name = {}, const ProfileOverrides& overrides = {},
                                const ProfileSources& sources = {});

// Checks a profile's values (provider known, model and base URL set, limits and timeouts
// positive). Fails with config naming the profile and the key.
Status validate_profile(const Profile& profile);

// ---- Redaction --------------------------------------------------------------------------------

// Registers a secret (an API key): from now on redact() replaces it everywhere in this process.
// Secrets shorter than 8 characters are not registered (they would mangle ordinary text).
void register_secret(std::string_view secret);
// `text` with every registered secret, bearer token, "sk-..." style key, and key-like URL query
// parameter (key=, api_key=, api-key=, token=, access_token=) replaced by "[REDACTED]". Every
// error message, log line and transcript line of this module passes through it. Thread-safe.
std::string redact(std::string_view text);

}  // namespace kope::llm
