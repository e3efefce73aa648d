// HttpLlmClient: one chat() = limiter permit -> HTTP attempt -> parse -> retry decision, with
// accounting and transcript events on the way.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <random>
#include <thread>

#include "context/context.h"
#include "llm/limiter.h"
#include "llm/provider.h"
#include "llm/retry.h"
#include "llm/transcript.h"
#include "util/fs.h"
#include "util/strings.h"

namespace kope::llm {

std::unique_ptr<Provider> make_provider(std::string_view name) {
  if (name == "openai") return make_openai_provider();
  if (name == "anthropic") return make_anthropic_provider();
  return nullptr;
}

namespace {

using Clock = std::chrono::steady_clock;

std::atomic<uint64_t> g_call_seq{0};

double default_jitter() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The host name without port or IPv6 brackets.
std::string bare_host(std::string_view hostport) {
  if (!hostport.empty() && hostport.front() == '[') {
    size_t close = hostport.find(']');
    return std::string(
        hostport.substr(1, close == std::string_view::npos ? std::string_view::npos : close - 1));
  }
  size_t colon = hostport.rfind(':');
  return util::to_lower(colon == std::string_view::npos ? hostport : hostport.substr(0, colon));
}

// Servers on this machine, a private network or a container network usually need no key.
bool is_local_host(std::string_view hostport) {
  const std::string h = bare_host(hostport);
  if (h == "localhost" || util::ends_with(h, ".localhost") || util::ends_with(h, ".local") ||
      util::ends_with(h, ".internal") || h == "::1" || h == "0.0.0.0" ||
      util::starts_with(h, "127.") || util::starts_with(h, "10.") ||
      util::starts_with(h, "192.168.") ||
      (h.find(':') != std::string::npos &&
       (util::starts_with(h, "fd") || util::starts_with(h, "fe80:")))) {
    return true;
  }
  if (util::starts_with(h, "172.")) {
    auto parts = util::split(h, '.');
    if (parts.size() == 4) {
      int second = std::atoi(parts[1].c_str());
      return second >= 16 && second <= 31;
    }
  }
  // A single-label name ("vllm", "gpu-box") is a container or LAN name, not a public API.
  return h.find('.') == std::string::npos && h.find(':') == std::string::npos;
}

bool any_cancelled(const CancelToken* a, const CancelToken* b) {
  return (a != nullptr && a->cancelled()) || (b != nullptr && b->cancelled());
}

// Sleeps for `d` unless a token is cancelled first; returns false when cancelled.
bool sleep_unless_cancelled(std::chrono::milliseconds d, const CancelToken* a,
                            const CancelToken* b) {
  const auto until = Clock::now() + d;
  while (Clock::now() < until) {
    if (any_cancelled(a, b)) return false;
    auto left = until - Clock::now();
    std::this_thread::sleep_for(std::min<Clock::duration>(left, std::chrono::milliseconds(20)));
  }
  return !any_cancelled(a, b);
}

Json usage_json(const Usage& u) {
  return {{"prompt", u.prompt_tokens},
          {"completion", u.completion_tokens},
          {"cached", u.cached_tokens},
          {"cache_write", u.cache_write_tokens},
          {"estimated", u.estimated}};
}

// The body as JSON when it is JSON, else as (capped) text.
Json body_json(std::string_view body) {
  Json j = Json::parse(body, nullptr, false);
  if (!j.is_discarded()) return j;
  return std::string(body.substr(0, std::min(body.size(), k_error_body_cap)));
}

class HttpLlmClient final : public LlmClient {
 public:
  HttpLlmClient(Profile profile, ClientOptions options, std::string api_key,
                std::unique_ptr<Provider> provider, std::shared_ptr<Limiter> limiter,
                std::shared_ptr<TranscriptWriter> transcript, Json extra_body)
      : m_profile(std::move(profile)),
        m_options(std::move(options)),
        m_api_key(std::move(api_key)),
        m_provider(std::move(provider)),
        m_limiter(std::move(limiter)),
        m_transcript(std::move(transcript)),
        m_extra_body(std::move(extra_body)),
        m_url(endpoint_url(m_profile)),
        m_host(host_of(m_url)) {}

