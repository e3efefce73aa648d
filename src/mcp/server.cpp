#include "mcp/server.h"

#include <exception>

#include <fmt/format.h>

namespace kope::mcp {

namespace {

constexpr std::string_view k_accepted_versions[] = {"2025-06-18", "2025-03-26", "2024-11-05"};
constexpr std::string_view k_log_levels[] = {"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"};

std::string type_of(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "integer";
    case json::value_t::number_float: return "number";
    case json::value_t::string: return "string";
    case json::value_t::array: return "array";
    case json::value_t::object: return "object";
    default: return "unknown";
  }
}

bool has_type(const json& v, const std::string& type) {
  if (type == "number") return v.is_number();
  if (type == "integer") return v.is_number_integer() || v.is_number_unsigned() || (v.is_number_float() && v.get<double>() == static_cast<double>(static_cast<int64_t>(v.get<double>())));
  return type_of(v) == type;
}

json tool_json(const Tool& t) {
  json j{{"name", t.name}, {"description", t.description}, {"inputSchema", t.input_schema}, {"outputSchema", t.output_schema}};
  if (!t.title.empty()) j["title"] = t.title;
  if (!t.annotations.empty()) j["annotations"] = t.annotations;
  return j;
}

json text_result(std::string text, bool is_error) {
  return json{{"content", json::array({json{{"type", "text"}, {"text", std::move(text)}}})}, {"isError", is_error}};
}

}  // namespace

bool supported_protocol_version(std::string_view version) {
  for (auto v : k_accepted_versions) {
    if (v == version) return true;
  }
  return false;
}

// --- ToolContext

void ToolContext::progress(double done, std::optional<double> total, std::string_view message) {
  if (m_token.is_null() || (m_last && done <= *m_last)) return;
  m_last = done;
  json params{{"progressToken", m_token}, {"progress", done}};
  if (total) params["total"] = *total;
  if (!message.empty()) params["message"] = message;
  if (m_send) m_send(make_notification("notifications/progress", std::move(params)));
}

bool ToolContext::cancelled() const {
  if (m_cancel->load()) return true;
  if (m_alive && !m_alive()) {
    m_cancel->store(true);
    return true;
  }
  return false;
}

// --- Session

std::shared_ptr<std::atomic<bool>> Session::begin(const json& id) {
  auto flag = std::make_shared<std::atomic<bool>>(false);
  std::lock_guard lock(m_mutex);
  if (m_ended) flag->store(true);
  m_in_flight[id.dump()] = flag;
  return flag;
}

bool Session::end(const json& id) {
  std::lock_guard lock(m_mutex);
  m_in_flight.erase(id.dump());
  return m_cancelled.erase(id.dump()) > 0;
}

void Session::cancel_all() {
  std::lock_guard lock(m_mutex);
  m_ended = true;
  for (auto& [id, flag] : m_in_flight) flag->store(true);
}

bool Session::cancel(const json& id) {
  std::lock_guard lock(m_mutex);
  auto it = m_in_flight.find(id.dump());
  if (it == m_in_flight.end()) return false;
  it->second->store(true);
  m_cancelled.insert(it->first);
  return true;
}

std::string Session::protocol_version() const {
  std::lock_guard lock(m_mutex);
  return m_protocol_version;
}

size_t Session::in_flight() const {
  std::lock_guard lock(m_mutex);
  return m_in_flight.size();
}

// --- Server

Server::Server(ServerInfo info, std::vector<Tool> tools, ResourceSource resources)
    : m_info(std::move(info)), m_tools(std::move(tools)), m_resources(std::move(resources)) {}

bool Server::is_long(const Message& message) { return message.is_request() && message.method == "tools/call"; }

std::optional<json> Server::handle_text(Session& session, std::string_view text, const Send& send, std::function<bool()> alive) {
  auto parsed = parse_message(text);
  if (auto* error = std::get_if<json>(&parsed)) return *error;
  return handle(session, std::get<Message>(parsed), send, std::move(alive));
}

