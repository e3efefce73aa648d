// The real clients against a scripted HTTP server on 127.0.0.1: successes, retries, timeouts,
// broken connections and bodies, streams, provider error bodies, limits, cancellation, and the
// transcript and accounting each call leaves behind.
#include <gtest/gtest.h>

#include <cstdlib>
#include <thread>

#include "kope/llm.h"
#include "llm/provider.h"
#include "llm/test_server.h"
#include "util/fs.h"
#include "util/strings.h"

namespace kope::llm {
namespace {

using namespace std::chrono_literals;
using test::Connection;
using test::ReceivedRequest;
using test::TestServer;

constexpr const char* k_key_env = "KOPE_LLM_TEST_KEY";
constexpr const char* k_key = "sk-test-SECRETkey0123456789abcdefXYZ";

double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v :
         {"http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"}) {
      ::unsetenv(v);
    }
    ::setenv(k_key_env, k_key, 1);
    auto d = util::TempDir::create("kope-llm-test");
    ASSERT_TRUE(d) << d.error().message;
    dir.emplace(std::move(*d));
    transcript = dir->path() / "transcript.jsonl";
    accounting = std::make_shared<RunAccounting>();
  }

  // Whatever a test did, its transcript is valid JSONL without the key (transcript_lines checks).
  void TearDown() override { transcript_lines(); }

  // Short timeouts and fast, deterministic backoff: 20 ms * 2^(n-1) * 0.75.
  Profile profile(std::string provider = "openai") const {
    Profile p;
    p.name = "test-" + provider;
    p.provider = provider;
    p.base_url = server.url() + "/v1";
    p.model = provider == "anthropic" ? "claude-test" : "test-model";
    p.api_key_env = k_key_env;
    p.connect_timeout = 1000ms;
    p.idle_timeout = 400ms;
    p.total_timeout = 1500ms;
    p.max_retries = 2;
    p.retry_base_delay = 20ms;
    p.retry_max_delay = 100ms;
    p.retry_after_cap = 5000ms;
    p.price_input_per_mtok = 1.0;
    p.price_output_per_mtok = 4.0;
    p.concurrency = 8;
    return p;
  }

  std::unique_ptr<LlmClient> client(const Profile& p) {
    ClientOptions o;
    o.transcript = transcript;
    o.accounting = accounting;
    o.share_limits = false;
    o.jitter = [] { return 0.5; };
    auto c = make_client(p, o);
    EXPECT_TRUE(c) << c.error().message;
    return std::move(*c);
  }

  LlmResult<ChatResponse> ask(LlmClient& c, ChatParams params = {}) {
    std::vector<Message> m = {{Message::Role::system, "You write kernels."},
                              {Message::Role::user, "Say hello."}};
    return c.chat(m, params);
  }

  std::vector<Json> transcript_lines() const {
    std::vector<Json> out;
    auto text = util::read_file(transcript);
    if (!text) return out;
    EXPECT_EQ(text->find(k_key), std::string::npos) << "the key leaked into the transcript";
    for (const auto& line : util::split(*text, '\n')) {
      if (line.empty()) continue;
      Json j = Json::parse(line, nullptr, false);
      EXPECT_FALSE(j.is_discarded()) << line;
      out.push_back(j);
    }
    return out;
  }

  std::vector<std::string> events() const {
    std::vector<std::string> out;
    for (const auto& j : transcript_lines()) out.push_back(j["event"].get<std::string>());
    return out;
  }

  TestServer server;
  std::optional<util::TempDir> dir;
  std::filesystem::path transcript;
  std::shared_ptr<RunAccounting> accounting;
};

// ---- OpenAI-compatible --------------------------------------------------------------------------