  const Profile& profile() const override { return m_profile; }

  LlmResult<ChatResponse> chat(const std::vector<Message>& messages,
                               const ChatParams& params) override {
    const Clock::time_point start = Clock::now();
    const std::string call_id = fmt::format("c{:06}", ++g_call_seq);
    const bool stream = params.stream.value_or(m_profile.stream);
    const CancelToken* cancel_call = params.cancel.get();
    const CancelToken* cancel_client = m_options.cancel.get();

    Json body = m_provider->build_body(m_profile, messages, params, stream);
    if (m_extra_body.is_object()) {
      for (const auto& [k, v] : m_extra_body.items()) body[k] = v;
    }
    for (const auto& k : m_profile.omit_params) body.erase(k);
    const std::string body_text = body.dump(-1, ' ', false, Json::error_handler_t::replace);

    log({{"event", "request"},
         {"call", call_id},
         {"profile", m_profile.name},
         {"provider", m_profile.provider},
         {"model", m_profile.model},
         {"url", redact(m_url)},
         {"purpose", params.purpose},
         {"stream", stream},
         {"body", body}});

    const int64_t prompt_estimate = estimate_tokens(messages);
    const int64_t reserve = prompt_estimate + params.max_output_tokens.value_or(
                                                  static_cast<int>(m_profile.max_output_tokens));

    auto give_up = [&](AttemptFailure f, int attempts) -> LlmResult<ChatResponse> {
      f.error.attempts = attempts;
      f.error.call_id = call_id;
      f.error.message = redact(f.error.message + hint(f.error.cls));
      if (m_options.accounting)
        m_options.accounting->record_failure(m_profile, params.purpose, f.error);
      log({{"event", "failure"},
           {"call", call_id},
           {"attempts", attempts},
           {"class", failure_class_name(f.error.cls)},
           {"http_status", f.error.http_status},
           {"message", f.error.message},
           {"request_id", f.error.request_id},
           {"total_s", seconds_since(start)}});
      return std::unexpected(std::move(f.error));
    };
    auto cancelled = [&](std::string_view when) {
      AttemptFailure f;
      f.error.cls = FailureClass::cancelled;
      f.error.message = fmt::format("cancelled {}", when);
      return f;
    };

    for (int attempt = 1;; ++attempt) {
      if (any_cancelled(cancel_call, cancel_client))
        return give_up(cancelled("before the request was sent"), attempt - 1);
      std::optional<Limiter::Permit> permit =
          m_limiter->acquire(reserve, cancel_call, cancel_client);
      if (!permit)
        return give_up(cancelled("while waiting for the rate limit or a concurrency slot"),
                       attempt - 1);
      auto outcome = attempt_once(body_text, stream, cancel_call, cancel_client);
      const bool counted = outcome && !outcome->response.usage.estimated;
      m_limiter->settle(reserve, counted ? outcome->response.usage.total_tokens() : reserve);
      permit.reset();

      if (outcome) {
        ChatResponse r = std::move(outcome->response);
        if (r.usage.estimated) {
          r.usage.prompt_tokens = prompt_estimate;
          r.usage.completion_tokens = context::estimate_tokens(r.text);
          r.usage.cached_tokens = 0;
          r.usage.cache_write_tokens = 0;
        }
        if (r.model.empty()) r.model = m_profile.model;
        r.attempts = attempt;
        r.cost_usd = cost_usd(m_profile, r.usage);
        r.call_id = call_id;
        r.total_seconds = seconds_since(start);
        if (m_options.accounting) m_options.accounting->record(m_profile, params.purpose, r);
        Json event = {{"event", "response"},
                      {"call", call_id},
                      {"attempt", attempt},
                      {"status", outcome->status},
                      {"request_id", r.request_id},
                      {"model", r.model},
                      {"latency_s", r.latency_seconds},
                      {"first_byte_s", r.first_byte_seconds},
                      {"total_s", r.total_seconds},
                      {"finish_reason", r.finish_reason},
                      {"usage", usage_json(r.usage)},
                      {"cost_usd", r.cost_usd},
                      {"text", r.text}};
        if (!outcome->body.empty()) event["body"] = body_json(outcome->body);
        log(std::move(event));
        return r;
      }

      AttemptFailure f = std::move(outcome.error());
      if (f.error.cls == FailureClass::cancelled) return give_up(std::move(f), attempt);
      const bool last = !f.retry || attempt > m_profile.max_retries;
      const double jitter = m_options.jitter ? m_options.jitter() : default_jitter();
      const std::chrono::milliseconds delay =
          last ? std::chrono::milliseconds(0)
               : retry_delay(m_profile, attempt, jitter, f.retry_after);
      Json event = {{"event", "attempt_failed"},
                    {"call", call_id},
                    {"attempt", attempt},
                    {"class", failure_class_name(f.error.cls)},
                    {"http_status", f.error.http_status},
                    {"message", f.error.message}};
      if (!f.error.request_id.empty()) event["request_id"] = f.error.request_id;
      if (!f.body.empty()) event["body"] = body_json(f.body);
      if (f.retry_after)
        event["retry_after_s"] = static_cast<double>(f.retry_after->count()) / 1000.0;
      if (!last) event["retry_in_s"] = static_cast<double>(delay.count()) / 1000.0;
      log(std::move(event));
      if (last) return give_up(std::move(f), attempt);
      if (!sleep_unless_cancelled(delay, cancel_call, cancel_client)) {
        return give_up(cancelled("while waiting to retry"), attempt);
      }
    }
  }

