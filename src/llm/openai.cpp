// OpenAI-compatible chat completions (/v1/chat/completions): OpenAI, DeepSeek, GLM, Qwen,
// OpenRouter, vLLM, SGLang, Ollama, llama.cpp server, LM Studio, ...
#include "llm/provider.h"

namespace kope::llm {

namespace {

// `content` may be a string, null, or an array of parts [{"type": "text", "text": ...}].
std::string content_text(const Json& content) {
  if (content.is_string()) return content.get<std::string>();
  std::string out;
  if (content.is_array()) {
    for (const auto& part : content) {
      if (part.is_object() && json_string(part, "type") == "text") out += json_string(part, "text");
    }
  }
  return out;
}

// usage {prompt_tokens, completion_tokens, prompt_tokens_details: {cached_tokens}} (OpenAI),
// prompt_cache_hit_tokens (DeepSeek), "estimated": true (a server that only estimates). Returns
// false when there is no usage object.
bool read_usage(const Json& j, Usage& usage) {
  auto it = j.find("usage");
  if (it == j.end() || !it->is_object()) return false;
  const Json& u = *it;
  usage.prompt_tokens = json_int(u, "prompt_tokens");
  usage.completion_tokens = json_int(u, "completion_tokens");
  usage.cached_tokens = 0;
  if (auto d = u.find("prompt_tokens_details"); d != u.end() && d->is_object()) {
    usage.cached_tokens = json_int(*d, "cached_tokens");
  }
  if (usage.cached_tokens == 0) usage.cached_tokens = json_int(u, "prompt_cache_hit_tokens");
  // A server that only estimates its counts may say so ("estimated": true, as the development
  // bridge does): kope then neither calibrates its estimator on them nor takes their cache
  // figure as reported.
  auto est = u.find("estimated");
  usage.estimated = est != u.end() && est->is_boolean() && est->get<bool>();
  return true;
}

std::expected<ChatResponse, AttemptFailure> check_filtered(ChatResponse r, std::string_view host) {
  if (r.finish_reason == "content_filter") {
    AttemptFailure f;
    f.error.cls = FailureClass::content_filtered;
    f.error.message =
        fmt::format("{} stopped the answer with finish_reason content_filter after {} characters",
                    host, r.text.size());
    f.error.request_id = r.request_id;
    return std::unexpected(std::move(f));
  }
  return r;
}

class OpenAiStream final : public StreamDecoder {
 public:
  explicit OpenAiStream(std::string host) : m_host(std::move(host)) {}

  bool on_event(const SseEvent& ev) override {
    if (ev.data == "[DONE]") {
      m_done = true;
      return false;
    }
    Json j = Json::parse(ev.data, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      m_failure = malformed(fmt::format("invalid JSON in stream event #{} from {}: {}",
                                        m_events + 1, m_host, one_line(ev.data, 200)),
                            false, ev.data);
      return false;
    }
    ++m_events;
    if (j.contains("error") && !j.contains("choices")) {
      m_failure = classify_error_object(j, m_host);
      return false;
    }
    if (m_response.request_id.empty()) m_response.request_id = json_string(j, "id");
    if (m_response.model.empty()) m_response.model = json_string(j, "model");
    if (auto c = j.find("choices"); c != j.end() && c->is_array() && !c->empty()) {
      const Json& choice = (*c)[0];
      if (auto d = choice.find("delta"); d != choice.end() && d->is_object()) {
        if (auto content = d->find("content"); content != d->end())
          m_response.text += content_text(*content);
      }
      if (auto fr = choice.find("finish_reason"); fr != choice.end() && fr->is_string()) {
        m_response.finish_reason = fr->get<std::string>();
      }
    }
    Usage u;
    if (read_usage(j, u)) {
      m_response.usage = u;
      m_has_usage = true;
    }
    return true;
  }