TEST_F(ClientTest, SuccessCarriesTextUsageCostIdsAndSendsTheRightRequest) {
  server.script({test::reply(200, test::openai_body("Hello!", 120, 30, "stop", 100),
                             {"x-request-id: req_abc"})});
  auto c = client(profile());
  ChatParams params;
  params.seed = 7;
  params.purpose = "draft";
  params.max_output_tokens = 64;
  auto r = ask(*c, params);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->text, "Hello!");
  EXPECT_EQ(r->finish_reason, "stop");
  EXPECT_EQ(r->usage.prompt_tokens, 120);
  EXPECT_EQ(r->usage.completion_tokens, 30);
  EXPECT_EQ(r->usage.cached_tokens, 100);
  EXPECT_FALSE(r->usage.estimated);
  EXPECT_EQ(r->request_id, "req_abc");
  EXPECT_EQ(r->model, "test-model");
  EXPECT_EQ(r->attempts, 1);
  EXPECT_NEAR(r->cost_usd, (120 * 1.0 + 30 * 4.0) / 1e6, 1e-12);
  EXPECT_GT(r->latency_seconds, 0);
  EXPECT_FALSE(r->call_id.empty());

  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].method, "POST");
  EXPECT_EQ(reqs[0].path, "/v1/chat/completions");
  EXPECT_EQ(reqs[0].header("authorization"), std::string("Bearer ") + k_key);
  EXPECT_EQ(reqs[0].header("content-type"), "application/json");
  Json body = Json::parse(reqs[0].body);
  EXPECT_EQ(body["model"], "test-model");
  EXPECT_EQ(body["messages"][0]["role"], "system");
  EXPECT_EQ(body["messages"][1]["content"], "Say hello.");
  EXPECT_EQ(body["max_tokens"], 64);
  EXPECT_EQ(body["seed"], 7);
  EXPECT_FALSE(body.contains("stream"));

  auto lines = transcript_lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["event"], "request");
  EXPECT_EQ(lines[0]["purpose"], "draft");
  EXPECT_EQ(lines[0]["body"]["messages"][1]["content"], "Say hello.");
  EXPECT_EQ(lines[1]["event"], "response");
  EXPECT_EQ(lines[1]["call"], lines[0]["call"]);
  EXPECT_EQ(lines[1]["usage"]["prompt"], 120);
  EXPECT_EQ(lines[1]["text"], "Hello!");
  EXPECT_TRUE(lines[1].contains("ts"));

  UsageTotals t = accounting->total();
  EXPECT_EQ(t.calls, 1);
  EXPECT_EQ(t.prompt_tokens, 120);
  EXPECT_EQ(t.cached_tokens, 100);
  EXPECT_EQ(accounting->by_purpose().at("draft").completion_tokens, 30);
}

TEST_F(ClientTest, OpenAiCachedTokensAreAccountedAndTheContentStaysAPlainString) {
  server.script({test::reply(200, test::openai_body("ok", 1200, 30, "stop", 1024))});
  std::vector<Message> m = {{Message::Role::system, "You write kernels."},
                            {Message::Role::user, "OP: softmax\nattempt 3"}};
  m[1].cache_prefix = 12;
  auto r = client(profile())->chat(m, {});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->usage.prompt_tokens, 1200);
  EXPECT_EQ(r->usage.cached_tokens, 1024);
  EXPECT_EQ(r->usage.cache_write_tokens, 0);
  EXPECT_EQ(accounting->total().cached_tokens, 1024);
  Json body = Json::parse(server.requests().at(0).body);
  EXPECT_EQ(body["messages"][0]["content"], "You write kernels.");
  EXPECT_EQ(body["messages"][1]["content"], "OP: softmax\nattempt 3");
  EXPECT_EQ(body.dump().find("cache_control"), std::string::npos);

  // DeepSeek's spelling.
  server.script({test::reply(
      200,
      R"({"id":"d","model":"m","choices":[{"message":{"content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":500,"completion_tokens":2,"prompt_cache_hit_tokens":448,"prompt_cache_miss_tokens":52}})")});
  auto d = client(profile())->chat(m, {});
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(d->usage.cached_tokens, 448);
  EXPECT_EQ(accounting->total().cached_tokens, 1024 + 448);
  EXPECT_FALSE(d->usage.estimated);

  // A server that says its counts are estimates (the development bridge) is taken at its word.
  server.script({test::reply(
      200,
      R"({"id":"b","model":"bridge","choices":[{"message":{"content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":900,"completion_tokens":20,"total_tokens":920,"estimated":true}})")});
  auto b = client(profile())->chat(m, {});
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_TRUE(b->usage.estimated);
  EXPECT_GT(b->usage.prompt_tokens, 0);
  EXPECT_NE(b->usage.prompt_tokens, 900) << "kope's own estimate replaces the server's";
  EXPECT_EQ(b->usage.cached_tokens, 0);
}

TEST_F(ClientTest, NoKeyMeansNoAuthorizationHeaderAndExtraBodyApplies) {
  server.script({test::reply(200, test::openai_body("ok", 1, 1))});
  Profile p = profile();
  p.api_key_env = "";
  p.extra_body_json = R"({"top_k": 20})";
  p.omit_params = {"temperature"};
  auto r = ask(*client(p));
  ASSERT_TRUE(r) << r.error().message;
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_FALSE(reqs[0].has_header("authorization"));
  Json body = Json::parse(reqs[0].body);
  EXPECT_EQ(body["top_k"], 20);
  EXPECT_FALSE(body.contains("temperature"));
}

