// Unit tests of the pieces without a network: prompt token estimates, redaction, SSE, Retry-After and
// backoff, token buckets, endpoint URLs, error classification, prices and accounting.
#include "kope/llm.h"

#include <gtest/gtest.h>

#include <thread>

#include "llm/limiter.h"
#include "llm/provider.h"
#include "llm/retry.h"
#include "llm/sse.h"

namespace kope::llm {
namespace {

using namespace std::chrono_literals;

TEST(EstimateTokens, MessagesAddTemplateOverhead) {
  std::vector<Message> m = {{Message::Role::system, "Hello, world!"},
                            {Message::Role::user, "Hello, world!"}};
  EXPECT_EQ(estimate_tokens(m), 3 + 2 * (4 + 4));
}

TEST(Redact, RemovesRegisteredSecretsAndKeyShapes) {
  register_secret("my-local-secret-123");
  register_secret("short");  // too short to register: ordinary words must survive
  EXPECT_EQ(redact("key my-local-secret-123 here"), "key [REDACTED] here");
  EXPECT_EQ(redact("a short word"), "a short word");
  EXPECT_EQ(redact("Authorization: Bearer abcdefghijklmnop"), "Authorization: Bearer [REDACTED]");
  EXPECT_EQ(redact("{\"x-api-key\": \"zzzzzzzzzzzzzzzzzzzz\"}"), "{\"x-api-key\": \"[REDACTED]\"}");
  EXPECT_EQ(redact("Incorrect API key provided: sk-proj-ABCDEFGHIJKLMNOPQRSTUVWXYZ012345."),
            "Incorrect API key provided: [REDACTED].");
  EXPECT_EQ(redact("sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAA"), "[REDACTED]");
  EXPECT_EQ(redact("https://h/v1beta/models?key=AIzaSecretValue&alt=sse"),
            "https://h/v1beta/models?key=[REDACTED]&alt=sse");
  EXPECT_EQ(redact("https://x.openai.azure.com/chat?api-version=2024-02-01&api-key=abc123xyz"),
            "https://x.openai.azure.com/chat?api-version=2024-02-01&api-key=[REDACTED]");
  // Ordinary prose about keys stays readable.
  EXPECT_EQ(redact("check the key in $OPENAI_API_KEY (set)"),
            "check the key in $OPENAI_API_KEY (set)");
  EXPECT_EQ(redact("task-manager and desk-top"), "task-manager and desk-top");
}

TEST(Sse, ParsesEventsAcrossChunkBoundariesAndLineEndings) {
  std::vector<SseEvent> got;
  SseParser p([&](const SseEvent& e) {
    got.push_back(e);
    return true;
  });
  std::string stream =
      ": keep-alive\r\nevent: delta\r\ndata: {\"a\":1}\r\n\r\ndata: line1\ndata: line2\n\nid: "
      "7\ndata: x\r\r";
  for (char c : stream) ASSERT_TRUE(p.feed(std::string_view(&c, 1)));  // byte by byte
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].event, "delta");
  EXPECT_EQ(got[0].data, "{\"a\":1}");
  EXPECT_EQ(got[1].event, "");
  EXPECT_EQ(got[1].data, "line1\nline2");
  EXPECT_EQ(got[2].data, "x");
  EXPECT_TRUE(p.stray().empty());
}

TEST(Sse, StopsWhenHandlerSaysSoAndFlushesAnUnterminatedEvent) {
  int n = 0;
  SseParser p([&](const SseEvent&) { return ++n < 2; });
  EXPECT_FALSE(p.feed("data: 1\n\ndata: 2\n\ndata: 3\n\n"));
  EXPECT_EQ(n, 2);
  std::string last;
  SseParser q([&](const SseEvent& e) {
    last = e.data;
    return true;
  });
  EXPECT_TRUE(q.feed("data: tail"));
  EXPECT_TRUE(last.empty());
  EXPECT_TRUE(q.finish());
  EXPECT_EQ(last, "tail");
  SseParser r([](const SseEvent&) { return true; });
  r.feed("{\"not\": \"sse\"}\n");
  EXPECT_EQ(r.events(), 0u);
  EXPECT_NE(r.stray().find("not"), std::string::npos);
}

