#include "mcp/server.h"

#include <unistd.h>

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "mcp/http.h"
#include "mcp/stdio.h"
#include "util/strings.h"

namespace kope::mcp {
namespace {

// A server with two tools: `echo` (returns its text) and `wait` (runs until cancelled).
Server test_server() {
  Tool echo;
  echo.name = "echo";
  echo.description = "Echoes";
  echo.input_schema = {{"type", "object"},
                       {"properties", {{"text", {{"type", "string"}}}, {"times", {{"type", "integer"}, {"minimum", 1}}}}},
                       {"required", {"text"}},
                       {"additionalProperties", false}};
  echo.output_schema = {{"type", "object"}, {"properties", {{"text", {{"type", "string"}}}}}};
  echo.run = [](const json& args, ToolContext& ctx) -> Result<ToolOutcome> {
    ctx.progress(1, 2, "half");
    ctx.progress(1, 2, "not again");  // not growing: skipped
    ctx.progress(2, 2, "done");
    if (args["text"] == "fail") return fail(ErrorKind::not_found, "no such thing");
    if (args["text"] == "throw") throw std::runtime_error("boom");
    if (args["text"] == "bytes") return ToolOutcome{json{{"text", std::string("ok \xff\xfe")}}};  // no UTF-8
    return ToolOutcome{json{{"text", args["text"]}}, args["text"] == "bad"};
  };
  Tool wait;
  wait.name = "wait";
  wait.input_schema = {{"type", "object"}};
  wait.output_schema = {{"type", "object"}};
  wait.run = [](const json&, ToolContext& ctx) -> Result<ToolOutcome> {
    while (!ctx.cancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return ToolOutcome{};
  };
  ResourceSource res;
  res.list = [] { return Result<std::vector<Resource>>(std::vector<Resource>{{"kope://x", "x", "", "", "text/plain"}}); };
  res.read = [](const std::string& uri) -> Result<ResourceContents> {
    if (uri != "kope://x") return fail(ErrorKind::not_found, "no resource {}", uri);
    return ResourceContents{uri, "text/plain", "hello"};
  };
  res.templates = {{"kope://{name}", "any", "", "", "text/plain"}};
  return Server(ServerInfo{"kope", "", "0.1.0", ""}, {echo, wait}, res);
}

json call(Server& s, Session& session, const std::string& text, std::vector<json>* sent = nullptr) {
  Send send = [sent](const json& m) {
    if (sent) sent->push_back(m);
    return true;
  };
  auto r = s.handle_text(session, text, send);
  return r.value_or(json());
}

TEST(McpServer, InitializeNegotiatesTheRevision) {
  Server s = test_server();
  Session session;
  json r = call(s, session, R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})");
  EXPECT_EQ(r["result"]["protocolVersion"], "2025-06-18");
  EXPECT_EQ(r["result"]["serverInfo"]["name"], "kope");
  EXPECT_TRUE(r["result"]["capabilities"].contains("tools"));
  EXPECT_TRUE(r["result"]["capabilities"].contains("resources"));
  json later = call(s, session, R"({"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2099-01-01"}})");
  EXPECT_EQ(later["result"]["protocolVersion"], std::string(k_protocol_version));  // ours; the client decides
  json bad = call(s, session, R"({"jsonrpc":"2.0","id":3,"method":"initialize","params":{}})");
  EXPECT_EQ(bad["error"]["code"], -32602);
  EXPECT_FALSE(session.initialized());
  EXPECT_TRUE(call(s, session, R"({"jsonrpc":"2.0","method":"notifications/initialized"})").is_null());
  EXPECT_TRUE(session.initialized());
}

TEST(McpServer, StandardErrorCodes) {
  Server s = test_server();
  Session session;
  EXPECT_EQ(call(s, session, "{oops")["error"]["code"], -32700);
  EXPECT_EQ(call(s, session, R"({"jsonrpc":"2.0","id":1})")["error"]["code"], -32600);
  EXPECT_EQ(call(s, session, R"({"jsonrpc":"2.0","id":1,"method":"prompts/list"})")["error"]["code"], -32601);
  EXPECT_EQ(call(s, session, R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope"}})")["error"]["code"], -32602);
  EXPECT_EQ(call(s, session, R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}})")["error"]["code"], -32602);
  // Arguments that do not fit the input schema.
  json missing = call(s, session, R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}})");
  EXPECT_EQ(missing["error"]["code"], -32602);
  EXPECT_NE(missing["error"]["message"].get<std::string>().find("\"text\" is required"), std::string::npos);
  EXPECT_EQ(call(s, session, R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":3}}})")["error"]["code"], -32602);
  EXPECT_EQ(call(s, session, R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a","times":0}}})")["error"]["code"], -32602);
  EXPECT_EQ(call(s, session, R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a","x":1}}})")["error"]["code"], -32602);
  EXPECT_EQ(call(s, session, R"({"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"kope://nope"}})")["error"]["code"], -32002);
  EXPECT_EQ(call(s, session, R"({"jsonrpc":"2.0","id":1,"method":"resources/read","params":{}})")["error"]["code"], -32602);
  EXPECT_EQ(call(s, session, R"({"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"loud"}})")["error"]["code"], -32602);
  // Notifications get no answer, known or not.
  EXPECT_TRUE(call(s, session, R"({"jsonrpc":"2.0","method":"notifications/whatever"})").is_null());
  EXPECT_TRUE(call(s, session, R"({"jsonrpc":"2.0","id":4,"result":{}})").is_null());
}