std::optional<json> Server::handle(Session& session, const Message& m, const Send& send, std::function<bool()> alive) {
  if (m.is_response()) return std::nullopt;  // this server sends no requests: nothing to match
  if (m.is_notification()) {
    if (m.method == "notifications/cancelled" && m.params.is_object() && m.params.contains("requestId")) {
      session.cancel(m.params["requestId"]);
    } else if (m.method == "notifications/initialized") {
      session.m_initialized.store(true);
    }
    return std::nullopt;  // unknown notifications are ignored, as JSON-RPC asks
  }
  const json params = m.params.is_object() ? m.params : json::object();
  try {
    if (m.method == "initialize") return make_result(m.id, initialize(session, params));
    if (m.method == "ping") return make_result(m.id, json::object());
    if (m.method == "tools/list") return make_result(m.id, list_tools());
    if (m.method == "tools/call") return call_tool(session, m, send, std::move(alive));
    if (m.method == "resources/list") return make_result(m.id, list_resources());
    if (m.method == "resources/read") return make_result(m.id, read_resource(m));
    if (m.method == "resources/templates/list") {
      json list = json::array();
      for (const auto& t : m_resources.templates) {
        json j{{"uriTemplate", t.uri_template}, {"name", t.name}, {"mimeType", t.mime_type}};
        if (!t.title.empty()) j["title"] = t.title;
        if (!t.description.empty()) j["description"] = t.description;
        list.push_back(j);
      }
      return make_result(m.id, json{{"resourceTemplates", list}});
    }
    if (m.method == "logging/setLevel") {
      std::string level = params.value("level", json()).is_string() ? params["level"].get<std::string>() : "";
      bool known = false;
      for (auto l : k_log_levels) known = known || l == level;
      if (!known) return make_error(m.id, ErrorCode::invalid_params, "logging/setLevel: \"level\" must be one of debug, info, notice, warning, error, critical, alert, emergency");
      std::lock_guard lock(m_log_mutex);
      m_log_level = level;
      return make_result(m.id, json::object());
    }
    return make_error(m.id, ErrorCode::method_not_found, fmt::format("method not found: {}", m.method));
  } catch (const ProtocolError& e) {
    return make_error(m.id, e.code, e.message);
  } catch (const std::exception& e) {
    return make_error(m.id, ErrorCode::internal_error, fmt::format("internal error: {}", e.what()));
  }
}

json Server::initialize(Session& session, const json& params) {
  if (!params.contains("protocolVersion") || !params["protocolVersion"].is_string()) {
    throw ProtocolError{ErrorCode::invalid_params, "initialize: \"protocolVersion\" (a string) is required"};
  }
  std::string asked = params["protocolVersion"].get<std::string>();
  // A revision we accept is answered in kind; any other gets ours, and the client decides.
  std::string version = supported_protocol_version(asked) ? asked : std::string(k_protocol_version);
  {
    std::lock_guard lock(session.m_mutex);
    session.m_protocol_version = version;
  }
  json server_info{{"name", m_info.name}, {"version", m_info.version}};
  if (!m_info.title.empty()) server_info["title"] = m_info.title;
  json result{{"protocolVersion", version},
              {"capabilities",
               {{"tools", {{"listChanged", false}}}, {"resources", {{"listChanged", false}, {"subscribe", false}}}, {"logging", json::object()}}},
              {"serverInfo", server_info}};
  if (!m_info.instructions.empty()) result["instructions"] = m_info.instructions;
  return result;
}

json Server::list_tools() const {
  json list = json::array();
  for (const auto& t : m_tools) list.push_back(tool_json(t));
  return json{{"tools", list}};
}

std::optional<json> Server::call_tool(Session& session, const Message& m, const Send& send, std::function<bool()> alive) {
  const json& params = m.params;
  if (!params.is_object() || !params.contains("name") || !params["name"].is_string()) {
    return make_error(m.id, ErrorCode::invalid_params, "tools/call: \"name\" (a string) is required");
  }
  std::string name = params["name"].get<std::string>();
  const Tool* tool = nullptr;
  for (const auto& t : m_tools) {
    if (t.name == name) tool = &t;
  }
  if (!tool) return make_error(m.id, ErrorCode::invalid_params, fmt::format("unknown tool: {} (tools/list names them)", name));
  json args = params.contains("arguments") && !params["arguments"].is_null() ? params["arguments"] : json::object();
  if (auto problem = check_schema(tool->input_schema, args, "arguments")) {
    return make_error(m.id, ErrorCode::invalid_params, fmt::format("{}: {}", name, *problem));
  }
  json token = params.contains("_meta") && params["_meta"].is_object() && params["_meta"].contains("progressToken")
                   ? params["_meta"]["progressToken"]
                   : json(nullptr);
  auto flag = session.begin(m.id);
  ToolContext context(token, send, flag, std::move(alive));
  json result;
  try {
    Result<ToolOutcome> r = tool->run(args, context);
    if (!r) {
      result = text_result(r.error().message, true);
    } else {
      // Text a tool read (a compiler's diagnostics, a file) may hold bytes that are no UTF-8:
      // they are replaced, never a reason to fail the call.
      result = text_result(r->structured.dump(2, ' ', false, json::error_handler_t::replace), r->is_error);
      result["structuredContent"] = std::move(r->structured);
    }
  } catch (const std::exception& e) {
    result = text_result(fmt::format("{} failed inside kope (a bug, please report it): {}", name, e.what()), true);
  } catch (...) {
    result = text_result(fmt::format("{} failed inside kope (a bug, please report it)", name), true);
  }
  if (session.end(m.id)) return std::nullopt;  // cancelled by the client: MCP sends no response
  return make_result(m.id, std::move(result));
}

