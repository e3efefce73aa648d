// Anthropic Messages API (/v1/messages).
#include <algorithm>

#include "llm/provider.h"

namespace kope::llm {

namespace {

constexpr std::string_view k_anthropic_version = "2023-06-01";
constexpr size_t k_max_breakpoints = 4;  // cache_control blocks the Messages API accepts

// A text block that ends a cacheable prefix.
Json cached_text_block(std::string text) {
  return {{"type", "text"},
          {"text", std::move(text)},
          {"cache_control", {{"type", "ephemeral"}}}};
}

// input_tokens excludes cache reads and writes; kope's prompt_tokens includes both.
void read_usage(const Json& u, Usage& usage, bool output_only) {
  if (!output_only) {
    const int64_t cache_read = json_int(u, "cache_read_input_tokens");
    const int64_t cache_write = json_int(u, "cache_creation_input_tokens");
    usage.prompt_tokens = json_int(u, "input_tokens") + cache_read + cache_write;
    usage.cached_tokens = cache_read;
    usage.cache_write_tokens = cache_write;
  }
  if (u.contains("output_tokens")) usage.completion_tokens = json_int(u, "output_tokens");
  usage.estimated = false;
}

// Anthropic stop reasons in kope's (OpenAI's) words.
std::string finish_reason_of(std::string_view stop_reason) {
  if (stop_reason == "end_turn" || stop_reason == "stop_sequence") return "stop";
  if (stop_reason == "max_tokens") return "length";
  if (stop_reason == "refusal") return "content_filter";
  return std::string(stop_reason);
}

std::expected<ChatResponse, AttemptFailure> check_refusal(ChatResponse r, std::string_view host) {
  if (r.finish_reason == "content_filter") {
    AttemptFailure f;
    f.error.cls = FailureClass::content_filtered;
    f.error.message = fmt::format("{} refused to answer (stop_reason refusal) after {} characters",
                                  host, r.text.size());
    f.error.request_id = r.request_id;
    return std::unexpected(std::move(f));
  }
  return r;
}

class AnthropicStream final : public StreamDecoder {
 public:
  explicit AnthropicStream(std::string host) : m_host(std::move(host)) {}

  bool on_event(const SseEvent& ev) override {
    Json j = Json::parse(ev.data, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      m_failure = malformed(fmt::format("invalid JSON in stream event #{} from {}: {}",
                                        m_events + 1, m_host, one_line(ev.data, 200)),
                            false, ev.data);
      return false;
    }
    ++m_events;
    const std::string type = json_string(j, "type");
    if (type == "error" || ev.event == "error") {
      m_failure = classify_error_object(j, m_host);
      return false;
    }
    if (type == "message_start") {
      if (auto m = j.find("message"); m != j.end() && m->is_object()) {
        m_response.request_id = json_string(*m, "id");
        m_response.model = json_string(*m, "model");
        if (auto u = m->find("usage"); u != m->end() && u->is_object()) {
          read_usage(*u, m_response.usage, false);
          m_has_usage = true;
        }
      }
    } else if (type == "content_block_delta") {
      if (auto d = j.find("delta");
          d != j.end() && d->is_object() && json_string(*d, "type") == "text_delta") {
        m_response.text += json_string(*d, "text");
      }
    } else if (type == "message_delta") {
      if (auto d = j.find("delta"); d != j.end() && d->is_object()) {
        if (auto sr = d->find("stop_reason"); sr != d->end() && sr->is_string()) {
          m_response.finish_reason = finish_reason_of(sr->get<std::string>());
        }
      }
      if (auto u = j.find("usage"); u != j.end() && u->is_object()) {
        read_usage(*u, m_response.usage, !u->contains("input_tokens"));
        m_has_usage = true;
      }
    } else if (type == "message_stop") {
      m_done = true;
      return false;
    }
    return true;  // ping, content_block_start/stop, unknown future events
  }

  std::expected<ChatResponse, AttemptFailure> finish(size_t) override {
    if (m_failure) return std::unexpected(std::move(*m_failure));
    if (!m_done && m_response.finish_reason.empty()) {
      return std::unexpected(malformed(
          fmt::format("truncated stream from {}: it ended after {} events without message_stop",
                      m_host, m_events),
          true));
    }
    if (!m_has_usage) m_response.usage.estimated = true;
    return check_refusal(std::move(m_response), m_host);
  }

