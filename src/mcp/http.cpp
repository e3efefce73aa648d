#include "mcp/http.h"

#include <arpa/inet.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <random>

#include <fmt/format.h>
#include <httplib.h>

#include "util/strings.h"

namespace kope::mcp {

namespace {

// How long a connection may stay idle or a read or write may take; an SSE stream writes a
// comment at least this often (k_heartbeat), so a client that left is noticed within a second.
constexpr int k_read_timeout_seconds = 30;
constexpr int k_write_timeout_seconds = 30;
constexpr auto k_heartbeat = std::chrono::seconds(1);
constexpr size_t k_max_body_bytes = 64u << 20;
// A session without requests for this long, and none in flight, is ended when a new one opens
// (a client that never sent DELETE).
constexpr auto k_session_idle = std::chrono::hours(1);
constexpr const char* k_endpoint = "/mcp";

std::string random_session_id() {
  std::random_device rd;
  std::string id;
  for (int i = 0; i < 4; ++i) id += fmt::format("{:08x}", rd());
  return id;
}

// The host of a Host header value ("localhost:8080", "[::1]:3000") or of an origin
// ("http://127.0.0.1:3000"), lower-case, without brackets and port.
std::string host_of(std::string_view value, bool origin) {
  if (origin) {
    size_t scheme = value.find("://");
    if (scheme == std::string_view::npos) return {};
    value.remove_prefix(scheme + 3);
    value = value.substr(0, value.find('/'));
  }
  if (value.starts_with('[')) {
    size_t close = value.find(']');
    return close == std::string_view::npos ? std::string() : util::to_lower(value.substr(1, close - 1));
  }
  return util::to_lower(value.substr(0, value.find(':')));
}

bool same_secret(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % (b.empty() ? 1 : b.size())]);
  return diff == 0 && !b.empty();
}

void json_reply(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

std::string sse_event(const json& message) {
  return "event: message\ndata: " + message.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

}  // namespace

bool is_loopback_host(std::string_view host) {
  if (host == "localhost" || host == "::1") return true;
  in_addr a{};
  if (inet_pton(AF_INET, std::string(host).c_str(), &a) == 1) return (ntohl(a.s_addr) >> 24) == 127;
  return false;
}

struct HttpServer::Impl {
  Server& server;
  HttpOptions options;
  httplib::Server http;
  int port = 0;
  std::mutex mutex;
  struct Entry {
    std::shared_ptr<Session> session;
    std::chrono::steady_clock::time_point last_used;
  };
  std::map<std::string, Entry> sessions;

  Impl(Server& s, HttpOptions o) : server(s), options(std::move(o)) {}

  std::shared_ptr<Session> session(const std::string& id) {
    std::lock_guard lock(mutex);
    auto it = sessions.find(id);
    if (it == sessions.end()) return nullptr;
    it->second.last_used = std::chrono::steady_clock::now();
    return it->second.session;
  }

  // Opens a session; ends the ones idle for k_session_idle first.
  void open_session(const std::string& id, std::shared_ptr<Session> s) {
    auto now = std::chrono::steady_clock::now();
    std::lock_guard lock(mutex);
    for (auto it = sessions.begin(); it != sessions.end();) {
      if (now - it->second.last_used > k_session_idle && it->second.session->in_flight() == 0) {
        it->second.session->cancel_all();
        it = sessions.erase(it);
      } else {
        ++it;
      }
    }
    sessions[id] = Entry{std::move(s), now};
  }

  // The checks every request passes first; false when `res` already holds the refusal.
  bool admit(const httplib::Request& req, httplib::Response& res) {
    if (req.has_header("Origin")) {
      std::string origin = req.get_header_value("Origin");
      bool listed = std::find(options.allowed_origins.begin(), options.allowed_origins.end(), origin) != options.allowed_origins.end();
      if (!listed && !is_loopback_host(host_of(origin, true))) {
        json_reply(res, 403, make_error(nullptr, ErrorCode::invalid_request,
                                        fmt::format("forbidden origin '{}' (DNS rebinding protection: only loopback origins, or "
                                                    "those given with --allow-origin, may call this server)", origin)));
        return false;
      }
    }
    if (is_loopback_host(options.host) && req.has_header("Host") && !is_loopback_host(host_of(req.get_header_value("Host"), false))) {
      json_reply(res, 403, make_error(nullptr, ErrorCode::invalid_request,
                                      fmt::format("forbidden Host '{}' (DNS rebinding protection: this server answers only to "
                                                  "localhost, 127.0.0.1 and [::1])", req.get_header_value("Host"))));
      return false;
    }
    if (!options.bearer_token.empty()) {
      std::string auth = req.get_header_value("Authorization");
      if (!auth.starts_with("Bearer ") || !same_secret(std::string_view(auth).substr(7), options.bearer_token)) {
        res.set_header("WWW-Authenticate", "Bearer");
        json_reply(res, 401, make_error(nullptr, ErrorCode::invalid_request, "unauthorized: send the server's token as 'Authorization: Bearer <token>'"));
        return false;
      }
    }
    if (req.has_header("MCP-Protocol-Version") && !supported_protocol_version(req.get_header_value("MCP-Protocol-Version"))) {
      json_reply(res, 400, make_error(nullptr, ErrorCode::invalid_request,
                                      fmt::format("unsupported MCP-Protocol-Version '{}' (this server speaks {})",
                                                  req.get_header_value("MCP-Protocol-Version"), k_protocol_version)));
      return false;
    }
    return true;
  }

  void post(const httplib::Request& req, httplib::Response& res) {
    if (!admit(req, res)) return;
    auto parsed = parse_message(req.body);
    if (auto* error = std::get_if<json>(&parsed)) {
      json_reply(res, 400, *error);
      return;
    }
    Message m = std::get<Message>(std::move(parsed));
    std::shared_ptr<Session> s;
    if (m.is_request() && m.method == "initialize") {
      s = std::make_shared<Session>();
      std::string id = random_session_id();
      Send none = [](const json&) { return true; };
      auto reply = server.handle(*s, m, none);
      if (reply && reply->contains("result")) {
        open_session(id, s);
        res.set_header("Mcp-Session-Id", id);
      }
      json_reply(res, 200, reply.value_or(json::object()));
      return;
    }
    std::string id = req.get_header_value("Mcp-Session-Id");
    if (id.empty()) {
      json_reply(res, 400, make_error(m.is_request() ? m.id : json(nullptr), ErrorCode::invalid_request,
                                      "missing Mcp-Session-Id header (send initialize first)"));
      return;
    }
    s = session(id);
    if (!s) {
      json_reply(res, 404, make_error(m.is_request() ? m.id : json(nullptr), ErrorCode::invalid_request,
                                      "unknown or ended session: initialize again"));
      return;
    }
    if (!m.is_request()) {
      server.handle(*s, m, Send());
      res.status = 202;
      return;
    }
    std::string accept = req.get_header_value("Accept");
    if (!Server::is_long(m) || accept.find("text/event-stream") == std::string::npos) {
      Send none = [](const json&) { return true; };
      auto reply = server.handle(*s, m, none);
      if (reply) {
        json_reply(res, 200, *reply);
      } else {
        res.status = 204;  // cancelled while it ran: MCP sends no response
      }
      return;
    }
    // A tool call as an SSE stream: its notifications as they come, then its response.
    res.status = 200;
    res.set_header("Cache-Control", "no-cache");
    auto started = std::make_shared<bool>(false);
    res.set_chunked_content_provider(
        "text/event-stream", [this, s, m, started](size_t, httplib::DataSink& sink) {
          if (*started) {
            sink.done();
            return true;
          }
          *started = true;
          bool gone = false;
          auto last = std::chrono::steady_clock::now();
          Send send = [&](const json& message) {
            if (gone) return false;
            std::string event = sse_event(message);
            gone = !sink.write(event.data(), event.size());
            last = std::chrono::steady_clock::now();
            return !gone;
          };
          auto alive = [&]() {
            if (gone || (sink.is_writable && !sink.is_writable())) return false;
            if (std::chrono::steady_clock::now() - last >= k_heartbeat) {
              static constexpr char k_comment[] = ": kope is working\n\n";
              gone = !sink.write(k_comment, sizeof k_comment - 1);
              last = std::chrono::steady_clock::now();
            }
            return !gone;
          };
          auto reply = server.handle(*s, m, send, alive);
          if (reply && !gone) send(*reply);
          sink.done();
          return true;
        });
  }

  void remove(const httplib::Request& req, httplib::Response& res) {
    if (!admit(req, res)) return;
    std::string id = req.get_header_value("Mcp-Session-Id");
    std::shared_ptr<Session> s;
    {
      std::lock_guard lock(mutex);
      auto it = sessions.find(id);
      if (it != sessions.end()) {
        s = it->second.session;
        sessions.erase(it);
      }
    }
    if (!s) {
      json_reply(res, 404, make_error(nullptr, ErrorCode::invalid_request, "unknown or ended session"));
      return;
    }
    s->cancel_all();
    res.status = 200;
  }
};

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}