TEST_F(ClientTest, RateLimitedHonoursRetryAfterSeconds) {
  server.script(
      {test::reply(429,
                   R"({"error":{"message":"Rate limit reached","code":"rate_limit_exceeded"}})",
                   {"Retry-After: 1"}),
       test::reply(200, test::openai_body("late", 5, 2))});
  auto c = client(profile());
  auto start = std::chrono::steady_clock::now();
  auto r = ask(*c);
  double s = since(start);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->attempts, 2);
  EXPECT_GE(s, 0.95);  // waited what the server asked, not the 15 ms backoff
  EXPECT_LT(s, 4.0);
  EXPECT_EQ(server.request_count(), 2u);
  auto lines = transcript_lines();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1]["event"], "attempt_failed");
  EXPECT_EQ(lines[1]["class"], "rate_limited");
  EXPECT_EQ(lines[1]["http_status"], 429);
  EXPECT_DOUBLE_EQ(lines[1]["retry_in_s"].get<double>(), 1.0);
  EXPECT_EQ(lines[1]["body"]["error"]["code"], "rate_limit_exceeded");
  EXPECT_EQ(lines[2]["event"], "response");
  EXPECT_EQ(accounting->total().attempts, 2);
}

TEST_F(ClientTest, RetryAfterIsCappedAndExhaustedRetriesReportRateLimited) {
  server.script({test::reply(429, R"({"error":{"message":"slow down"}})", {"Retry-After: 3600"})});
  Profile p = profile();
  p.retry_after_cap = 150ms;
  p.max_retries = 2;
  auto start = std::chrono::steady_clock::now();
  auto r = ask(*client(p));
  double s = since(start);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().cls, FailureClass::rate_limited);
  EXPECT_EQ(r.error().http_status, 429);
  EXPECT_EQ(r.error().attempts, 3);
  EXPECT_TRUE(r.error().retryable());
  EXPECT_EQ(server.request_count(), 3u);
  EXPECT_GE(s, 0.29);  // two capped waits of 0.15 s
  EXPECT_LT(s, 3.0);
  EXPECT_EQ(events(), (std::vector<std::string>{"request", "attempt_failed", "attempt_failed",
                                                "attempt_failed", "failure"}));
  EXPECT_EQ(accounting->total().failed_calls, 1);
  EXPECT_EQ(accounting->total().failures.at("rate_limited"), 1);
}

TEST_F(ClientTest, ServerErrorThenSuccessBacksOffBriefly) {
  server.script({test::reply(500, R"({"error":{"message":"internal"}})"),
                 test::reply(200, test::openai_body("ok", 3, 1))});
  auto start = std::chrono::steady_clock::now();
  auto r = ask(*client(profile()));
  double s = since(start);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->attempts, 2);
  EXPECT_GE(s, 0.014);  // backoff 20 ms * 0.75
  EXPECT_LT(s, 2.0);
  auto lines = transcript_lines();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1]["class"], "server_error");
  EXPECT_DOUBLE_EQ(lines[1]["retry_in_s"].get<double>(), 0.015);
}

TEST_F(ClientTest, PersistentServerErrorGivesUpAfterMaxRetries) {
  server.script({test::reply(503, "Service Unavailable", {}, "text/plain")});
  auto r = ask(*client(profile()));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().cls, FailureClass::server_error);
  EXPECT_EQ(r.error().http_status, 503);
  EXPECT_EQ(r.error().attempts, 3);
  EXPECT_EQ(server.request_count(), 3u);
  EXPECT_NE(r.error().message.find("Service Unavailable"), std::string::npos);
}

TEST_F(ClientTest, ServerThatNeverAnswersTimesOut) {
  server.script({[](Connection& c, const ReceivedRequest&) { c.pause(10s); }});
  Profile p = profile();
  p.total_timeout = 500ms;
  p.max_retries = 1;
  auto start = std::chrono::steady_clock::now();
  auto r = ask(*client(p));
  double s = since(start);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().cls, FailureClass::timeout);
  EXPECT_EQ(r.error().attempts, 2);
  EXPECT_NE(r.error().message.find("total timeout"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("127.0.0.1"), std::string::npos);
  EXPECT_GE(s, 0.95);
  EXPECT_LT(s, 4.0);
  EXPECT_EQ(server.request_count(), 2u);
}

TEST_F(ClientTest, ConnectionResetIsATransportErrorAndRetried) {
  server.script({[](Connection& c, const ReceivedRequest&) { c.reset(); },
                 test::reply(200, test::openai_body("after reset", 2, 2))});
  auto r = ask(*client(profile()));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->text, "after reset");
  EXPECT_EQ(r->attempts, 2);
  auto lines = transcript_lines();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1]["class"], "transport");

  server.script({[](Connection& c, const ReceivedRequest&) { c.reset(); }});
  Profile p = profile();
  p.max_retries = 0;
  auto e = ask(*client(p));
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().cls, FailureClass::transport);
  EXPECT_EQ(e.error().attempts, 1);
}

