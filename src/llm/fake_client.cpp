#include "llm/fake_client.h"

#include <atomic>
#include <cstdio>
#include <thread>

#include "llm/transcript.h"

namespace kope::llm {
using Json = nlohmann::ordered_json;
}

namespace kope::llm {

namespace {

std::atomic<uint64_t> g_fake_seq{0};

LlmError make_error(FailureClass cls, std::string message, int http_status = 0) {
  LlmError e;
  e.cls = cls;
  e.message = std::move(message);
  e.http_status = http_status;
  return e;
}

bool stopped(const ChatParams& params, const ClientOptions& options) {
  return (params.cancel && params.cancel->cancelled()) ||
         (options.cancel && options.cancel->cancelled());
}

}  // namespace

Profile FakeClient::default_profile() {
  Profile p;
  p.name = "fake";
  p.provider = "openai";
  p.model = "fake-model";
  p.base_url = "http://fake.invalid";
  p.api_key_env = "";
  p.source = "FakeClient";
  return p;
}

FakeClient::FakeClient(Profile profile, ClientOptions options)
    : m_profile(std::move(profile)), m_options(std::move(options)) {
  if (!m_options.transcript.empty()) {
    auto w = TranscriptWriter::open(m_options.transcript);
    if (w) {
      m_transcript = *w;
    } else {
      std::fprintf(stderr, "FakeClient: %s\n", w.error().message.c_str());
    }
  }
}

FakeClient::~FakeClient() = default;

FakeClient& FakeClient::reply(std::string text, Usage usage, std::string finish_reason) {
  ChatResponse r;
  r.text = std::move(text);
  r.usage = usage;
  r.finish_reason = std::move(finish_reason);
  return reply(std::move(r));
}

FakeClient& FakeClient::reply(ChatResponse response) {
  std::lock_guard lock(m_mutex);
  m_script.emplace_back(std::move(response));
  return *this;
}

FakeClient& FakeClient::fail(FailureClass cls, std::string message, int http_status) {
  LlmError e =
      make_error(cls,
                 message.empty() ? fmt::format("scripted {} failure", failure_class_name(cls))
                                 : std::move(message),
                 http_status);
  std::lock_guard lock(m_mutex);
  m_script.emplace_back(std::unexpected(std::move(e)));
  return *this;
}

void FakeClient::set_responder(Responder responder) {
  std::lock_guard lock(m_mutex);
  m_responder = std::move(responder);
}

void FakeClient::set_latency(std::chrono::milliseconds latency) {
  std::lock_guard lock(m_mutex);
  m_latency = latency;
}

void FakeClient::fail_every(int n, FailureClass cls) {
  std::lock_guard lock(m_mutex);
  m_fail_every = n;
  m_fail_class = cls;
}

std::vector<FakeClient::Request> FakeClient::requests() const {
  std::lock_guard lock(m_mutex);
  return m_requests;
}

size_t FakeClient::calls() const {
  std::lock_guard lock(m_mutex);
  return m_requests.size();
}

size_t FakeClient::remaining() const {
  std::lock_guard lock(m_mutex);
  return m_script.size();
}

LlmResult<ChatResponse> FakeClient::chat(const std::vector<Message>& messages,
                                         const ChatParams& params) {
  const auto start = std::chrono::steady_clock::now();
  const std::string call_id = fmt::format("f{:06}", ++g_fake_seq);
  LlmResult<ChatResponse> outcome;
  std::chrono::milliseconds latency;
  Responder responder;
  size_t index = 0;
  {
    std::lock_guard lock(m_mutex);
    index = m_requests.size();
    m_requests.push_back(Request{messages, params});
    latency = m_latency;
    if (m_fail_every > 0 && (index + 1) % static_cast<size_t>(m_fail_every) == 0) {
      outcome = std::unexpected(
          make_error(m_fail_class, fmt::format("simulated {} failure (every {} calls)",
                                               failure_class_name(m_fail_class), m_fail_every)));
    } else if (!m_script.empty()) {
      outcome = std::move(m_script.front());
      m_script.pop_front();
    } else if (m_responder) {
      responder = m_responder;
    } else {
      outcome = std::unexpected(
          make_error(FailureClass::malformed,
                     fmt::format("FakeClient: no scripted response left for call #{}", index + 1)));
    }
  }
  if (responder) outcome = responder(messages, params, index);

  if (m_transcript) {
    Json msgs = Json::array();
    for (const auto& m : messages)
      msgs.push_back({{"role", role_name(m.role)}, {"content", m.content}});
    (void)m_transcript->write({{"event", "request"},
                               {"call", call_id},
                               {"profile", m_profile.name},
                               {"provider", "fake"},
                               {"model", m_profile.model},
                               {"purpose", params.purpose},
                               {"body", {{"messages", msgs}}}});
  }

  // Simulated latency, cut short by cancellation.
  const auto until = start + latency;
  while (std::chrono::steady_clock::now() < until && !stopped(params, m_options)) {
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        until - std::chrono::steady_clock::now(), std::chrono::milliseconds(10)));
  }
  if (stopped(params, m_options))
    outcome = std::unexpected(make_error(FailureClass::cancelled, "cancelled"));
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  if (!outcome) {
    LlmError e = std::move(outcome.error());
    e.call_id = call_id;
    if (m_options.accounting) m_options.accounting->record_failure(m_profile, params.purpose, e);
    if (m_transcript) {
      (void)m_transcript->write({{"event", "failure"},
                                 {"call", call_id},
                                 {"attempts", e.attempts},
                                 {"class", failure_class_name(e.cls)},
                                 {"http_status", e.http_status},
                                 {"message", e.message}});
    }
    return std::unexpected(std::move(e));
  }
  ChatResponse r = std::move(*outcome);
  if (r.usage.prompt_tokens == 0 && r.usage.completion_tokens == 0 && r.usage.cached_tokens == 0) {
    r.usage.prompt_tokens = estimate_tokens(messages);
    r.usage.completion_tokens = estimate_tokens(r.text);
    r.usage.estimated = true;
  }
  if (r.model.empty()) r.model = m_profile.model;
  if (r.finish_reason.empty()) r.finish_reason = "stop";
  if (r.request_id.empty()) r.request_id = call_id;
  if (r.latency_seconds == 0) r.latency_seconds = elapsed;
  r.total_seconds = elapsed;
  r.call_id = call_id;
  r.cost_usd = cost_usd(m_profile, r.usage);
  if (m_options.accounting) m_options.accounting->record(m_profile, params.purpose, r);
  if (m_transcript) {
    (void)m_transcript->write({{"event", "response"},
                               {"call", call_id},
                               {"attempt", 1},
                               {"model", r.model},
                               {"latency_s", r.latency_seconds},
                               {"finish_reason", r.finish_reason},
                               {"usage",
                                {{"prompt", r.usage.prompt_tokens},
                                 {"completion", r.usage.completion_tokens},
                                 {"cached", r.usage.cached_tokens},
                                 {"estimated", r.usage.estimated}}},
                               {"cost_usd", r.cost_usd},
                               {"text", r.text}});
  }
  return r;
}

}  // namespace kope::llm
