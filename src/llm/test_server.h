// llm/test_server.h — a scriptable HTTP/1.1 server on 127.0.0.1 for the client tests (test code
// only, not part of kope_lib). Each accepted connection is served by the next handler of the
// script on its own thread; the handler controls every byte and every pause, so tests can play
// slow, broken, truncated and misbehaving servers exactly.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace kope::llm::test {

using Clock = std::chrono::steady_clock;

struct ReceivedRequest {
  std::string method;
  std::string path;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  Clock::time_point arrived;

  bool has_header(const std::string& name) const { return headers.contains(name); }
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
};

class TestServer;

// One client connection, as a handler sees it.
class Connection {
 public:
  Connection(int fd, TestServer* server) : m_fd(fd), m_server(server) {}
  ~Connection();

  // Reads one request (headers and a Content-Length body). nullopt on EOF, error or stop.
  std::optional<ReceivedRequest> read_request();
  // Sends raw bytes (errors ignored: the client may have gone).
  void send(std::string_view bytes);
  // A complete response with Content-Length and "Connection: close".
  void respond(int status, std::string_view body,
               const std::vector<std::string>& extra_headers = {},
               std::string_view content_type = "application/json");
  // Starts a close-delimited text/event-stream response.
  void start_stream(const std::vector<std::string>& extra_headers = {});
  // "data: <data>\n\n" (with "event: <event>\n" first when given).
  void event(std::string_view data, std::string_view event_name = {});
  // Sleeps, returning early when the server stops.
  void pause(std::chrono::milliseconds d);
  // Closes with an RST (SO_LINGER 0) instead of a FIN.
  void reset();
  void close();

  // Called once, when the handler starts its answer (respond, start_stream) or returns.
  std::function<void()> on_answer;

 private:
  void answering();
  int m_fd;
  TestServer* m_server;
  std::string m_pending;  // bytes read past the last request
};

using Handler = std::function<void(Connection&, const ReceivedRequest&)>;

class TestServer {
 public:
  TestServer();
  ~TestServer();
  TestServer(const TestServer&) = delete;
  TestServer& operator=(const TestServer&) = delete;

  int port() const { return m_port; }
  std::string url() const;  // "http://127.0.0.1:<port>"

  // The i-th request is answered by the i-th handler; later ones by the last handler.
  void script(std::vector<Handler> handlers);

  std::vector<ReceivedRequest> requests() const;
  size_t request_count() const;
  // The most requests in flight at once: read but not yet answered.
  int max_concurrent() const { return m_max_concurrent.load(); }

  bool stopping() const { return m_stop.load(); }
  // Waits up to `d` or until stop; used by Connection::pause.
  void wait_for(std::chrono::milliseconds d);

 private:
  void accept_loop();
  void serve(int fd);

  int m_listen = -1;
  int m_port = 0;
  std::atomic<bool> m_stop{false};
  std::thread m_acceptor;
  mutable std::mutex m_mutex;
  std::condition_variable m_cv;
  std::vector<std::thread> m_workers;
  std::vector<Handler> m_handlers;
  std::vector<ReceivedRequest> m_requests;
  size_t m_next_handler = 0;
  std::atomic<int> m_concurrent{0};
  std::atomic<int> m_max_concurrent{0};
};

// Canned handlers and bodies.
Handler reply(int status, std::string body, std::vector<std::string> extra_headers = {},
              std::string content_type = "application/json");
std::string openai_body(std::string_view text, int prompt_tokens, int completion_tokens,
                        std::string_view finish_reason = "stop", int cached_tokens = 0);
std::string anthropic_body(std::string_view text, int input_tokens, int output_tokens,
                           std::string_view stop_reason = "end_turn");

}  // namespace kope::llm::test