TEST_F(ClientTest, UnreachableServerIsATransportError) {
  int port;
  {
    TestServer gone;  // bound, then closed: nothing listens there any more
    port = gone.port();
  }
  Profile p = profile();
  // A key in the URL's query string (Azure/Gemini style) must not show anywhere either.
  p.base_url = fmt::format("http://127.0.0.1:{}/v1?api-key=querySECRET0123456789", port);
  p.max_retries = 1;
  auto r = ask(*client(p));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().cls, FailureClass::transport);
  EXPECT_EQ(r.error().attempts, 2);
  EXPECT_NE(r.error().message.find("unreachable"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("/v1/chat/completions?api-key=[REDACTED]"), std::string::npos)
      << r.error().message;
  auto text = util::read_file(transcript);
  ASSERT_TRUE(text);
  EXPECT_EQ(text->find("querySECRET"), std::string::npos);
  EXPECT_NE(text->find("api-key=[REDACTED]"), std::string::npos);
}

TEST_F(ClientTest, ClientWideCancelStopsTheBackoffWait) {
  server.script({test::reply(500, R"({"error":{"message":"down"}})")});
  Profile p = profile();
  p.retry_base_delay = 5000ms;
  p.retry_max_delay = 5000ms;
  ClientOptions o;
  auto cancel = std::make_shared<CancelToken>();
  o.cancel = cancel;
  o.transcript = transcript;
  o.share_limits = false;
  auto c = make_client(p, o);
  ASSERT_TRUE(c);
  std::thread t([&] {
    std::this_thread::sleep_for(300ms);
    cancel->cancel();
  });
  auto start = std::chrono::steady_clock::now();
  auto r = ask(**c);
  double s = since(start);
  t.join();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().cls, FailureClass::cancelled);
  EXPECT_NE(r.error().message.find("while waiting to retry"), std::string::npos)
      << r.error().message;
  EXPECT_EQ(r.error().attempts, 1);
  EXPECT_LT(s, 2.0);
  EXPECT_EQ(server.request_count(), 1u);
}

TEST_F(ClientTest, TruncatedBodyIsMalformedAndRetried) {
  auto truncated = [](Connection& c, const ReceivedRequest&) {
    c.send(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 400\r\nConnection: "
        "close\r\n\r\n");
    c.send(R"({"id":"chatcmpl-1","choices":[{"message":{"content":"cut)");
    c.close();
  };
  server.script({truncated, test::reply(200, test::openai_body("whole", 4, 4))});
  auto r = ask(*client(profile()));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->attempts, 2);
  auto lines = transcript_lines();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1]["class"], "malformed");

  server.script({truncated});
  Profile p = profile();
  p.max_retries = 0;
  auto e = ask(*client(p));
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().cls, FailureClass::malformed);
  EXPECT_NE(e.error().message.find("truncated"), std::string::npos) << e.error().message;
}

TEST_F(ClientTest, InvalidJsonAndMissingChoicesAreMalformedAndNotRetried) {
  server.script({test::reply(200, "<html>proxy login</html>", {}, "text/html")});
  auto r = ask(*client(profile()));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().cls, FailureClass::malformed);
  EXPECT_EQ(r.error().attempts, 1);
  EXPECT_EQ(server.request_count(), 1u);
  EXPECT_NE(r.error().message.find("invalid JSON"), std::string::npos);
  EXPECT_NE(r.error().message.find("proxy login"), std::string::npos);

  server.script({test::reply(200, R"({"id":"x","object":"chat.completion"})")});
  r = ask(*client(profile()));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().cls, FailureClass::malformed);
  EXPECT_NE(r.error().message.find("no choices"), std::string::npos);
}

TEST_F(ClientTest, MissingUsageIsEstimatedAndMarked) {
  server.script({test::reply(
      200,
      R"({"id":"x","model":"m","choices":[{"message":{"content":"Hello, world!"},"finish_reason":"stop"}]})")});
  auto r = ask(*client(profile()));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->usage.estimated);
  EXPECT_EQ(r->usage.completion_tokens, 4);
  EXPECT_EQ(r->usage.prompt_tokens,
            estimate_tokens(std::vector<Message>{{Message::Role::system, "You write kernels."},
                                                 {Message::Role::user, "Say hello."}}));
  EXPECT_EQ(accounting->total().estimated_calls, 1);
  EXPECT_EQ(transcript_lines().back()["usage"]["estimated"], true);
}