TEST(RetryAfter, SecondsAndHttpDates) {
  const auto now =
      std::chrono::system_clock::from_time_t(784111777);  // Sun, 06 Nov 1994 08:49:37 GMT
  EXPECT_EQ(parse_retry_after("12", now), 12000ms);
  EXPECT_EQ(parse_retry_after(" 1.5 ", now), 1500ms);
  EXPECT_EQ(parse_retry_after("Sun, 06 Nov 1994 08:49:47 GMT", now), 10000ms);
  EXPECT_EQ(parse_retry_after("Sunday, 06-Nov-94 08:50:37 GMT", now), 60000ms);
  EXPECT_EQ(parse_retry_after("Sun Nov  6 08:49:39 1994", now), 2000ms);
  EXPECT_EQ(parse_retry_after("Sun, 06 Nov 1994 08:00:00 GMT", now), 0ms);  // in the past
  EXPECT_FALSE(parse_retry_after("soon", now));
  EXPECT_FALSE(parse_retry_after("-3", now));
  EXPECT_FALSE(parse_retry_after("", now));
}

TEST(Backoff, ExponentialWithEqualJitterAndCaps) {
  Profile p;
  p.retry_base_delay = 1000ms;
  p.retry_max_delay = 8000ms;
  p.retry_after_cap = 30000ms;
  EXPECT_EQ(backoff_delay(p, 1, 0.0), 500ms);
  EXPECT_EQ(backoff_delay(p, 1, 1.0), 1000ms);
  EXPECT_EQ(backoff_delay(p, 2, 0.5), 1500ms);
  EXPECT_EQ(backoff_delay(p, 3, 1.0), 4000ms);
  EXPECT_EQ(backoff_delay(p, 10, 1.0), 8000ms);  // capped
  EXPECT_EQ(backoff_delay(p, 100, 0.0), 4000ms);
  EXPECT_EQ(retry_delay(p, 1, 0.0, 20000ms), 20000ms);   // the server's wait wins
  EXPECT_EQ(retry_delay(p, 1, 0.0, 600000ms), 30000ms);  // but capped
}

TEST(TokenBucket, RefillsAtItsRateAndLetsLargeRequestsGoIntoDebt) {
  using Clock = TokenBucket::Clock;
  const Clock::time_point t0{};
  TokenBucket b(600, 10, t0);  // 10 per second, capacity 10
  EXPECT_EQ(b.wait_time(10, t0), Clock::duration::zero());
  b.take(10, t0);
  auto w = b.wait_time(1, t0);
  EXPECT_NEAR(std::chrono::duration<double>(w).count(), 0.1, 0.001);
  EXPECT_NEAR(b.level(t0 + 500ms), 5.0, 1e-9);
  // A request of 50 (more than the capacity) waits for a full bucket, then leaves a debt of 40.
  EXPECT_NEAR(std::chrono::duration<double>(b.wait_time(50, t0 + 500ms)).count(), 0.5, 0.001);
  b.take(50, t0 + 1000ms);
  EXPECT_NEAR(std::chrono::duration<double>(b.wait_time(1, t0 + 1000ms)).count(), 4.1, 0.001);
  b.adjust(30, t0 + 1000ms);  // the request used 20, not 50
  EXPECT_NEAR(b.level(t0 + 1000ms), -10.0, 1e-9);
  TokenBucket unlimited(0, 0, t0);
  unlimited.take(1e9, t0);
  EXPECT_EQ(unlimited.wait_time(1e9, t0), Clock::duration::zero());
}

TEST(Limiter, CapsConcurrencyAcrossThreads) {
  Limiter lim(0, 0, 2);
  std::atomic<int> now{0}, peak{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&] {
      auto permit = lim.acquire(1, nullptr, nullptr);
      ASSERT_TRUE(permit);
      int n = ++now;
      int seen = peak.load();
      while (n > seen && !peak.compare_exchange_weak(seen, n)) {
      }
      std::this_thread::sleep_for(30ms);
      --now;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(peak.load(), 2);
  EXPECT_EQ(lim.max_in_flight(), 2);
  EXPECT_EQ(lim.in_flight(), 0);
}

TEST(Limiter, SpacesRequestsAtTheRequestRate) {
  Limiter lim(1200, 0, 8);  // 20 per second, a bucket of 20: the first 20 pass at once
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 26; ++i) ASSERT_TRUE(lim.acquire(0, nullptr, nullptr));
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(s, 0.27);  // 6 more at 20/s = 0.3 s
  EXPECT_LT(s, 3.0);
}

