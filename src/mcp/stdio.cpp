#include "mcp/stdio.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <list>
#include <mutex>
#include <thread>

#include <fmt/format.h>

namespace kope::mcp {

namespace {

// Writes whole lines to one descriptor from any thread.
class LineWriter {
 public:
  explicit LineWriter(int fd) : m_fd(fd) {}
  bool write(const json& message) {
    std::string line = message.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
    std::lock_guard lock(m_mutex);
    if (m_broken) return false;
    size_t off = 0;
    while (off < line.size()) {
      ssize_t n = ::write(m_fd, line.data() + off, line.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        m_broken = true;  // the client closed its end: nothing more can reach it
        return false;
      }
      off += static_cast<size_t>(n);
    }
    return true;
  }
  bool broken() {
    std::lock_guard lock(m_mutex);
    return m_broken;
  }

 private:
  int m_fd;
  std::mutex m_mutex;
  bool m_broken = false;
};

struct Worker {
  std::thread thread;
  std::shared_ptr<std::atomic<bool>> done = std::make_shared<std::atomic<bool>>(false);
};

}  // namespace

Status serve_stdio(Server& server, int in_fd, int out_fd) {
  Session session;
  LineWriter out(out_fd);
  Send send = [&out](const json& m) { return out.write(m); };
  std::list<Worker> workers;
  auto reap = [&workers](bool all) {
    for (auto it = workers.begin(); it != workers.end();) {
      if (all || it->done->load()) {
        it->thread.join();
        it = workers.erase(it);
      } else {
        ++it;
      }
    }
  };
  auto handle_line = [&](std::string_view line) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) return;
    auto parsed = parse_message(line);
    if (auto* error = std::get_if<json>(&parsed)) {
      out.write(*error);
      return;
    }
    Message m = std::get<Message>(std::move(parsed));
    if (!Server::is_long(m)) {
      if (auto reply = server.handle(session, m, send)) out.write(*reply);
      return;
    }
    Worker w;
    w.thread = std::thread([&server, &session, &send, &out, m = std::move(m), done = w.done] {
      if (auto reply = server.handle(session, m, send, [&out] { return !out.broken(); })) out.write(*reply);
      done->store(true);
    });
    workers.push_back(std::move(w));
  };

  std::string buffer;
  bool skipping = false;  // inside a line longer than k_max_stdio_line
  char chunk[65536];
  Status status;
  for (;;) {
    ssize_t n = ::read(in_fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      status = fail(ErrorKind::io, "reading the client's messages: {}", std::strerror(errno));
      break;
    }
    if (n == 0) break;
    buffer.append(chunk, static_cast<size_t>(n));
    size_t start = 0;
    for (size_t nl; (nl = buffer.find('\n', start)) != std::string::npos; start = nl + 1) {
      if (!skipping) handle_line(std::string_view(buffer).substr(start, nl - start));
      skipping = false;
    }
    buffer.erase(0, start);
    if (buffer.size() > k_max_stdio_line) {
      if (!skipping) out.write(make_error(nullptr, ErrorCode::parse_error, fmt::format("a message longer than {} bytes", k_max_stdio_line)));
      skipping = true;
      buffer.clear();
    }
    reap(false);
  }
  if (!skipping && !buffer.empty()) handle_line(buffer);  // a last message without its newline
  // The client is gone: stop what it asked for, then wait for each request to end.
  session.cancel_all();
  reap(true);
  return status;
}

}  // namespace kope::mcp