HttpServer::~HttpServer() {
  stop();
}

Result<std::unique_ptr<HttpServer>> HttpServer::bind(Server& server, HttpOptions options) {
  auto impl = std::make_unique<Impl>(server, std::move(options));
  Impl* p = impl.get();
  p->http.set_read_timeout(k_read_timeout_seconds);
  p->http.set_write_timeout(k_write_timeout_seconds);
  p->http.set_payload_max_length(k_max_body_bytes);
  p->http.Post(k_endpoint, [p](const httplib::Request& req, httplib::Response& res) { p->post(req, res); });
  p->http.Get(k_endpoint, [p](const httplib::Request& req, httplib::Response& res) {
    if (!p->admit(req, res)) return;
    res.set_header("Allow", "POST, DELETE");
    res.status = 405;
  });
  p->http.Delete(k_endpoint, [p](const httplib::Request& req, httplib::Response& res) { p->remove(req, res); });
  std::string host = p->options.host;
  if (p->options.port == 0) {
    p->port = p->http.bind_to_any_port(host);
    if (p->port <= 0) return fail(ErrorKind::io, "cannot listen on {} (not an address of this machine?)", host);
  } else {
    if (!p->http.bind_to_port(host, p->options.port)) {
      return fail(ErrorKind::io, "cannot listen on {}:{} (in use, or not an address of this machine)", host, p->options.port);
    }
    p->port = p->options.port;
  }
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

int HttpServer::port() const { return m_impl->port; }

Status HttpServer::serve() {
  bool ok = m_impl->http.listen_after_bind();
  std::lock_guard lock(m_impl->mutex);
  for (auto& [id, entry] : m_impl->sessions) entry.session->cancel_all();
  if (!ok) return fail(ErrorKind::io, "the HTTP server stopped with an error");
  return {};
}

void HttpServer::stop() {
  {
    std::lock_guard lock(m_impl->mutex);
    for (auto& [id, entry] : m_impl->sessions) entry.session->cancel_all();
  }
  if (m_impl->http.is_running()) m_impl->http.stop();
}

}  // namespace kope::mcp