TEST(Limiter, WaitingStopsOnCancel) {
  Limiter lim(0, 0, 1);
  auto held = lim.acquire(0, nullptr, nullptr);
  ASSERT_TRUE(held);
  CancelToken cancel;
  std::thread t([&] {
    std::this_thread::sleep_for(100ms);
    cancel.cancel();
  });
  double waited = 0;
  auto second = lim.acquire(0, &cancel, nullptr, &waited);
  t.join();
  EXPECT_FALSE(second);
  EXPECT_GE(waited, 0.09);
  EXPECT_LT(waited, 2.0);
}

TEST(SharedLimiter, SameKeySharesOneLimiter) {
  auto a = shared_limiter("k1", 0, 0, 3);
  auto b = shared_limiter("k1", 0, 0, 3);
  auto c = shared_limiter("k2", 0, 0, 3);
  EXPECT_EQ(a.get(), b.get());
  EXPECT_NE(a.get(), c.get());
}

TEST(EndpointUrl, HandlesBaseUrlsWithAndWithoutVersion) {
  Profile p;
  p.base_url = "https://api.openai.com/v1";
  EXPECT_EQ(endpoint_url(p), "https://api.openai.com/v1/chat/completions");
  p.base_url = "https://api.openai.com/v1/";
  EXPECT_EQ(endpoint_url(p), "https://api.openai.com/v1/chat/completions");
  p.base_url = "http://localhost:8080";
  EXPECT_EQ(endpoint_url(p), "http://localhost:8080/v1/chat/completions");
  p.base_url = "http://localhost:8080/";
  EXPECT_EQ(endpoint_url(p), "http://localhost:8080/v1/chat/completions");
  p.base_url = "https://open.bigmodel.cn/api/paas/v4";
  EXPECT_EQ(endpoint_url(p), "https://open.bigmodel.cn/api/paas/v4/chat/completions");
  p.base_url = "http://h:1/v1/chat/completions";
  EXPECT_EQ(endpoint_url(p), "http://h:1/v1/chat/completions");
  p.base_url = "https://x.azure.com/openai/deployments/d?api-version=2024-02-01";
  EXPECT_EQ(endpoint_url(p),
            "https://x.azure.com/openai/deployments/d/chat/completions?api-version=2024-02-01");
  p.provider = "anthropic";
  p.base_url = "https://api.anthropic.com";
  EXPECT_EQ(endpoint_url(p), "https://api.anthropic.com/v1/messages");
  p.base_url = "https://api.anthropic.com/v1";
  EXPECT_EQ(endpoint_url(p), "https://api.anthropic.com/v1/messages");
}

HttpResponse response(int status, std::string body, Headers headers = {}) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  r.headers = std::move(headers);
  return r;
}

