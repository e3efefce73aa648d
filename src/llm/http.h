// llm/http.h — one HTTP POST with explicit timeouts; libcurl stays inside HttpClient (pimpl).
//
// Timeouts: connect (TCP + TLS handshake), idle (no byte received for that long) and total
// (the whole exchange). A streamed response is watched for idleness from the moment the request
// is sent; a non-streamed one only after its first byte, because a server sends a non-streamed
// chat answer only once it is complete (then only the total timeout bounds the wait).
#pragma once

#include <chrono>
#include <expected>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kope/llm.h"

namespace kope::llm {

// How often a transfer in progress checks the idle timeout and cancellation.
inline constexpr std::chrono::milliseconds k_http_poll_slice{25};

using Headers = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string url;
  Headers headers;  // sent as given; never logged by this class
  std::string body;
  std::chrono::milliseconds connect_timeout = k_default_connect_timeout;
  std::chrono::milliseconds idle_timeout = k_default_idle_timeout;
  std::chrono::milliseconds total_timeout = k_default_total_timeout;
  bool streaming = false;  // idle timeout from the start; body chunks go to on_data
  // Streaming only: receives each body chunk of a 2xx response as it arrives (other statuses
  // are collected in HttpResponse::body). Returns false to stop the transfer early (success).
  std::function<bool(std::string_view)> on_data;
  const CancelToken* cancel = nullptr;        // checked every k_http_poll_slice
  const CancelToken* cancel_other = nullptr;  // a second token (client-wide)
};

struct HttpResponse {
  int status = 0;
  Headers headers;   // names lower-cased, in arrival order
  std::string body;  // empty when streamed to on_data
  std::string content_type;
  double seconds = 0;             // request start -> last byte
  double first_byte_seconds = 0;  // request start -> first response byte
  bool stopped_early = false;     // on_data returned false

  // The first header called `name` (lower case), or "".
  std::string_view header(std::string_view name) const;
};

enum class HttpFailure {
  transport,  // could not connect, connection reset, DNS, TLS, nothing received
  timeout,    // connect, idle or total timeout
  truncated,  // the connection ended before the body announced by Content-Length/chunking
  cancelled,
};

struct HttpError {
  HttpFailure kind = HttpFailure::transport;
  std::string message;  // one line, redacted, names the host and the cause
  int status = 0;       // the status line when one arrived before the failure
  std::string partial_body;
  double seconds = 0;
};

// Thread-safe: perform() may be called from many threads at once. Connections, DNS results and
// TLS sessions are shared (and reused) between calls of one HttpClient.
class HttpClient {
 public:
  HttpClient();
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  std::expected<HttpResponse, HttpError> post(const HttpRequest& request);

 private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

// The host part of a URL (no scheme, path, query or user:pass@; the port stays).
std::string host_of(std::string_view url);

}  // namespace kope::llm
