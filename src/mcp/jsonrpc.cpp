#include "mcp/jsonrpc.h"

namespace kope::mcp {

namespace {

bool valid_id(const json& id) { return id.is_string() || id.is_number_integer() || id.is_number_unsigned(); }

}  // namespace

std::variant<Message, json> classify_message(const json& value) {
  if (value.is_array()) return make_error(nullptr, ErrorCode::invalid_request, "batches are not supported (MCP 2025-06-18): send one message at a time");
  if (!value.is_object()) return make_error(nullptr, ErrorCode::invalid_request, "a JSON-RPC message is a JSON object");
  json id = value.contains("id") ? value["id"] : json(nullptr);
  json reply_id = valid_id(id) ? id : json(nullptr);
  if (value.value("jsonrpc", json()) != "2.0") return make_error(reply_id, ErrorCode::invalid_request, "\"jsonrpc\" must be \"2.0\"");
  Message m;
  if (value.contains("method")) {
    if (!value["method"].is_string()) return make_error(reply_id, ErrorCode::invalid_request, "\"method\" must be a string");
    m.method = value["method"].get<std::string>();
    if (value.contains("params")) {
      m.params = value["params"];
      if (!m.params.is_object() && !m.params.is_null()) {
        return make_error(reply_id, ErrorCode::invalid_request, "\"params\" must be an object");
      }
    }
    if (!value.contains("id")) {
      m.kind = Message::Kind::notification;
      return m;
    }
    if (!valid_id(id)) return make_error(nullptr, ErrorCode::invalid_request, "\"id\" must be a string or an integer");
    m.kind = Message::Kind::request;
    m.id = id;
    return m;
  }
  if (value.contains("result") || value.contains("error")) {
    m.kind = Message::Kind::response;
    m.id = id;
    m.body = value;
    return m;
  }
  return make_error(reply_id, ErrorCode::invalid_request, "neither a request, a notification nor a response (no \"method\", \"result\" or \"error\")");
}

std::variant<Message, json> parse_message(std::string_view text) {
  json value = json::parse(text, nullptr, false);
  if (value.is_discarded()) return make_error(nullptr, ErrorCode::parse_error, "parse error: the message is not valid JSON");
  return classify_message(value);
}

json make_result(const json& id, json result) { return json{{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}}; }

json make_error(const json& id, ErrorCode code, std::string_view message, const json& data) {
  json error{{"code", static_cast<int>(code)}, {"message", message}};
  if (!data.is_null()) error["data"] = data;
  return json{{"jsonrpc", "2.0"}, {"id", id}, {"error", std::move(error)}};
}

json make_notification(std::string_view method, json params) {
  json n{{"jsonrpc", "2.0"}, {"method", method}};
  if (!params.is_null()) n["params"] = std::move(params);
  return n;
}

}  // namespace kope::mcp
