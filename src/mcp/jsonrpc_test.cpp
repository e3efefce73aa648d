#include "mcp/jsonrpc.h"

#include <gtest/gtest.h>

namespace kope::mcp {
namespace {

int code_of(const std::variant<Message, json>& r) {
  const json* e = std::get_if<json>(&r);
  return e ? (*e)["error"]["code"].get<int>() : 0;
}

TEST(JsonRpc, ClassifiesRequestsNotificationsAndResponses) {
  auto r = parse_message(R"({"jsonrpc":"2.0","id":7,"method":"ping"})");
  ASSERT_TRUE(std::holds_alternative<Message>(r));
  EXPECT_TRUE(std::get<Message>(r).is_request());
  EXPECT_EQ(std::get<Message>(r).id, 7);
  auto s = parse_message(R"({"jsonrpc":"2.0","id":"a-1","method":"tools/list","params":{}})");
  ASSERT_TRUE(std::holds_alternative<Message>(s));
  EXPECT_EQ(std::get<Message>(s).id, "a-1");
  auto n = parse_message(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  ASSERT_TRUE(std::holds_alternative<Message>(n));
  EXPECT_TRUE(std::get<Message>(n).is_notification());
  auto resp = parse_message(R"({"jsonrpc":"2.0","id":3,"result":{}})");
  ASSERT_TRUE(std::holds_alternative<Message>(resp));
  EXPECT_TRUE(std::get<Message>(resp).is_response());
}

TEST(JsonRpc, MalformedJsonIsAParseError) {
  EXPECT_EQ(code_of(parse_message("{\"jsonrpc\":\"2.0\",")), -32700);
  EXPECT_EQ(code_of(parse_message("not json")), -32700);
  auto r = parse_message("{");
  EXPECT_TRUE(std::get<json>(r)["id"].is_null());
}

TEST(JsonRpc, InvalidMessagesAreInvalidRequests) {
  EXPECT_EQ(code_of(parse_message("[]")), -32600);  // batches are not MCP 2025-06-18
  EXPECT_EQ(code_of(parse_message(R"([{"jsonrpc":"2.0","id":1,"method":"ping"}])")), -32600);
  EXPECT_EQ(code_of(parse_message("42")), -32600);
  EXPECT_EQ(code_of(parse_message(R"({"id":1,"method":"ping"})")), -32600);            // no "jsonrpc"
  EXPECT_EQ(code_of(parse_message(R"({"jsonrpc":"1.0","id":1,"method":"ping"})")), -32600);
  EXPECT_EQ(code_of(parse_message(R"({"jsonrpc":"2.0","id":1,"method":5})")), -32600);
  EXPECT_EQ(code_of(parse_message(R"({"jsonrpc":"2.0","id":{"x":1},"method":"ping"})")), -32600);
  EXPECT_EQ(code_of(parse_message(R"({"jsonrpc":"2.0","id":1,"method":"ping","params":[1]})")), -32600);
  EXPECT_EQ(code_of(parse_message(R"({"jsonrpc":"2.0","id":1})")), -32600);
  // The id is echoed when it could be read.
  auto r = parse_message(R"({"jsonrpc":"2.0","id":9,"method":5})");
  EXPECT_EQ(std::get<json>(r)["id"], 9);
}

TEST(JsonRpc, BuildsResultsErrorsAndNotifications) {
  json r = make_result(1, json{{"a", 1}});
  EXPECT_EQ(r["jsonrpc"], "2.0");
  EXPECT_EQ(r["result"]["a"], 1);
  json e = make_error("x", ErrorCode::method_not_found, "nope");
  EXPECT_EQ(e["error"]["code"], -32601);
  EXPECT_EQ(e["id"], "x");
  EXPECT_FALSE(e["error"].contains("data"));
  json n = make_notification("notifications/progress", json{{"progress", 1}});
  EXPECT_FALSE(n.contains("id"));
  EXPECT_EQ(n["params"]["progress"], 1);
}

}  // namespace
}  // namespace kope::mcp