 private:
  std::string m_host;
  ChatResponse m_response;
  bool m_done = false;
  bool m_has_usage = false;
  size_t m_events = 0;
  std::optional<AttemptFailure> m_failure;
};

class AnthropicProvider final : public Provider {
 public:
  std::string_view name() const override { return "anthropic"; }

  Json build_body(const Profile& profile, const std::vector<Message>& messages,
                  const ChatParams& params, bool stream) const override {
    Json body = Json::object();
    body["model"] = profile.model;
    body["max_tokens"] =
        params.max_output_tokens.value_or(static_cast<int>(profile.max_output_tokens));
    // Cache breakpoints (the Messages API takes at most 4 per request): when any message has a
    // cache_prefix, the system text becomes a block with cache_control (it is shared by every
    // op), and the last messages with a cache_prefix send it as a block with cache_control
    // followed by the rest of their content. Without cache_prefix the request is as before.
    size_t marked = 0;
    for (const auto& m : messages)
      if (m.role != Message::Role::system && m.cache_prefix > 0 && !m.content.empty()) ++marked;
    std::string system;
    for (const auto& m : messages) {
      if (m.role != Message::Role::system) continue;
      if (!system.empty()) system += "\n\n";
      system += m.content;
    }
    const bool caching = marked > 0;
    const size_t system_marks = caching && !system.empty() ? 1 : 0;
    const size_t skip = marked > k_max_breakpoints - system_marks
                            ? marked - (k_max_breakpoints - system_marks)
                            : 0;  // the earliest prefixes beyond the limit are sent plain
    size_t seen = 0;
    Json msgs = Json::array();
    for (const auto& m : messages) {
      if (m.role == Message::Role::system) continue;
      const bool prefixed = m.cache_prefix > 0 && !m.content.empty();
      if (!prefixed || seen++ < skip) {
        msgs.push_back({{"role", role_name(m.role)}, {"content", m.content}});
        continue;
      }
      const size_t cut = std::min(m.cache_prefix, m.content.size());
      Json blocks = Json::array();
      blocks.push_back(cached_text_block(m.content.substr(0, cut)));
      if (cut < m.content.size())
        blocks.push_back({{"type", "text"}, {"text", m.content.substr(cut)}});
      msgs.push_back({{"role", role_name(m.role)}, {"content", std::move(blocks)}});
    }
    if (caching && !system.empty()) {
      body["system"] = Json::array({cached_text_block(system)});
    } else if (!system.empty()) {
      body["system"] = system;
    }
    body["messages"] = std::move(msgs);
    body["temperature"] = params.temperature.value_or(profile.temperature);
    if (stream) body["stream"] = true;
    return body;  // the Messages API has no seed
  }

  Headers headers(const std::string& api_key) const override {
    Headers h = {{"Content-Type", "application/json"},
                 {"Accept", "application/json, text/event-stream"},
                 {"anthropic-version", std::string(k_anthropic_version)}};
    if (!api_key.empty()) h.emplace_back("x-api-key", api_key);
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
    if (json_string(j, "type") == "error" || (j.contains("error") && !j.contains("content"))) {
      return std::unexpected(classify_error_object(j, host));
    }
    auto c = j.find("content");
    if (c == j.end() || !c->is_array()) {
      return std::unexpected(malformed(
          fmt::format("the response from {} has no content array (not an Anthropic message?): {}",
                      host, one_line(body, 200)),
          false, body));
    }
    ChatResponse r;
    for (const auto& block : *c) {
      if (block.is_object() && json_string(block, "type") == "text")
        r.text += json_string(block, "text");
    }
    r.finish_reason = finish_reason_of(json_string(j, "stop_reason"));
    r.request_id = json_string(j, "id");
    r.model = json_string(j, "model");
    if (auto u = j.find("usage"); u != j.end() && u->is_object()) {
      read_usage(*u, r.usage, false);
    } else {
      r.usage.estimated = true;
    }
    return check_refusal(std::move(r), host);
  }

  std::unique_ptr<StreamDecoder> stream_decoder(std::string host) const override {
    return std::make_unique<AnthropicStream>(std::move(host));
  }
};

}  // namespace

std::unique_ptr<Provider> make_anthropic_provider() {
  return std::make_unique<AnthropicProvider>();
}

}  // namespace kope::llm