 private:
  struct AttemptOk {
    ChatResponse response;
    int status = 0;
    std::string body;  // a non-streamed answer's body, for the transcript
  };

  std::expected<AttemptOk, AttemptFailure> attempt_once(const std::string& body, bool stream,
                                                        const CancelToken* cancel_call,
                                                        const CancelToken* cancel_client) {
    HttpRequest req;
    req.url = m_url;
    req.headers = m_provider->headers(m_api_key);
    req.body = body;
    req.connect_timeout = m_profile.connect_timeout;
    req.idle_timeout = m_profile.idle_timeout;
    req.total_timeout = m_profile.total_timeout;
    req.streaming = stream;
    req.cancel = cancel_call;
    req.cancel_other = cancel_client;

    std::unique_ptr<StreamDecoder> decoder;
    std::optional<SseParser> parser;
    std::string raw;  // the first bytes of a stream, in case the server answered with plain JSON
    if (stream) {
      decoder = m_provider->stream_decoder(m_host);
      parser.emplace([&decoder](const SseEvent& ev) { return decoder->on_event(ev); });
      req.on_data = [&](std::string_view chunk) {
        if (raw.size() < k_error_body_cap * 8)
          raw.append(chunk.substr(0, k_error_body_cap * 8 - raw.size()));
        return parser->feed(chunk);
      };
    }

    auto http = m_http.post(req);
    if (!http) return std::unexpected(classify_http_error(http.error()));
    const HttpResponse& r = *http;
    std::string request_id(r.header("x-request-id"));
    if (request_id.empty()) request_id = r.header("request-id");

    std::expected<ChatResponse, AttemptFailure> result;
    if (r.status < 200 || r.status >= 300) {
      result = std::unexpected(classify_status(r, m_host));
    } else if (!stream && r.content_type.find("text/event-stream") != std::string::npos) {
      // The server streamed although we did not ask: decode the events it sent.
      auto late = m_provider->stream_decoder(m_host);
      SseParser p([&late](const SseEvent& ev) { return late->on_event(ev); });
      p.feed(r.body);
      p.finish();
      result = late->finish(p.events());
    } else if (!stream) {
      result = m_provider->parse_body(r.body, m_host);
    } else if (parser->events() == 0 && r.content_type.find("json") != std::string::npos) {
      result = m_provider->parse_body(raw, m_host);  // the server ignored "stream": true
    } else {
      parser->finish();
      result = decoder->finish(parser->events());
    }
    if (!result) {
      if (result.error().error.request_id.empty()) result.error().error.request_id = request_id;
      return std::unexpected(std::move(result.error()));
    }
    AttemptOk ok;
    ok.response = std::move(*result);
    if (!request_id.empty()) ok.response.request_id = request_id;
    ok.response.latency_seconds = r.seconds;
    ok.response.first_byte_seconds = r.first_byte_seconds;
    ok.status = r.status;
    if (!stream) ok.body = r.body;
    return ok;
  }