  std::expected<ChatResponse, AttemptFailure> finish(size_t) override {
    if (m_failure) return std::unexpected(std::move(*m_failure));
    // A stream that ends after its finish_reason but without "data: [DONE]" carries the whole
    // answer (some servers omit the marker); without either it was cut.
    if (!m_done && m_response.finish_reason.empty()) {
      return std::unexpected(malformed(fmt::format("truncated stream from {}: it ended after {} "
                                                   "events without a finish_reason or [DONE]",
                                                   m_host, m_events),
                                       true));
    }
    if (!m_has_usage) m_response.usage.estimated = true;
    return check_filtered(std::move(m_response), m_host);
  }

 private:
  std::string m_host;
  ChatResponse m_response;
  bool m_done = false;
  bool m_has_usage = false;
  size_t m_events = 0;
  std::optional<AttemptFailure> m_failure;
};

class OpenAiProvider final : public Provider {
 public:
  std::string_view name() const override { return "openai"; }

  Json build_body(const Profile& profile, const std::vector<Message>& messages,
                  const ChatParams& params, bool stream) const override {
    Json body = Json::object();
    body["model"] = profile.model;
    Json msgs = Json::array();
    for (const auto& m : messages)
      msgs.push_back({{"role", role_name(m.role)}, {"content", m.content}});
    body["messages"] = std::move(msgs);
    body["max_tokens"] =
        params.max_output_tokens.value_or(static_cast<int>(profile.max_output_tokens));
    body["temperature"] = params.temperature.value_or(profile.temperature);
    if (params.seed) body["seed"] = *params.seed;
    if (stream) {
      body["stream"] = true;
      body["stream_options"] = {{"include_usage", true}};
    }
    return body;
  }

  Headers headers(const std::string& api_key) const override {
    Headers h = {{"Content-Type", "application/json"},
                 {"Accept", "application/json, text/event-stream"}};
    if (!api_key.empty()) h.emplace_back("Authorization", "Bearer " + api_key);
    return h;
  }

  std::expected<ChatResponse, AttemptFailure> parse_body(std::string_view body,
                                                         std::string_view host) const override {
    Json j = Json::parse(body, nullptr, false);
    if (j.is_discarded()) {
      return std::unexpected(
          malformed(fmt::format("invalid JSON in the response from {} ({} bytes): {}", host,
                                body.size(), one_line(body, 200)),
                    false, body));
    }
    if (!j.is_object()) {
      return std::unexpected(
          malformed(fmt::format("the response from {} is not a JSON object", host), false, body));
    }
    if (j.contains("error") && !j.contains("choices"))
      return std::unexpected(classify_error_object(j, host));
    auto c = j.find("choices");
    if (c == j.end() || !c->is_array() || c->empty() || !(*c)[0].is_object()) {
      return std::unexpected(malformed(
          fmt::format("the response from {} has no choices (not an OpenAI chat completion?): {}",
                      host, one_line(body, 200)),
          false, body));
    }
    const Json& choice = (*c)[0];
    ChatResponse r;
    if (auto m = choice.find("message"); m != choice.end() && m->is_object()) {
      if (auto content = m->find("content"); content != m->end()) r.text = content_text(*content);
    } else if (choice.contains("text")) {
      r.text = json_string(choice, "text");
    } else {
      return std::unexpected(
          malformed(fmt::format("choices[0] from {} has no message", host), false, body));
    }
    r.finish_reason = json_string(choice, "finish_reason");
    r.request_id = json_string(j, "id");
    r.model = json_string(j, "model");
    if (!read_usage(j, r.usage)) r.usage.estimated = true;
    return check_filtered(std::move(r), host);
  }

  std::unique_ptr<StreamDecoder> stream_decoder(std::string host) const override {
    return std::make_unique<OpenAiStream>(std::move(host));
  }
};

}  // namespace

std::unique_ptr<Provider> make_openai_provider() {
  return std::make_unique<OpenAiProvider>();
}

}  // namespace kope::llm
