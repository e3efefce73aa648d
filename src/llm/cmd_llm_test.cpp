// `kope llm ping` and `kope llm profiles` as a user runs them: the built executable against the
// loopback test server, checking output and exit codes (0 ok, 1 failed call, 2 not configured).
#include <gtest/gtest.h>

#include "kope/llm.h"
#include "llm/provider.h"
#include "llm/test_server.h"
#include "util/fs.h"
#include "util/subprocess.h"

namespace kope::llm {
namespace {

using namespace std::chrono_literals;

class CmdLlmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = util::TempDir::create("kope-cmd-llm-test");
    ASSERT_TRUE(d);
    dir.emplace(std::move(*d));
  }

  // Runs kope in the temp dir with a clean environment (no user config, no keys but `extra`).
  util::RunResult kope(std::vector<std::string> args, std::vector<std::string> extra_env = {}) {
    util::RunOptions o;
    o.spawn.argv = {std::string(KOPE_BINARY_DIR) + "/kope"};
    o.spawn.argv.insert(o.spawn.argv.end(), args.begin(), args.end());
    std::vector<std::string> env = {"PATH=/usr/bin:/bin", "HOME=" + dir->path().string(),
                                    "XDG_CONFIG_HOME=" + (dir->path() / "xdg").string()};
    env.insert(env.end(), extra_env.begin(), extra_env.end());
    o.spawn.env = env;
    o.spawn.cwd = dir->path();
    o.timeout = 30s;
    auto r = util::run(o);
    EXPECT_TRUE(r) << r.error().message;
    return r ? *r : util::RunResult{};
  }

  void write_config(const std::string& text) {
    ASSERT_TRUE(util::write_file_atomic(dir->path() / "kope.toml", text));
  }

  test::TestServer server;
  std::optional<util::TempDir> dir;
};

TEST_F(CmdLlmTest, PingWithoutAnyModelExitsTwoAndSaysHowToConfigure) {
  auto r = kope({"llm", "ping"});
  EXPECT_EQ(r.status.code, 2);
  EXPECT_NE(r.err.find("no model is configured"), std::string::npos) << r.err;
  auto p = kope({"llm", "profiles"});
  EXPECT_EQ(p.status.code, 0);
  EXPECT_NE(p.out.find("no model profiles are configured"), std::string::npos);
}