TEST_F(ClientTest, StreamedAnswerEndingInDone) {
  server.script({[](Connection& c, const ReceivedRequest&) {
    c.start_stream({"x-request-id: req_stream"});
    c.event(
        R"({"id":"s1","model":"test-model","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})");
    c.event(R"({"id":"s1","choices":[{"index":0,"delta":{"content":"Hel"}}]})");
    c.pause(50ms);
    c.event(R"({"id":"s1","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":null}]})");
    c.event(R"({"id":"s1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]})");
    c.event(
        R"({"id":"s1","choices":[],"usage":{"prompt_tokens":11,"completion_tokens":2,"total_tokens":13}})");
    c.event("[DONE]");
    c.close();
  }});
  Profile p = profile();
  p.stream = true;
  auto r = ask(*client(p));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->text, "Hello");
  EXPECT_EQ(r->finish_reason, "stop");
  EXPECT_EQ(r->usage.prompt_tokens, 11);
  EXPECT_EQ(r->usage.completion_tokens, 2);
  EXPECT_FALSE(r->usage.estimated);
  EXPECT_EQ(r->request_id, "req_stream");
  EXPECT_GT(r->latency_seconds, r->first_byte_seconds);
  Json body = Json::parse(server.requests().at(0).body);
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"]["include_usage"], true);
}

TEST_F(ClientTest, StreamThatStallsHitsTheIdleTimeout) {
  server.script({[](Connection& c, const ReceivedRequest&) {
    c.start_stream();
    c.event(R"({"choices":[{"index":0,"delta":{"content":"I will now"}}]})");
    c.pause(10s);
  }});
  Profile p = profile();
  p.stream = true;
  p.idle_timeout = 300ms;
  p.total_timeout = 5000ms;
  p.max_retries = 0;
  auto start = std::chrono::steady_clock::now();
  auto r = ask(*client(p));
  double s = since(start);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().cls, FailureClass::timeout);
  EXPECT_NE(r.error().message.find("idle timeout"), std::string::npos) << r.error().message;
  EXPECT_GE(s, 0.28);
  EXPECT_LT(s, 3.0);
}

TEST_F(ClientTest, StreamEndingWithoutDoneIsTruncated) {
  auto cut = [](Connection& c, const ReceivedRequest&) {
    c.start_stream();
    c.event(R"({"choices":[{"index":0,"delta":{"content":"half an ans"}}]})");
    c.close();
  };
  server.script({cut});
  Profile p = profile();
  p.stream = true;
  p.max_retries = 1;
  auto r = ask(*client(p));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().cls, FailureClass::malformed);
  EXPECT_EQ(r.error().attempts, 2);  // truncation is retried
  EXPECT_NE(r.error().message.find("without a finish_reason or [DONE]"), std::string::npos)
      << r.error().message;
}

TEST_F(ClientTest, StreamRequestAnsweredWithPlainJsonStillWorks) {
  server.script({test::reply(200, test::openai_body("not streamed", 3, 2))});
  Profile p = profile();
  p.stream = true;
  auto r = ask(*client(p));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->text, "not streamed");
  EXPECT_EQ(r->usage.completion_tokens, 2);
}

TEST_F(ClientTest, UnrequestedStreamIsDecodedToo) {
  server.script({[](Connection& c, const ReceivedRequest&) {
    c.start_stream();
    c.event(
        R"({"choices":[{"index":0,"delta":{"content":"streamed anyway"},"finish_reason":"stop"}]})");
    c.event("[DONE]");
    c.close();
  }});
  auto r = ask(*client(profile()));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->text, "streamed anyway");
  EXPECT_TRUE(r->usage.estimated);
}

TEST_F(ClientTest, ErrorInsideAStreamIsClassified) {
  server.script({[](Connection& c, const ReceivedRequest&) {
    c.start_stream();
    c.event(
        R"({"error":{"message":"This model's maximum context length is 4096 tokens","code":"context_length_exceeded"}})");
    c.close();
  }});
  Profile p = profile();
  p.stream = true;
  auto r = ask(*client(p));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().cls, FailureClass::context_length);
  EXPECT_EQ(server.request_count(), 1u);
}

TEST_F(ClientTest, UnauthorizedWithTheKeyEchoedNeverLeaksIt) {
  std::string body = fmt::format(
      R"({{"error":{{"message":"Incorrect API key provided: {}. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","code":"invalid_api_key"}}}})",
      k_key);
  server.script({test::reply(401, body)});
  auto r = ask(*client(profile()));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().cls, FailureClass::unauthorized);
  EXPECT_EQ(r.error().http_status, 401);
  EXPECT_EQ(r.error().attempts, 1);
  EXPECT_FALSE(r.error().retryable());
  EXPECT_EQ(r.error().message.find(k_key), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("invalid_api_key"), std::string::npos);
  EXPECT_NE(r.error().message.find(std::string("$") + k_key_env + " (set)"), std::string::npos)
      << r.error().message;
  auto lines = transcript_lines();  // asserts the key is absent from the file
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[2]["event"], "failure");
}

