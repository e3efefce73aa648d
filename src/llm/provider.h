// llm/provider.h — what differs between providers: request bodies, headers, response and
// stream parsing; and the shared classification of failed attempts.
#pragma once

#include <chrono>
#include <expected>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kope/llm.h"
#include "llm/http.h"
#include "llm/sse.h"

namespace kope::llm {

using Json = nlohmann::ordered_json;

// Error bodies longer than this are cut in transcripts and messages.
inline constexpr size_t k_error_body_cap = 8192;
inline constexpr size_t k_error_detail_cap = 400;

// One failed attempt, before the client decides whether to retry it.
struct AttemptFailure {
  LlmError error;
  bool retry = false;                                    // worth another attempt
  std::optional<std::chrono::milliseconds> retry_after;  // the server's Retry-After
  std::string body;                                      // the error body (capped), for transcripts
};

// The useful parts of a provider's error body, whatever its dialect: OpenAI
// {"error": {"message", "type", "code"}}, Anthropic {"type": "error", "error": {"type",
// "message"}}, vLLM/SGLang {"object": "error", "message", "type", "code"}, Ollama and
// llama.cpp {"error": "..."}, FastAPI {"detail": ...}, or plain text / HTML.
struct ErrorBody {
  std::string message;  // one line, capped
  std::string type;
  std::string code;
  bool structured = false;  // it was JSON with a recognised error shape
};
ErrorBody parse_error_body(std::string_view body);
ErrorBody error_body_from_json(const Json& j);

// Wordings of the providers and local servers (see classify.cpp for the list).
bool is_context_length_error(const ErrorBody& e);
bool is_unknown_model_error(const ErrorBody& e);
bool is_content_filter_error(const ErrorBody& e);
bool is_quota_exhausted_error(const ErrorBody& e);

// A non-2xx response.
AttemptFailure classify_status(const HttpResponse& response, std::string_view host);
// An error object inside a 2xx body or a stream event (OpenRouter, Anthropic "error" events).
AttemptFailure classify_error_object(const Json& j, std::string_view host);
// A transport-level failure.
AttemptFailure classify_http_error(const HttpError& e);
// A response that is not what the protocol promises.
AttemptFailure malformed(std::string message, bool retry, std::string_view body = {});

// The reply of a stream, assembled event by event.
class StreamDecoder {
 public:
  virtual ~StreamDecoder() = default;
  // One event; returns false when the stream is over (finished or failed).
  virtual bool on_event(const SseEvent& event) = 0;
  // The result once the transfer ended (events() is the number of events seen).
  virtual std::expected<ChatResponse, AttemptFailure> finish(size_t events) = 0;
};

class Provider {
 public:
  virtual ~Provider() = default;
  virtual std::string_view name() const = 0;
  virtual Json build_body(const Profile& profile, const std::vector<Message>& messages,
                          const ChatParams& params, bool stream) const = 0;
  // Content type, authentication (none without a key) and version headers.
  virtual Headers headers(const std::string& api_key) const = 0;
  // A complete non-streamed 2xx body. usage.estimated is set when the body reports no usage.
  virtual std::expected<ChatResponse, AttemptFailure> parse_body(std::string_view body,
                                                                 std::string_view host) const = 0;
  virtual std::unique_ptr<StreamDecoder> stream_decoder(std::string host) const = 0;
};

// "openai" or "anthropic"; nullptr for anything else.
std::unique_ptr<Provider> make_provider(std::string_view name);
std::unique_ptr<Provider> make_openai_provider();
std::unique_ptr<Provider> make_anthropic_provider();

// Helpers shared by the providers.
std::string one_line(std::string_view text, size_t cap = k_error_detail_cap);
int64_t json_int(const Json& j, std::string_view key);         // 0 when absent or not a number
std::string json_string(const Json& j, std::string_view key);  // "" when absent or not a string

}  // namespace kope::llm