json Server::list_resources() const {
  json list = json::array();
  if (m_resources.list) {
    auto all = m_resources.list();
    if (!all) throw ProtocolError{ErrorCode::internal_error, all.error().message};
    for (const auto& r : *all) {
      json j{{"uri", r.uri}, {"name", r.name}, {"mimeType", r.mime_type}};
      if (!r.title.empty()) j["title"] = r.title;
      if (!r.description.empty()) j["description"] = r.description;
      list.push_back(j);
    }
  }
  return json{{"resources", list}};
}

json Server::read_resource(const Message& m) const {
  if (!m.params.is_object() || !m.params.contains("uri") || !m.params["uri"].is_string()) {
    throw ProtocolError{ErrorCode::invalid_params, "resources/read: \"uri\" (a string) is required"};
  }
  std::string uri = m.params["uri"].get<std::string>();
  if (!m_resources.read) throw ProtocolError{ErrorCode::resource_not_found, fmt::format("resource not found: {}", uri)};
  auto c = m_resources.read(uri);
  if (!c) {
    throw ProtocolError{c.error().kind == ErrorKind::not_found ? ErrorCode::resource_not_found : ErrorCode::internal_error,
                        c.error().message};
  }
  return json{{"contents", json::array({json{{"uri", c->uri}, {"mimeType", c->mime_type}, {"text", c->text}}})}};
}

std::optional<std::string> check_schema(const json& schema, const json& value, const std::string& path) {
  if (!schema.is_object()) return std::nullopt;
  const std::string where = path.empty() ? "the value" : path;
  if (schema.contains("type")) {
    const json& type = schema["type"];
    bool ok = false;
    if (type.is_string()) {
      ok = has_type(value, type.get<std::string>());
    } else if (type.is_array()) {
      for (const auto& t : type) ok = ok || (t.is_string() && has_type(value, t.get<std::string>()));
    }
    if (!ok) return fmt::format("{}: expected {}, got {}", where, type.is_string() ? type.get<std::string>() : type.dump(), type_of(value));
  }
  if (schema.contains("enum") && schema["enum"].is_array()) {
    bool found = false;
    for (const auto& e : schema["enum"]) found = found || e == value;
    if (!found) return fmt::format("{}: {} is not one of {}", where, value.dump(), schema["enum"].dump());
  }
  if (value.is_number()) {
    double v = value.get<double>();
    if (schema.contains("minimum") && v < schema["minimum"].get<double>()) return fmt::format("{}: below the minimum {}", where, schema["minimum"].dump());
    if (schema.contains("maximum") && v > schema["maximum"].get<double>()) return fmt::format("{}: above the maximum {}", where, schema["maximum"].dump());
  }
  if (value.is_string() && schema.contains("minLength") && value.get<std::string>().size() < schema["minLength"].get<size_t>()) {
    return fmt::format("{}: shorter than {} characters", where, schema["minLength"].dump());
  }
  if (value.is_array() && schema.contains("items")) {
    for (size_t i = 0; i < value.size(); ++i) {
      if (auto p = check_schema(schema["items"], value[i], fmt::format("{}[{}]", where, i))) return p;
    }
  }
  if (value.is_object()) {
    const json props = schema.value("properties", json::object());
    for (const auto& r : schema.value("required", json::array())) {
      if (r.is_string() && !value.contains(r.get<std::string>())) return fmt::format("{}: \"{}\" is required", where, r.get<std::string>());
    }
    for (auto it = value.begin(); it != value.end(); ++it) {
      if (props.contains(it.key())) {
        if (auto p = check_schema(props[it.key()], it.value(), where + "." + it.key())) return p;
      } else if (schema.contains("additionalProperties") && schema["additionalProperties"] == false) {
        return fmt::format("{}: unknown property \"{}\" (known: {})", where, it.key(), [&] {
          std::string names;
          for (auto p = props.begin(); p != props.end(); ++p) names += (names.empty() ? "" : ", ") + p.key();
          return names;
        }());
      }
    }
  }
  return std::nullopt;
}

}  // namespace kope::mcp