TEST_F(CmdLlmTest, PingSuccessPrintsModelLatencyAndUsage) {
  server.script({test::reply(200, test::openai_body("pong", 21, 1), {"x-request-id: req_ping"})});
  write_config(
      fmt::format("[llm.local]\nbase_url = \"{}/v1\"\nmodel = \"test-model\"\napi_key_env = \"\"\n"
                  "price_input_per_mtok = 1\n",
                  server.url()));
  auto r = kope({"llm", "ping"});
  EXPECT_EQ(r.status.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("model      test-model"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("latency    "), std::string::npos);
  EXPECT_NE(r.out.find("usage      prompt 21, completion 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("request id req_ping"), std::string::npos);
  EXPECT_NE(r.out.find("result     ok"), std::string::npos);
  Json body = Json::parse(server.requests().at(0).body);
  EXPECT_EQ(body["max_tokens"], 32);

  server.script({test::reply(200, test::openai_body("pong", 21, 1))});
  auto j = kope({"llm", "ping", "--json", "--profile", "local"});
  EXPECT_EQ(j.status.code, 0) << j.err;
  Json out = Json::parse(j.out);
  EXPECT_EQ(out["ok"], true);
  EXPECT_EQ(out["usage"]["prompt_tokens"], 21);
  EXPECT_NEAR(out["cost_usd"].get<double>(), 21e-6, 1e-12);
}

TEST_F(CmdLlmTest, PingFailuresExitOneWithADiagnosisAndNoKey) {
  const std::string key = "sk-cmdtest-0123456789abcdefghijkl";
  server.script({test::reply(
      401,
      fmt::format(
          R"({{"error":{{"message":"Incorrect API key provided: {}","code":"invalid_api_key"}}}})",
          key))});
  write_config(
      fmt::format("[llm.hosted]\nbase_url = \"{}/v1\"\nmodel = \"m\"\napi_key_env = \"MY_KEY\"\n",
                  server.url()));
  auto r = kope({"llm", "ping"}, {"MY_KEY=" + key});
  EXPECT_EQ(r.status.code, 1);
  EXPECT_NE(r.out.find("unauthorized: the server rejected the key in $MY_KEY"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find(key), std::string::npos);
  EXPECT_EQ(r.err.find(key), std::string::npos);
  EXPECT_EQ(server.requests().at(0).header("authorization"), "Bearer " + key);

  server.script({test::reply(
      404, R"({"error":{"message":"The model `m` does not exist","code":"model_not_found"}})")});
  r = kope({"llm", "ping", "--json"}, {"MY_KEY=" + key});
  EXPECT_EQ(r.status.code, 1);
  Json out = Json::parse(r.out);
  EXPECT_EQ(out["ok"], false);
  EXPECT_EQ(out["class"], "not_found");
  EXPECT_NE(out["diagnosis"].get<std::string>().find("unknown model"), std::string::npos);

  server.script({[](test::Connection& c, const test::ReceivedRequest&) { c.pause(10s); }});
  r = kope({"llm", "ping", "--timeout", "0.5"}, {"MY_KEY=" + key});
  EXPECT_EQ(r.status.code, 1);
  EXPECT_NE(r.out.find("timeout"), std::string::npos) << r.out;
  EXPECT_LT(r.wall_seconds, 10);
}

TEST_F(CmdLlmTest, ProfilesListShowsKeysOnlyAsSetOrUnset) {
  write_config(R"(
[llm]
default = "b"
[llm.a]
model = "m-a"
api_key_env = "A_KEY"
[llm.b]
provider = "anthropic"
model = "m-b"
)");
  auto r = kope({"llm", "profiles"}, {"A_KEY=sk-listtest-abcdefghijklmnopqrstu"});
  EXPECT_EQ(r.status.code, 0) << r.err;
  EXPECT_NE(r.out.find("b (default)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("$A_KEY (set)"), std::string::npos);
  EXPECT_NE(r.out.find("$ANTHROPIC_API_KEY (unset)"), std::string::npos);
  EXPECT_NE(r.out.find("https://api.anthropic.com/v1/messages"), std::string::npos);
  EXPECT_EQ(r.out.find("sk-listtest"), std::string::npos);
  EXPECT_NE(r.out.find("cached     prompt tokens billed at 0.5x (openai default)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cached     prompt tokens billed at 0.1x (anthropic default)"), std::string::npos) << r.out;
  auto j = kope({"llm", "profiles", "--json"});
  Json out = Json::parse(j.out);
  EXPECT_EQ(out["default"], "b");
  EXPECT_EQ(out["profiles"].size(), 2u);
  for (const auto& p : out["profiles"]) {
    EXPECT_DOUBLE_EQ(p["cached_price_ratio"].get<double>(), p["provider"] == "anthropic" ? 0.1 : 0.5) << p.dump();
  }
  write_config("[llm.a]\nmodel = \"m\"\nprice_input_per_mtok = 2\nprice_cached_input_per_mtok = 0.5\n"
               "[llm.b]\nmodel = \"m\"\ncached_price_ratio = 0.3\n");
  auto ratios = kope({"llm", "profiles"});
  EXPECT_NE(ratios.out.find("billed at 0.25x (price_cached_input_per_mtok / price_input_per_mtok)"),
            std::string::npos)
      << ratios.out;
  EXPECT_NE(ratios.out.find("billed at 0.3x (cached_price_ratio)"), std::string::npos) << ratios.out;
  write_config("[llm.a]\nmodle = \"x\"\n");
  auto bad = kope({"llm", "profiles"});
  EXPECT_EQ(bad.status.code, 2);
  EXPECT_NE(bad.err.find("kope.toml:2:1: unknown key 'modle' in [llm.a]"), std::string::npos)
      << bad.err;
}

}  // namespace
}  // namespace kope::llm