TEST(Classify, StatusesAndErrorBodies) {
  auto c = [](int status, std::string body, Headers h = {}) {
    return classify_status(response(status, body, h), "h");
  };
  auto f = c(
      401,
      R"({"error":{"message":"Incorrect API key provided: sk-abcdefghijklmnopqrstuvwx","type":"invalid_request_error","code":"invalid_api_key"}})");
  EXPECT_EQ(f.error.cls, FailureClass::unauthorized);
  EXPECT_FALSE(f.retry);
  EXPECT_EQ(f.error.message.find("sk-abcdefghijklmnopqrstuvwx"), std::string::npos);
  EXPECT_NE(f.error.message.find("invalid_api_key"), std::string::npos);

  f = c(
      400,
      R"({"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}})");
  EXPECT_EQ(f.error.cls, FailureClass::context_length);
  f = c(
      400,
      R"({"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208000 tokens > 200000 maximum"}})");
  EXPECT_EQ(f.error.cls, FailureClass::context_length);
  f = c(
      400,
      R"({"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}})");
  EXPECT_EQ(f.error.cls, FailureClass::context_length);
  f = c(
      400,
      R"({"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.","type":"BadRequestError","code":400})");
  EXPECT_EQ(f.error.cls, FailureClass::context_length);
  f = c(
      413,
      R"({"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}})");
  EXPECT_EQ(f.error.cls, FailureClass::context_length);

  f = c(
      404,
      R"({"error":{"message":"The model `gpt-9` does not exist or you do not have access to it.","code":"model_not_found"}})");
  EXPECT_EQ(f.error.cls, FailureClass::not_found);
  f = c(400, R"({"error":"model 'qwen9' not found, try pulling it first"})");
  EXPECT_EQ(f.error.cls, FailureClass::not_found);
  f = c(
      400,
      R"({"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model.","code":"unsupported_parameter"}})");
  EXPECT_EQ(f.error.cls, FailureClass::bad_request);
  f = c(400, R"({"error":{"message":"blocked","code":"content_filter"}})");
  EXPECT_EQ(f.error.cls, FailureClass::content_filtered);

  f = c(
      429,
      R"({"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}})",
      {{"retry-after", "7"}});
  EXPECT_EQ(f.error.cls, FailureClass::rate_limited);
  EXPECT_TRUE(f.retry);
  ASSERT_TRUE(f.retry_after);
  EXPECT_EQ(*f.retry_after, 7000ms);
  f = c(429, R"({"error":{"message":"Rate limit","code":"rate_limit_exceeded"}})",
        {{"retry-after-ms", "250"}});
  ASSERT_TRUE(f.retry_after);
  EXPECT_EQ(*f.retry_after, 250ms);
  f = c(
      429,
      R"({"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","code":"insufficient_quota"}})");
  EXPECT_EQ(f.error.cls, FailureClass::provider_error);
  EXPECT_FALSE(f.retry);
  f = c(
      429,
      R"({"error":{"message":"Request too large for gpt-4o on tokens per min (TPM): Limit 30000, Requested 50000.","code":"rate_limit_exceeded"}})");
  EXPECT_EQ(f.error.cls, FailureClass::context_length);

  f = c(529, R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})");
  EXPECT_EQ(f.error.cls, FailureClass::server_error);
  EXPECT_TRUE(f.retry);
  f = c(408, "");
  EXPECT_EQ(f.error.cls, FailureClass::http_status);
  EXPECT_TRUE(f.retry);
  f = c(409, "conflict");
  EXPECT_TRUE(f.retry);
  f = c(422, R"({"detail":[{"loc":["body","messages"],"msg":"field required"}]})");
  EXPECT_EQ(f.error.cls, FailureClass::bad_request);
  EXPECT_NE(f.error.message.find("field required"), std::string::npos);
  f = c(302, "", {{"location", "https://example.com/v1/chat/completions"}});
  EXPECT_EQ(f.error.cls, FailureClass::http_status);
  EXPECT_NE(f.error.message.find("https://example.com"), std::string::npos);
  f = c(502, "<html><body>Bad gateway</body></html>");
  EXPECT_EQ(f.error.cls, FailureClass::server_error);
  EXPECT_NE(f.error.message.find("Bad gateway"), std::string::npos);
}

TEST(Classify, ErrorObjectsInsideSuccessfulResponses) {
  auto f = classify_error_object(
      Json::parse(R"({"error":{"code":502,"message":"Upstream error"}})"), "openrouter.ai");
  EXPECT_EQ(f.error.cls, FailureClass::server_error);
  EXPECT_TRUE(f.retry);
  f = classify_error_object(
      Json::parse(R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})"),
      "h");
  EXPECT_EQ(f.error.cls, FailureClass::server_error);
  f = classify_error_object(Json::parse(R"({"error":{"message":"something odd","type":"weird"}})"),
                            "h");
  EXPECT_EQ(f.error.cls, FailureClass::provider_error);
  EXPECT_FALSE(f.retry);
}

LlmError err(FailureClass cls, int http_status = 0, int attempts = 1) {
  LlmError e;
  e.cls = cls;
  e.http_status = http_status;
  e.attempts = attempts;
  return e;
}

