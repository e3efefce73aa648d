#include "llm/test_server.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace kope::llm::test {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string_view status_text(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 408:
      return "Request Timeout";
    case 413:
      return "Payload Too Large";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 529:
      return "Overloaded";
    default:
      return "Status";
  }
}

}  // namespace

Connection::~Connection() {
  close();
}

std::optional<ReceivedRequest> Connection::read_request() {
  std::string buf = std::move(m_pending);
  m_pending.clear();
  auto read_more = [&]() -> bool {
    while (!m_server->stopping()) {
      pollfd p{m_fd, POLLIN, 0};
      int r = ::poll(&p, 1, 50);
      if (r < 0) return false;
      if (r == 0) continue;
      char chunk[8192];
      ssize_t n = ::recv(m_fd, chunk, sizeof chunk, 0);
      if (n <= 0) return false;
      buf.append(chunk, static_cast<size_t>(n));
      return true;
    }
    return false;
  };
  size_t header_end;
  while ((header_end = buf.find("\r\n\r\n")) == std::string::npos) {
    if (m_fd < 0 || !read_more()) return std::nullopt;
  }
  ReceivedRequest req;
  req.arrived = Clock::now();
  std::string head = buf.substr(0, header_end);
  size_t line_end = head.find("\r\n");
  std::string request_line = head.substr(0, line_end);
  size_t sp1 = request_line.find(' ');
  size_t sp2 = request_line.find(' ', sp1 + 1);
  req.method = request_line.substr(0, sp1);
  req.path = request_line.substr(sp1 + 1, sp2 - sp1 - 1);
  size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
  while (pos < head.size()) {
    size_t e = head.find("\r\n", pos);
    if (e == std::string::npos) e = head.size();
    std::string line = head.substr(pos, e - pos);
    size_t colon = line.find(':');
    if (colon != std::string::npos) {
      std::string value = line.substr(colon + 1);
      value.erase(0, value.find_first_not_of(' '));
      req.headers[lower(line.substr(0, colon))] = value;
    }
    pos = e + 2;
  }
  size_t length = 0;
  if (auto it = req.headers.find("content-length"); it != req.headers.end())
    length = std::stoul(it->second);
  std::string rest = buf.substr(header_end + 4);
  while (rest.size() < length) {
    buf.clear();
    if (!read_more()) return std::nullopt;
    rest += buf;
  }
  req.body = rest.substr(0, length);
  m_pending = rest.substr(length);
  return req;
}

