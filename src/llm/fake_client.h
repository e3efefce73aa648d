// llm/fake_client.h — a scripted LlmClient for the tests of other modules (the agent loop,
// context assembly): no network, deterministic, with recorded requests and optional simulated
// latency and failures. Behaves like the real client towards its options: usage is estimated
// (and marked so) when a scripted reply gives none, cost comes from the profile's prices, calls
// are recorded in ClientOptions::accounting and written to ClientOptions::transcript, and
// cancellation is honoured. Thread-safe.
//
//   FakeClient llm;
//   llm.reply("```cpp\n...kernel...\n```").fail(FailureClass::context_length).reply("ok");
//   agent.run(llm, ...);
//   EXPECT_EQ(llm.requests().size(), 3u);
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kope/llm.h"

namespace kope::llm {

class TranscriptWriter;

class FakeClient final : public LlmClient {
 public:
  struct Request {
    std::vector<Message> messages;
    ChatParams params;
  };
  // Answers calls when the script is empty; `index` counts calls from 0.
  using Responder = std::function<LlmResult<ChatResponse>(const std::vector<Message>& messages,
                                                          const ChatParams& params, size_t index)>;

  // A profile for fakes: provider "openai", model "fake-model", base_url "http://fake.invalid".
  static Profile default_profile();

  explicit FakeClient(Profile profile = default_profile(), ClientOptions options = {});
  ~FakeClient() override;

  // Appends scripted outcomes, consumed one per call in order. A reply with all-zero usage gets
  // estimated usage (usage.estimated = true).
  FakeClient& reply(std::string text, Usage usage = {}, std::string finish_reason = "stop");
  FakeClient& reply(ChatResponse response);
  FakeClient& fail(FailureClass cls, std::string message = {}, int http_status = 0);
  // Used once the script is empty. Without one, a call on an empty script fails with
  // FailureClass::malformed and a message saying the script ran out.
  void set_responder(Responder responder);
  // Every call sleeps this long before answering (cancellation cuts it short).
  void set_latency(std::chrono::milliseconds latency);
  // Calls number n, 2n, 3n, ... (counting from 1) fail with `cls` instead of taking the script.
  void fail_every(int n, FailureClass cls);

  std::vector<Request> requests() const;
  size_t calls() const;
  size_t remaining() const;  // scripted outcomes not yet used

  LlmResult<ChatResponse> chat(const std::vector<Message>& messages,
                               const ChatParams& params) override;
  const Profile& profile() const override { return m_profile; }

 private:
  Profile m_profile;
  ClientOptions m_options;
  std::shared_ptr<TranscriptWriter> m_transcript;
  mutable std::mutex m_mutex;
  std::deque<LlmResult<ChatResponse>> m_script;
  Responder m_responder;
  std::chrono::milliseconds m_latency{0};
  int m_fail_every = 0;
  FailureClass m_fail_class = FailureClass::server_error;
  std::vector<Request> m_requests;
};

}  // namespace kope::llm