TEST_F(ClientTest, ContextLengthErrorIsNotRetried) {
  server.script({test::reply(
      400,
      R"({"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9100 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}})")});
  auto r = ask(*client(profile()));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().cls, FailureClass::context_length);
  EXPECT_EQ(r.error().http_status, 400);
  EXPECT_EQ(r.error().attempts, 1);
  EXPECT_EQ(server.request_count(), 1u);
  EXPECT_NE(r.error().message.find("maximum context length is 8192"), std::string::npos);
}

TEST_F(ClientTest, UnknownModelIsNotFoundAndNamesTheModel) {
  server.script({test::reply(
      404,
      R"({"error":{"message":"The model `test-model` does not exist","type":"invalid_request_error","code":"model_not_found"}})")});
  auto r = ask(*client(profile()));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().cls, FailureClass::not_found);
  EXPECT_EQ(r.error().attempts, 1);
  EXPECT_NE(r.error().message.find("model 'test-model' at http://127.0.0.1"), std::string::npos)
      << r.error().message;
}

TEST_F(ClientTest, ContentFilterFinishReason) {
  server.script({test::reply(200, test::openai_body("", 10, 0, "content_filter"))});
  auto r = ask(*client(profile()));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().cls, FailureClass::content_filtered);
  EXPECT_EQ(r.error().attempts, 1);
}

TEST_F(ClientTest, CancellationStopsAWaitingCall) {
  server.script({[](Connection& c, const ReceivedRequest&) { c.pause(10s); }});
  Profile p = profile();
  p.total_timeout = 8000ms;
  auto c = client(p);
  auto cancel = std::make_shared<CancelToken>();
  ChatParams params;
  params.cancel = cancel;
  std::thread t([&] {
    std::this_thread::sleep_for(200ms);
    cancel->cancel();
  });
  auto start = std::chrono::steady_clock::now();
  auto r = ask(*c, params);
  double s = since(start);
  t.join();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().cls, FailureClass::cancelled);
  EXPECT_GE(s, 0.18);
  EXPECT_LT(s, 2.0);
  EXPECT_EQ(events().back(), "failure");
}

TEST_F(ClientTest, ConcurrencyCapIsSharedByAllCallers) {
  server.script({[](Connection& c, const ReceivedRequest&) {
    c.pause(120ms);
    c.respond(200, test::openai_body("ok", 1, 1));
  }});
  Profile p = profile();
  p.concurrency = 2;
  p.total_timeout = 5000ms;
  auto c = client(p);
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&] {
      if (ask(*c)) ++ok;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 6);
  EXPECT_EQ(server.max_concurrent(), 2);
  EXPECT_EQ(accounting->total().calls, 6);
}

TEST_F(ClientTest, ClientsOfOneProfileShareLimitsWhenAsked) {
  server.script({[](Connection& c, const ReceivedRequest&) {
    c.pause(120ms);
    c.respond(200, test::openai_body("ok", 1, 1));
  }});
  Profile p = profile();
  p.name = "shared-limits-test";
  p.concurrency = 1;
  p.total_timeout = 5000ms;
  ClientOptions o;  // share_limits defaults to true
  auto a = make_client(p, o);
  auto b = make_client(p, o);
  ASSERT_TRUE(a && b);
  std::thread ta([&] { EXPECT_TRUE(ask(**a)); });
  std::thread tb([&] { EXPECT_TRUE(ask(**b)); });
  ta.join();
  tb.join();
  EXPECT_EQ(server.max_concurrent(), 1);
}

TEST_F(ClientTest, RequestRateLimitSpacesCalls) {
  server.script({test::reply(200, test::openai_body("ok", 1, 1))});
  Profile p = profile();
  p.requests_per_minute = 600;  // 10/s, a bucket of 10
  auto c = client(p);
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 13; ++i) ASSERT_TRUE(ask(*c));
  EXPECT_GE(since(start), 0.25);  // 3 beyond the bucket at 10/s
}

// ---- Anthropic ----------------------------------------------------------------------------------

TEST_F(ClientTest, AnthropicSuccessUsesItsHeadersSystemFieldAndUsage) {
  server.script({test::reply(
      200,
      R"({"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"Hi "},{"type":"text","text":"there"}],"stop_reason":"end_turn","usage":{"input_tokens":20,"cache_read_input_tokens":80,"cache_creation_input_tokens":5,"output_tokens":7}})",
      {"request-id: req_anth"})});
  auto r = ask(*client(profile("anthropic")));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->text, "Hi there");
  EXPECT_EQ(r->finish_reason, "stop");
  EXPECT_EQ(r->usage.prompt_tokens, 105);
  EXPECT_EQ(r->usage.cached_tokens, 80);
  EXPECT_EQ(r->usage.completion_tokens, 7);
  EXPECT_EQ(r->request_id, "req_anth");
  auto req = server.requests().at(0);
  EXPECT_EQ(req.path, "/v1/messages");
  EXPECT_EQ(req.header("x-api-key"), k_key);
  EXPECT_EQ(req.header("anthropic-version"), "2023-06-01");
  EXPECT_FALSE(req.has_header("authorization"));
  Json body = Json::parse(req.body);
  EXPECT_EQ(body["system"], "You write kernels.");
  ASSERT_EQ(body["messages"].size(), 1u);
  EXPECT_EQ(body["messages"][0]["role"], "user");
  EXPECT_TRUE(body.contains("max_tokens"));
  EXPECT_FALSE(body.contains("seed"));
}

