// mcp/server.h — the Model Context Protocol server core, independent of the transport.
//
// A Server answers MCP messages (protocol revision 2025-06-18): initialize, ping, tools/list,
// tools/call, resources/list, resources/read, resources/templates/list, logging/setLevel, and the
// notifications initialized and cancelled. It knows tools and resources only through the
// Tool / ResourceSource values it is given (tools/kope/mcp_tools.cpp supplies kope's). A
// transport (mcp/stdio.h, mcp/http.h) reads messages, keeps one Session per client, and calls
// handle(), on several threads at once when it wants requests to overlap: Server and Session
// are thread-safe.
//
// Errors: a message that is no valid request gets the standard JSON-RPC error (mcp/jsonrpc.h);
// an unknown method -32601; an unknown tool or arguments that do not fit the tool's input schema
// -32602. A tool that runs and fails (unknown op, a memory that cannot be opened) is a result
// with isError and the message as text. A tool that throws is caught and reported the same way,
// so no input crashes the server.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kope/error.h"
#include "mcp/jsonrpc.h"

namespace kope::mcp {

// The revision this server implements, and every revision it accepts from a client.
inline constexpr std::string_view k_protocol_version = "2025-06-18";
bool supported_protocol_version(std::string_view version);

// Delivers one message to the client; false once it can no longer be delivered (the client left).
using Send = std::function<bool(const json&)>;

// What a running tool sees of its request. Used by the one thread that runs the tool.
class ToolContext {
 public:
  ToolContext(const json& progress_token, const Send& send, std::shared_ptr<std::atomic<bool>> cancel,
              std::function<bool()> alive)
      : m_token(progress_token), m_send(send), m_cancel(std::move(cancel)), m_alive(std::move(alive)) {}

  // Sends notifications/progress when the request carried a progressToken (else nothing).
  // `done` must grow from call to call (calls that do not are skipped); `total` may be unknown.
  void progress(double done, std::optional<double> total, std::string_view message);
  // True once the client cancelled the request (notifications/cancelled), its session ended, or
  // the transport found the client gone. Cheap; long tools poll it and stop their work.
  bool cancelled() const;
  // The cancellation flag itself, for code that polls it without the context.
  const std::atomic<bool>& cancel_flag() const { return *m_cancel; }

 private:
  json m_token;
  const Send& m_send;
  std::shared_ptr<std::atomic<bool>> m_cancel;
  std::function<bool()> m_alive;
  std::optional<double> m_last;
};

// What a tool returns: its structured content (a JSON object that fits its output schema) and
// whether that reports a failed outcome (isError; e.g. a kernel that is not correct).
struct ToolOutcome {
  json structured = json::object();
  bool is_error = false;
};

struct Tool {
  std::string name;
  std::string title;
  std::string description;
  json input_schema;   // a JSON Schema object ("type": "object")
  json output_schema;  // likewise: the shape of ToolOutcome::structured
  json annotations = json::object();  // readOnlyHint, destructiveHint, ...
  // Runs the tool on validated arguments. An Error becomes a result with isError and its message.
  std::function<Result<ToolOutcome>(const json& arguments, ToolContext& context)> run;
};

struct Resource {
  std::string uri;
  std::string name;
  std::string title;
  std::string description;
  std::string mime_type;
};

struct ResourceTemplate {
  std::string uri_template;  // RFC 6570, e.g. kope://ops/{name}/spec
  std::string name;
  std::string title;
  std::string description;
  std::string mime_type;
};

struct ResourceContents {
  std::string uri;
  std::string mime_type;
  std::string text;
};

// The server's resources: listed on demand (they change as runs finish), read by URI.
struct ResourceSource {
  std::function<Result<std::vector<Resource>>()> list;
  std::vector<ResourceTemplate> templates;
  // Fails with not_found for a URI it does not know (answered as -32002, "resource not found").
  std::function<Result<ResourceContents>(const std::string& uri)> read;
};

struct ServerInfo {
  std::string name = "kope";
  std::string title;
  std::string version;
  std::string instructions;
};

// One client's state: the negotiated revision, its requests in flight (to cancel them).
// Thread-safe.
class Session {
 public:
  Session() = default;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Cancels every request in flight (the client went away or ended the session).
  void cancel_all();
  // Cancels one request by its JSON-RPC id; false when none with that id is in flight.
  bool cancel(const json& id);
  bool initialized() const { return m_initialized.load(); }
  std::string protocol_version() const;
  size_t in_flight() const;

 private:
  friend class Server;
  std::shared_ptr<std::atomic<bool>> begin(const json& id);
  // Ends a request; true when the client cancelled it (then it gets no response).
  bool end(const json& id);

  mutable std::mutex m_mutex;
  std::map<std::string, std::shared_ptr<std::atomic<bool>>> m_in_flight;  // by id.dump()
  std::set<std::string> m_cancelled;  // in flight, and cancelled by notifications/cancelled
  std::string m_protocol_version;
  std::atomic<bool> m_initialized{false};
  bool m_ended = false;
};

class Server {
 public:
  Server(ServerInfo info, std::vector<Tool> tools, ResourceSource resources);

  // Handles one message of `session`'s client and returns the response to send, or nullopt (a
  // notification, a response, or a request the client cancelled: MCP sends no response then).
  // A request stopped because its session ended (Session::cancel_all) still gets its response,
  // for a transport that can deliver it.
  // `send` delivers the request's notifications (progress) while it runs, on this thread;
  // `alive` (may be empty) tells whether the client is still there.
  std::optional<json> handle(Session& session, const Message& message, const Send& send, std::function<bool()> alive = {});
  // handle() for text: a line that is no valid message is answered with its error response.
  std::optional<json> handle_text(Session& session, std::string_view text, const Send& send, std::function<bool()> alive = {});

  // Whether a request may run long (tools/call): transports run those off their reading thread.
  static bool is_long(const Message& message);

  const std::vector<Tool>& tools() const { return m_tools; }

 private:
  json initialize(Session& session, const json& params);
  json list_tools() const;
  std::optional<json> call_tool(Session& session, const Message& m, const Send& send, std::function<bool()> alive);
  json list_resources() const;
  json read_resource(const Message& m) const;

  ServerInfo m_info;
  std::vector<Tool> m_tools;
  ResourceSource m_resources;
  std::mutex m_log_mutex;
  std::string m_log_level = "info";
};

// Checks `value` against the subset of JSON Schema the tools' input schemas use (type, properties,
// required, enum, items, minimum/maximum, additionalProperties: false). Returns the first problem
// ("ops: expected an array"), or nullopt when it fits.
std::optional<std::string> check_schema(const json& schema, const json& value, const std::string& path = "");

// An error thrown inside a request that must reach the client as a JSON-RPC error.
struct ProtocolError {
  ErrorCode code;
  std::string message;
};

}  // namespace kope::mcp
