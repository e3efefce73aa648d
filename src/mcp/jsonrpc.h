// mcp/jsonrpc.h — JSON-RPC 2.0 framing for the MCP server (docs/design.md, "The MCP surface").
//
// One message is one JSON object: a request (method and id), a notification (method, no id) or
// a response (id with result or error). parse_message() classifies a message's text and turns
// what is not a valid message into the error response the sender gets (standard codes: -32700
// the text is not JSON, -32600 it is JSON but no valid message). Batches (JSON arrays) are not
// part of MCP 2025-06-18 and get -32600. Pure functions, thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

namespace kope::mcp {

using nlohmann::json;

// The standard JSON-RPC error codes MCP uses.
enum class ErrorCode : int {
  parse_error = -32700,       // not JSON
  invalid_request = -32600,   // JSON, but not a valid request
  method_not_found = -32601,  // the method does not exist (or is not offered)
  invalid_params = -32602,    // the params do not fit the method (unknown tool, bad arguments)
  internal_error = -32603,    // a bug of the server
  resource_not_found = -32002,  // MCP's code for resources/read of an unknown URI
};

struct Message {
  enum class Kind { request, notification, response };
  Kind kind = Kind::request;
  json id;             // a string or an integer for requests and responses; null for notifications
  std::string method;  // requests and notifications
  json params;         // an object, or null when absent
  json body;           // responses: the whole message (result or error)

  bool is_request() const { return kind == Kind::request; }
  bool is_notification() const { return kind == Kind::notification; }
  bool is_response() const { return kind == Kind::response; }
};

// A message, or the error response to send back when `text` is none (its id is the message's
// id when one could be read, else null).
std::variant<Message, json> parse_message(std::string_view text);
// The same for an already parsed JSON value.
std::variant<Message, json> classify_message(const json& value);

json make_result(const json& id, json result);
json make_error(const json& id, ErrorCode code, std::string_view message, const json& data = nullptr);
json make_notification(std::string_view method, json params);

}  // namespace kope::mcp