TEST(McpServer, ToolResultsCarryStructuredContentAndTheSameText) {
  Server s = test_server();
  Session session;
  json list = call(s, session, R"({"jsonrpc":"2.0","id":1,"method":"tools/list"})");
  ASSERT_EQ(list["result"]["tools"].size(), 2u);
  EXPECT_TRUE(list["result"]["tools"][0].contains("inputSchema"));
  EXPECT_TRUE(list["result"]["tools"][0].contains("outputSchema"));
  std::vector<json> sent;
  json r = call(s, session, R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"progressToken":"p1"}}})", &sent);
  EXPECT_EQ(r["result"]["structuredContent"]["text"], "hi");
  EXPECT_EQ(json::parse(r["result"]["content"][0]["text"].get<std::string>()), r["result"]["structuredContent"]);
  EXPECT_FALSE(r["result"]["isError"].get<bool>());
  ASSERT_EQ(sent.size(), 2u);  // the repeated progress value was skipped
  EXPECT_EQ(sent[0]["method"], "notifications/progress");
  EXPECT_EQ(sent[0]["params"]["progressToken"], "p1");
  EXPECT_EQ(sent[1]["params"]["progress"], 2);
  // No token, no progress.
  sent.clear();
  call(s, session, R"({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}})", &sent);
  EXPECT_TRUE(sent.empty());
}

TEST(McpServer, ToolFailuresAreResultsWithIsError) {
  Server s = test_server();
  Session session;
  json failed = call(s, session, R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"fail"}}})");
  EXPECT_TRUE(failed["result"]["isError"].get<bool>());
  EXPECT_EQ(failed["result"]["content"][0]["text"], "no such thing");
  EXPECT_FALSE(failed["result"].contains("structuredContent"));
  json bad = call(s, session, R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"bad"}}})");
  EXPECT_TRUE(bad["result"]["isError"].get<bool>());
  EXPECT_EQ(bad["result"]["structuredContent"]["text"], "bad");
  json bytes = call(s, session, R"({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"text":"bytes"}}})");
  EXPECT_FALSE(bytes["result"]["isError"].get<bool>());
  EXPECT_NE(bytes["result"]["content"][0]["text"].get<std::string>().find("ok \xEF\xBF\xBD"), std::string::npos);  // U+FFFD
  json thrown = call(s, session, R"({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"throw"}}})");
  EXPECT_TRUE(thrown["result"]["isError"].get<bool>());
  EXPECT_NE(thrown["result"]["content"][0]["text"].get<std::string>().find("boom"), std::string::npos);
}