void Connection::send(std::string_view bytes) {
  size_t done = 0;
  while (m_fd >= 0 && done < bytes.size()) {
    ssize_t n = ::send(m_fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

void Connection::answering() {
  if (on_answer) {
    auto f = std::move(on_answer);
    on_answer = nullptr;
    f();
  }
}

void Connection::respond(int status, std::string_view body,
                         const std::vector<std::string>& extra_headers,
                         std::string_view content_type) {
  answering();
  std::string out = fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n", status,
      status_text(status), content_type, body.size());
  for (const auto& h : extra_headers) out += h + "\r\n";
  out += "\r\n";
  out += body;
  send(out);
}

void Connection::start_stream(const std::vector<std::string>& extra_headers) {
  answering();
  std::string out =
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: "
      "no-cache\r\nConnection: close\r\n";
  for (const auto& h : extra_headers) out += h + "\r\n";
  out += "\r\n";
  send(out);
}

void Connection::event(std::string_view data, std::string_view event_name) {
  std::string out;
  if (!event_name.empty()) out += fmt::format("event: {}\n", event_name);
  out += fmt::format("data: {}\n\n", data);
  send(out);
}

void Connection::pause(std::chrono::milliseconds d) {
  m_server->wait_for(d);
}

void Connection::reset() {
  if (m_fd < 0) return;
  linger l{1, 0};
  ::setsockopt(m_fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  ::close(m_fd);
  m_fd = -1;
}

void Connection::close() {
  if (m_fd < 0) return;
  ::shutdown(m_fd, SHUT_WR);
  // Drain what the client still sends so the close is a FIN, not an RST.
  char sink[4096];
  pollfd p{m_fd, POLLIN, 0};
  while (::poll(&p, 1, 20) > 0 && ::recv(m_fd, sink, sizeof sink, MSG_DONTWAIT) > 0) {
  }
  ::close(m_fd);
  m_fd = -1;
}

TestServer::TestServer() {
  m_listen = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (m_listen < 0) throw std::runtime_error("socket failed");
  int one = 1;
  ::setsockopt(m_listen, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(m_listen, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(m_listen, 64) != 0) {
    throw std::runtime_error("bind/listen on 127.0.0.1 failed");
  }
  socklen_t len = sizeof addr;
  ::getsockname(m_listen, reinterpret_cast<sockaddr*>(&addr), &len);
  m_port = ntohs(addr.sin_port);
  m_acceptor = std::thread([this] { accept_loop(); });
}

TestServer::~TestServer() {
  m_stop = true;
  m_cv.notify_all();
  if (m_acceptor.joinable()) m_acceptor.join();
  std::vector<std::thread> workers;
  {
    std::lock_guard lock(m_mutex);
    workers.swap(m_workers);
  }
  for (auto& t : workers) t.join();
  ::close(m_listen);
}

std::string TestServer::url() const {
  return fmt::format("http://127.0.0.1:{}", m_port);
}

void TestServer::script(std::vector<Handler> handlers) {
  std::lock_guard lock(m_mutex);
  m_handlers = std::move(handlers);
  m_next_handler = 0;
}

std::vector<ReceivedRequest> TestServer::requests() const {
  std::lock_guard lock(m_mutex);
  return m_requests;
}

size_t TestServer::request_count() const {
  std::lock_guard lock(m_mutex);
  return m_requests.size();
}

void TestServer::wait_for(std::chrono::milliseconds d) {
  std::unique_lock lock(m_mutex);
  m_cv.wait_for(lock, d, [this] { return m_stop.load(); });
}

void TestServer::accept_loop() {
  while (!m_stop) {
    pollfd p{m_listen, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    int fd = ::accept4(m_listen, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::lock_guard lock(m_mutex);
    m_workers.emplace_back([this, fd] { serve(fd); });
  }
}

void TestServer::serve(int fd) {
  Connection conn(fd, this);
  auto req = conn.read_request();
  if (!req) return;
  Handler handler;
  {
    std::lock_guard lock(m_mutex);
    m_requests.push_back(*req);
    if (!m_handlers.empty()) {
      handler = m_handlers[std::min(m_next_handler, m_handlers.size() - 1)];
      ++m_next_handler;
    }
  }
  int now = ++m_concurrent;
  int seen = m_max_concurrent.load();
  while (now > seen && !m_max_concurrent.compare_exchange_weak(seen, now)) {
  }
  // A request stops counting as in flight when its answer starts (the client cannot know of
  // it before), or when the handler gives up without answering.
  conn.on_answer = [this] { --m_concurrent; };
  if (handler) {
    handler(conn, *req);
  } else {
    conn.respond(500, R"({"error":{"message":"test server: no handler scripted"}})");
  }
  if (conn.on_answer) conn.on_answer();
}

Handler reply(int status, std::string body, std::vector<std::string> extra_headers,
              std::string content_type) {
  return [=](Connection& c, const ReceivedRequest&) {
    c.respond(status, body, extra_headers, content_type);
  };
}

std::string openai_body(std::string_view text, int prompt_tokens, int completion_tokens,
                        std::string_view finish_reason, int cached_tokens) {
  nlohmann::json j = {{"id", "chatcmpl-test"},
                      {"object", "chat.completion"},
                      {"model", "test-model"},
                      {"choices",
                       {{{"index", 0},
                         {"message", {{"role", "assistant"}, {"content", text}}},
                         {"finish_reason", finish_reason}}}},
                      {"usage",
                       {{"prompt_tokens", prompt_tokens},
                        {"completion_tokens", completion_tokens},
                        {"total_tokens", prompt_tokens + completion_tokens},
                        {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}}}};
  return j.dump();
}

std::string anthropic_body(std::string_view text, int input_tokens, int output_tokens,
                           std::string_view stop_reason) {
  nlohmann::json j = {
      {"id", "msg_test"},
      {"type", "message"},
      {"role", "assistant"},
      {"model", "claude-test"},
      {"content", {{{"type", "text"}, {"text", text}}}},
      {"stop_reason", stop_reason},
      {"usage", {{"input_tokens", input_tokens}, {"output_tokens", output_tokens}}}};
  return j.dump();
}

}  // namespace kope::llm::test