// The prompt shape of issue 28: system, then a user message whose first bytes are the per-op
// part every call of the op repeats, then the changing tail.
std::vector<Message> cached_prompt(const std::string& prefix, const std::string& tail) {
  Message user{Message::Role::user, prefix + tail};
  user.cache_prefix = prefix.size();
  return {{Message::Role::system, "You write kernels."}, user};
}

TEST_F(ClientTest, AnthropicCacheBreakpointsAndCacheReadsAndWritesAreAccounted) {
  server.script({test::reply(
      200,
      R"({"id":"msg_c","type":"message","model":"claude-test","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":40,"cache_read_input_tokens":900,"cache_creation_input_tokens":60,"output_tokens":12}})")});
  ChatParams params;
  params.purpose = "draft";
  auto r = client(profile("anthropic"))->chat(cached_prompt("OP: softmax\n", "attempt 3"), params);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->usage.prompt_tokens, 1000);  // input + cache reads + cache writes
  EXPECT_EQ(r->usage.cached_tokens, 900);
  EXPECT_EQ(r->usage.cache_write_tokens, 60);
  EXPECT_EQ(r->usage.completion_tokens, 12);
  EXPECT_FALSE(r->usage.estimated);

  Json body = Json::parse(server.requests().at(0).body);
  ASSERT_TRUE(body["system"].is_array()) << body.dump();
  ASSERT_EQ(body["system"].size(), 1u);
  EXPECT_EQ(body["system"][0]["type"], "text");
  EXPECT_EQ(body["system"][0]["text"], "You write kernels.");
  EXPECT_EQ(body["system"][0]["cache_control"]["type"], "ephemeral");
  const Json& content = body["messages"][0]["content"];
  ASSERT_TRUE(content.is_array()) << body.dump();
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(content[0]["text"], "OP: softmax\n");
  EXPECT_EQ(content[0]["cache_control"]["type"], "ephemeral");
  EXPECT_EQ(content[1]["text"], "attempt 3");
  EXPECT_FALSE(content[1].contains("cache_control"));

  UsageTotals t = accounting->total();
  EXPECT_EQ(t.cached_tokens, 900);
  EXPECT_EQ(t.cache_write_tokens, 60);
  EXPECT_EQ(accounting->by_purpose().at("draft").cache_write_tokens, 60);
  auto lines = transcript_lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1]["usage"]["cached"], 900);
  EXPECT_EQ(lines[1]["usage"]["cache_write"], 60);

  // A prompt without cache_prefix goes out as before: plain strings, no breakpoint.
  server.script({test::reply(200, test::anthropic_body("fine", 3, 1))});
  ASSERT_TRUE(ask(*client(profile("anthropic"))));
  Json plain = Json::parse(server.requests().at(1).body);
  EXPECT_EQ(plain["system"], "You write kernels.");
  EXPECT_EQ(plain["messages"][0]["content"], "Say hello.");
  EXPECT_EQ(plain.dump().find("cache_control"), std::string::npos);
}

TEST_F(ClientTest, AnthropicStreamedCacheUsageAndAWholeMessagePrefix) {
  server.script({[](Connection& c, const ReceivedRequest&) {
    c.start_stream();
    c.event(
        R"({"type":"message_start","message":{"id":"msg_s","model":"claude-test","usage":{"input_tokens":5,"cache_read_input_tokens":0,"cache_creation_input_tokens":700,"output_tokens":1}}})",
        "message_start");
    c.event(R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}})",
            "content_block_delta");
    c.event(R"({"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":4}})",
            "message_delta");
    c.event(R"({"type":"message_stop"})", "message_stop");
    c.close();
  }});
  Profile p = profile("anthropic");
  p.stream = true;
  // cache_prefix covering the whole content: one block, marked.
  std::vector<Message> m = cached_prompt("the whole message", "");
  auto r = client(p)->chat(m, {});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->usage.prompt_tokens, 705);
  EXPECT_EQ(r->usage.cached_tokens, 0);
  EXPECT_EQ(r->usage.cache_write_tokens, 700);
  EXPECT_EQ(r->usage.completion_tokens, 4);
  Json body = Json::parse(server.requests().at(0).body);
  const Json& content = body["messages"][0]["content"];
  ASSERT_EQ(content.size(), 1u) << body.dump();
  EXPECT_EQ(content[0]["text"], "the whole message");
  EXPECT_EQ(content[0]["cache_control"]["type"], "ephemeral");
}