  // What the user can do about a final failure, appended to its message.
  std::string hint(FailureClass cls) const {
    switch (cls) {
      case FailureClass::unauthorized:
        if (m_profile.api_key_env.empty())
          return " — this profile sends no key (api_key_env = \"\")";
        return fmt::format(" — check the key in ${} ({})", m_profile.api_key_env,
                           m_api_key.empty() ? "not set" : "set");
      case FailureClass::not_found:
        return fmt::format(" — model '{}' at {}", m_profile.model, redact(m_url));
      case FailureClass::transport:
      case FailureClass::timeout:
        return fmt::format(" — profile '{}' sends requests to {}", m_profile.name, redact(m_url));
      default:
        return {};
    }
  }

  void log(Json event) {
    if (!m_transcript) return;
    Status st = m_transcript->write(std::move(event));
    if (!st && !m_transcript_warned.exchange(true)) {
      // The answer matters more than its record: the call goes on, the problem is reported once.
      std::fprintf(stderr, "kope: warning: %s (further transcript errors are not shown)\n",
                   redact(st.error().message).c_str());
    }
  }

  Profile m_profile;
  ClientOptions m_options;
  std::string m_api_key;
  std::unique_ptr<Provider> m_provider;
  std::shared_ptr<Limiter> m_limiter;
  std::shared_ptr<TranscriptWriter> m_transcript;
  Json m_extra_body;
  std::string m_url;
  std::string m_host;
  HttpClient m_http;
  std::atomic<bool> m_transcript_warned{false};
};

}  // namespace

Result<std::unique_ptr<LlmClient>> make_client(const Profile& profile) {
  return make_client(profile, ClientOptions{});
}

Result<std::unique_ptr<LlmClient>> make_client(const Profile& profile,
                                               const ClientOptions& options) {
  KOPE_TRY(validate_profile(profile));
  std::unique_ptr<Provider> provider = make_provider(profile.provider);
  if (!provider)
    return fail(ErrorKind::config, "profile '{}': unknown provider '{}'", profile.name,
                profile.provider);

  const std::string url = endpoint_url(profile);
  std::string key;
  if (!profile.api_key_env.empty()) {
    key = util::get_env(profile.api_key_env.c_str()).value_or("");
    register_secret(key);
    if (key.empty() && !is_local_host(host_of(url))) {
      return fail(ErrorKind::config,
                  "profile '{}' sends requests to {}, which needs an API key: set ${} (or set "
                  "api_key_env = \"\" in "
                  "the profile for a server without authentication)",
                  profile.name, host_of(url), profile.api_key_env);
    }
  }

  Json extra = Json::object();
  if (!profile.extra_body_json.empty()) {
    extra = Json::parse(profile.extra_body_json, nullptr, false);
    if (extra.is_discarded() || !extra.is_object()) {
      return fail(ErrorKind::config, "profile '{}': extra_body must be a JSON object",
                  profile.name);
    }
  }

  std::shared_ptr<Limiter> limiter;
  if (options.share_limits) {
    std::string limits_key =
        fmt::format("{}|{}|{}|{}|{}|{}", profile.name, url, profile.model,
                    profile.requests_per_minute, profile.tokens_per_minute, profile.concurrency);
    limiter = shared_limiter(limits_key, profile.requests_per_minute, profile.tokens_per_minute,
                             profile.concurrency);
  } else {
    limiter = std::make_shared<Limiter>(profile.requests_per_minute, profile.tokens_per_minute,
                                        profile.concurrency);
  }

  std::shared_ptr<TranscriptWriter> transcript;
  if (!options.transcript.empty()) {
    KOPE_ASSIGN(transcript, TranscriptWriter::open(options.transcript));
  }
  return std::unique_ptr<LlmClient>(
      std::make_unique<HttpLlmClient>(profile, options, std::move(key), std::move(provider),
                                      std::move(limiter), std::move(transcript), std::move(extra)));
}

}  // namespace kope::llm