TEST(McpServer, ResourcesListReadAndTemplates) {
  Server s = test_server();
  Session session;
  EXPECT_EQ(call(s, session, R"({"jsonrpc":"2.0","id":1,"method":"resources/list"})")["result"]["resources"][0]["uri"], "kope://x");
  json read = call(s, session, R"({"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"kope://x"}})");
  EXPECT_EQ(read["result"]["contents"][0]["text"], "hello");
  EXPECT_EQ(call(s, session, R"({"jsonrpc":"2.0","id":3,"method":"resources/templates/list"})")["result"]["resourceTemplates"][0]["uriTemplate"], "kope://{name}");
}

TEST(McpServer, CancelledRequestStopsAndGetsNoResponse) {
  Server s = test_server();
  Session session;
  std::optional<json> reply = json("unset");
  std::thread t([&] {
    Send none = [](const json&) { return true; };
    reply = s.handle_text(session, R"({"jsonrpc":"2.0","id":"w","method":"tools/call","params":{"name":"wait"}})", none);
  });
  while (session.in_flight() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  call(s, session, R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"w","reason":"test"}})");
  t.join();
  EXPECT_FALSE(reply.has_value());
  EXPECT_EQ(session.in_flight(), 0u);
}

TEST(McpServer, SchemaCheckerSubset) {
  json schema = {{"type", "object"},
                 {"properties", {{"ops", {{"type", "array"}, {"items", {{"type", "string"}}}}}, {"stage", {{"enum", {"draft", "repair"}}}}}}};
  EXPECT_FALSE(check_schema(schema, json{{"ops", {"a", "b"}}}));
  EXPECT_TRUE(check_schema(schema, json{{"ops", {"a", 1}}}));
  EXPECT_TRUE(check_schema(schema, json{{"stage", "refine"}}));
  EXPECT_TRUE(check_schema(schema, json::array()));
  EXPECT_FALSE(check_schema(json{{"type", "number"}}, json(3)));        // an integer is a number
  EXPECT_FALSE(check_schema(json{{"type", "integer"}}, json(3.0)));     // and 3.0 an integer
  EXPECT_TRUE(check_schema(json{{"type", "integer"}}, json(3.5)));
}

TEST(McpHttp, LoopbackHosts) {
  for (const char* h : {"localhost", "127.0.0.1", "127.1.2.3", "::1"}) EXPECT_TRUE(is_loopback_host(h)) << h;
  for (const char* h : {"0.0.0.0", "10.0.0.1", "evil.example.com", "localhost.evil.com", "", "128.0.0.1"}) {
    EXPECT_FALSE(is_loopback_host(h)) << h;
  }
}

// The stdio transport over pipes: one message per line, errors for bad lines, and at the end of
// input a tool still running is cancelled (its answer still written while stdout is open) and
// the transport returns.
TEST(McpStdio, ServesLinesAndCancelsAtEndOfInput) {
  Server s = test_server();
  int in[2], out[2];
  ASSERT_EQ(pipe(in), 0);
  ASSERT_EQ(pipe(out), 0);
  Status status;
  std::thread server([&] { status = serve_stdio(s, in[0], out[1]); ::close(out[1]); });
  std::string input =
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n"
      "garbage\n"
      "\n"
      "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"wait\"}}\r\n"
      "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"nope\"}\n";
  ASSERT_EQ(::write(in[1], input.data(), input.size()), static_cast<ssize_t>(input.size()));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ::close(in[1]);  // the client leaves while `wait` runs
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
  server.join();
  ::close(in[0]);
  ::close(out[0]);
  EXPECT_TRUE(status);
  auto lines = util::split(util::trim(got), '\n');
  ASSERT_EQ(lines.size(), 4u) << got;  // ping, the parse error, the unknown method, then the stopped call
  EXPECT_EQ(json::parse(lines[0])["id"], 1);
  EXPECT_EQ(json::parse(lines[1])["error"]["code"], -32700);
  EXPECT_EQ(json::parse(lines[2])["error"]["code"], -32601);
  EXPECT_EQ(json::parse(lines[3])["id"], 2);
}

}  // namespace
}  // namespace kope::mcp