TEST_F(ClientTest, AnthropicBreakpointsStayWithinTheApiLimitOfFour) {
  server.script({test::reply(200, test::anthropic_body("ok", 3, 1))});
  std::vector<Message> m = {{Message::Role::system, "sys"}};
  for (int i = 0; i < 5; ++i) {
    Message u{i % 2 == 0 ? Message::Role::user : Message::Role::assistant,
              fmt::format("prefix {}|tail {}", i, i)};
    u.cache_prefix = 8;  // "prefix i"
    m.push_back(u);
  }
  ASSERT_TRUE(client(profile("anthropic"))->chat(m, {}));
  Json body = Json::parse(server.requests().at(0).body);
  EXPECT_EQ(body["system"][0]["cache_control"]["type"], "ephemeral");
  ASSERT_EQ(body["messages"].size(), 5u);
  // The two earliest prefixes are sent plain; the last three carry the breakpoints.
  EXPECT_EQ(body["messages"][0]["content"], "prefix 0|tail 0");
  EXPECT_EQ(body["messages"][1]["content"], "prefix 1|tail 1");
  for (int i = 2; i < 5; ++i) {
    const Json& c = body["messages"][i]["content"];
    ASSERT_TRUE(c.is_array()) << body.dump();
    EXPECT_EQ(c[0]["text"], fmt::format("prefix {}", i));
    EXPECT_EQ(c[0]["cache_control"]["type"], "ephemeral");
    EXPECT_EQ(c[1]["text"], fmt::format("|tail {}", i));
  }
}

TEST_F(ClientTest, AnthropicStreamEndsAtMessageStop) {
  server.script({[](Connection& c, const ReceivedRequest&) {
    c.start_stream();
    c.event(
        R"({"type":"message_start","message":{"id":"msg_s","model":"claude-test","usage":{"input_tokens":25,"output_tokens":1}}})",
        "message_start");
    c.event(R"({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}})",
            "content_block_start");
    c.event(R"({"type":"ping"})", "ping");
    c.event(
        R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}})",
        "content_block_delta");
    c.event(
        R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" kernel"}})",
        "content_block_delta");
    c.event(R"({"type":"content_block_stop","index":0})", "content_block_stop");
    c.event(
        R"({"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":9}})",
        "message_delta");
    c.event(R"({"type":"message_stop"})", "message_stop");
    c.close();
  }});
  Profile p = profile("anthropic");
  p.stream = true;
  auto r = ask(*client(p));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->text, "Hello kernel");
  EXPECT_EQ(r->finish_reason, "length");
  EXPECT_EQ(r->usage.prompt_tokens, 25);
  EXPECT_EQ(r->usage.completion_tokens, 9);
  EXPECT_EQ(r->request_id, "msg_s");
  EXPECT_EQ(Json::parse(server.requests().at(0).body)["stream"], true);
}

TEST_F(ClientTest, AnthropicOverloadedIsRetriedAndPromptTooLongIsContextLength) {
  server.script(
      {test::reply(
           529, R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})"),
       test::reply(200, test::anthropic_body("fine", 3, 1))});
  auto r = ask(*client(profile("anthropic")));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->attempts, 2);

  server.script({test::reply(
      400,
      R"({"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}})")});
  auto e = ask(*client(profile("anthropic")));
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().cls, FailureClass::context_length);
  EXPECT_EQ(e.error().attempts, 1);
  EXPECT_NE(e.error().message.find("prompt is too long"), std::string::npos);
}

TEST_F(ClientTest, AnthropicErrorEventAndRefusal) {
  server.script({[](Connection& c, const ReceivedRequest&) {
    c.start_stream();
    c.event(
        R"({"type":"message_start","message":{"id":"m","model":"claude-test","usage":{"input_tokens":5}}})",
        "message_start");
    c.event(R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})",
            "error");
    c.close();
  }});
  Profile p = profile("anthropic");
  p.stream = true;
  p.max_retries = 0;
  auto r = ask(*client(p));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().cls, FailureClass::server_error);

  server.script({test::reply(200, test::anthropic_body("", 9, 0, "refusal"))});
  auto f = ask(*client(profile("anthropic")));
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().cls, FailureClass::content_filtered);
}

TEST_F(ClientTest, AnthropicUnauthorizedNeverShowsTheKey) {
  server.script({test::reply(
      401,
      R"({"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}})")});
  auto r = ask(*client(profile("anthropic")));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().cls, FailureClass::unauthorized);
  EXPECT_EQ(r.error().message.find(k_key), std::string::npos);
  transcript_lines();
}

}  // namespace
}  // namespace kope::llm
