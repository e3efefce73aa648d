#include "llm/fake_client.h"

#include <gtest/gtest.h>

#include <thread>

#include "util/fs.h"
#include "util/strings.h"

namespace kope::llm {
namespace {

using namespace std::chrono_literals;

std::vector<Message> prompt(std::string text) {
  return {{Message::Role::user, std::move(text)}};
}

TEST(FakeClient, ScriptedRepliesAndFailuresInOrderWithRecordedRequests) {
  FakeClient llm;
  llm.reply("first", Usage{100, 10, 0, false})
      .fail(FailureClass::context_length, "too long", 400)
      .reply("third");
  ChatParams params;
  params.purpose = "draft";
  auto a = llm.chat(prompt("one"), params);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->text, "first");
  EXPECT_EQ(a->usage.prompt_tokens, 100);
  EXPECT_FALSE(a->usage.estimated);
  auto b = llm.chat(prompt("two"), {});
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().cls, FailureClass::context_length);
  EXPECT_EQ(b.error().http_status, 400);
  auto c = llm.chat(prompt("Hello, world!"), {});
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->usage.estimated);
  EXPECT_EQ(c->usage.prompt_tokens, estimate_tokens(prompt("Hello, world!")));
  auto d = llm.chat(prompt("four"), {});
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().cls, FailureClass::malformed);
  EXPECT_NE(d.error().message.find("no scripted response"), std::string::npos);
  auto reqs = llm.requests();
  ASSERT_EQ(reqs.size(), 4u);
  EXPECT_EQ(reqs[0].messages[0].content, "one");
  EXPECT_EQ(reqs[0].params.purpose, "draft");
  EXPECT_EQ(llm.remaining(), 0u);
}

TEST(FakeClient, ResponderFailEveryCostAccountingAndTranscript) {
  auto dir = util::TempDir::create("kope-fake-test");
  ASSERT_TRUE(dir);
  auto acc = std::make_shared<RunAccounting>();
  Profile p = FakeClient::default_profile();
  p.price_input_per_mtok = 1e6;  // $1 per token, easy to check
  ClientOptions o;
  o.accounting = acc;
  o.transcript = dir->path() / "t.jsonl";
  FakeClient llm(p, o);
  llm.set_responder(
      [](const std::vector<Message>& m, const ChatParams&, size_t i) -> LlmResult<ChatResponse> {
        ChatResponse r;
        r.text = fmt::format("answer {} to {}", i, m.back().content);
        r.usage = {3, 0, 0, false};
        return r;
      });
  llm.fail_every(3, FailureClass::rate_limited);
  int ok = 0, failed = 0;
  for (int i = 0; i < 6; ++i) {
    auto r = llm.chat(prompt("q"), {});
    if (r) {
      ++ok;
      EXPECT_DOUBLE_EQ(r->cost_usd, 3.0);
    } else {
      ++failed;
      EXPECT_EQ(r.error().cls, FailureClass::rate_limited);
    }
  }
  EXPECT_EQ(ok, 4);
  EXPECT_EQ(failed, 2);
  EXPECT_EQ(acc->total().calls, 4);
  EXPECT_EQ(acc->total().failed_calls, 2);
  EXPECT_DOUBLE_EQ(acc->total().cost_usd, 12.0);
  auto text = util::read_file(dir->path() / "t.jsonl");
  ASSERT_TRUE(text);
  EXPECT_EQ(util::split(util::trim(*text), '\n').size(), 12u);  // a request and an outcome per call
}

TEST(FakeClient, LatencyAndCancellation) {
  FakeClient llm;
  llm.set_latency(50ms);
  llm.reply("slow").reply("cancelled");
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(llm.chat(prompt("x"), {}));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 45ms);
  llm.set_latency(5s);
  auto cancel = std::make_shared<CancelToken>();
  ChatParams params;
  params.cancel = cancel;
  std::thread t([&] {
    std::this_thread::sleep_for(50ms);
    cancel->cancel();
  });
  start = std::chrono::steady_clock::now();
  auto r = llm.chat(prompt("y"), params);
  t.join();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().cls, FailureClass::cancelled);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
}

}  // namespace
}  // namespace kope::llm
