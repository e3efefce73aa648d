// mcp/http.h — the Streamable HTTP transport (MCP 2025-06-18) of the MCP server.
//
// One endpoint, /mcp:
// - POST: one JSON-RPC message. An initialize request opens a session (the Mcp-Session-Id
//   response header); every later message carries that header (400 without it, 404 for a
//   session that is unknown or ended). A notification or response is answered 202. A request is
//   answered with application/json, except a tool call from a client that accepts
//   text/event-stream: that one is answered as an SSE stream carrying its progress
//   notifications, then its response. A client that drops such a stream cancels its tool call.
// - GET: 405 (the server sends no messages outside a request's stream).
// - DELETE: ends the session and cancels its requests in flight.
// Every request is checked before anything else: a bearer token when one is set (401 without
// it), the MCP-Protocol-Version header when present (400 for a revision the server does not
// speak), and against DNS rebinding the Host and Origin headers (403 unless loopback, or an
// origin that is explicitly allowed; the Host check applies while bound to loopback).
// The HTTP library (cpp-httplib) stays inside this class.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kope/error.h"
#include "mcp/server.h"

namespace kope::mcp {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 0;                               // 0: any free port (port() says which)
  std::string bearer_token;                   // empty: none required (loopback only; the CLI enforces it)
  std::vector<std::string> allowed_origins;   // besides http(s)://localhost, 127.0.0.1, [::1]
};

// True for 127.0.0.0/8, ::1 and "localhost".
bool is_loopback_host(std::string_view host);

class HttpServer {
 public:
  // Binds the address. Fails with io when it cannot (in use, not an address of this machine).
  static Result<std::unique_ptr<HttpServer>> bind(Server& server, HttpOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;
  // Serves until stop(); then cancels every session's requests and returns.
  Status serve();
  // Makes serve() return. Thread-safe (not async-signal-safe: call it from a thread).
  void stop();

 private:
  struct Impl;
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> m_impl;
};

}  // namespace kope::mcp