TEST(LlmError, Retryable) {
  EXPECT_TRUE((err(FailureClass::rate_limited).retryable()));
  EXPECT_TRUE((err(FailureClass::timeout).retryable()));
  EXPECT_FALSE((err(FailureClass::context_length).retryable()));
  EXPECT_FALSE((err(FailureClass::unauthorized).retryable()));
  EXPECT_TRUE((err(FailureClass::http_status, 408).retryable()));
  EXPECT_FALSE((err(FailureClass::http_status, 418).retryable()));
  EXPECT_EQ(failure_class_name(FailureClass::context_length), "context_length");
}

TEST(Cost, UsesInputOutputAndCachedPrices) {
  Profile p;
  p.price_input_per_mtok = 2.0;
  p.price_output_per_mtok = 8.0;
  Usage u{1'000'000, 500'000, 400'000, false};
  EXPECT_DOUBLE_EQ(cost_usd(p, u), 2.0 + 4.0);
  p.price_cached_input_per_mtok = 0.5;
  EXPECT_DOUBLE_EQ(cost_usd(p, u), 0.6 * 2.0 + 0.4 * 0.5 + 4.0);
}

TEST(Cost, CachedPriceRatioFromTheKeyThePricesOrTheProviderDefault) {
  Profile p;
  EXPECT_DOUBLE_EQ(cached_price_ratio(p), k_openai_cached_price_ratio);
  p.provider = "anthropic";
  EXPECT_DOUBLE_EQ(cached_price_ratio(p), k_anthropic_cached_price_ratio);
  p.price_cached_input_per_mtok = 0.3;  // without an input price the ratio is undefined
  EXPECT_DOUBLE_EQ(cached_price_ratio(p), k_anthropic_cached_price_ratio);
  p.price_input_per_mtok = 3.0;
  EXPECT_DOUBLE_EQ(cached_price_ratio(p), 0.1);
  p.price_cached_input_per_mtok = 1.5;
  EXPECT_DOUBLE_EQ(cached_price_ratio(p), 0.5);
  p.cached_price_ratio = 0.2;  // the explicit key wins
  EXPECT_DOUBLE_EQ(cached_price_ratio(p), 0.2);
  p.cached_price_ratio = 1.5;
  EXPECT_FALSE(validate_profile(p));
}

TEST(RunAccounting, SumsByProfileAndPurposeFromManyThreads) {
  RunAccounting acc;
  Profile a;
  a.name = "a";
  Profile b;
  b.name = "b";
  ChatResponse r;
  r.usage = {100, 20, 10, false};
  r.usage.cache_write_tokens = 6;
  r.cost_usd = 0.5;
  r.attempts = 2;
  ChatResponse est;
  est.usage = {30, 5, 0, true};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100; ++i) {
        acc.record(a, "draft", r);
        acc.record(b, "refine", est);
        acc.record_failure(a, "draft", err(FailureClass::timeout, 0, 3));
      }
    });
  }
  for (auto& t : threads) t.join();
  UsageTotals t = acc.total();
  EXPECT_EQ(t.calls, 800);
  EXPECT_EQ(t.failed_calls, 400);
  EXPECT_EQ(t.attempts, 400 * 2 + 400 * 1 + 400 * 3);
  EXPECT_EQ(t.prompt_tokens, 400 * 130);
  EXPECT_EQ(t.completion_tokens, 400 * 25);
  EXPECT_EQ(t.cached_tokens, 400 * 10);
  EXPECT_EQ(t.cache_write_tokens, 400 * 6);
  EXPECT_EQ(t.estimated_calls, 400);
  EXPECT_EQ(t.estimated_tokens, 400 * 35);
  EXPECT_DOUBLE_EQ(t.cost_usd, 200.0);
  EXPECT_EQ(t.failures.at("timeout"), 400);
  EXPECT_EQ(acc.by_profile().at("a").calls, 400);
  EXPECT_EQ(acc.by_purpose().at("refine").estimated_calls, 400);
  auto j = Json::parse(acc.to_json());
  EXPECT_EQ(j["total"]["calls"], 800);
  EXPECT_EQ(j["by_profile"]["b"]["prompt_tokens"], 400 * 30);
  EXPECT_EQ(j["by_profile"]["a"]["cache_write_tokens"], 400 * 6);
}

}  // namespace
}  // namespace kope::llm
