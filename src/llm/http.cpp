// HttpClient: libcurl's multi interface driven by our own loop, so the idle timeout and
// cancellation are checked every k_http_poll_slice (curl's own low-speed limit has a one-second
// granularity and cannot see a cancelled run).
#include "llm/http.h"

#include <curl/curl.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <mutex>

#include "util/strings.h"

namespace kope::llm {

namespace {

using Clock = std::chrono::steady_clock;

// A body larger than this is not a chat answer; the transfer is stopped.
constexpr size_t k_max_body_bytes = size_t{64} << 20;
constexpr long k_tcp_keepalive_idle_s = 30;
constexpr long k_tcp_keepalive_interval_s = 15;

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// State of one transfer, reached from curl's callbacks.
struct Transfer {
  const HttpRequest* request = nullptr;
  CURL* easy = nullptr;
  Clock::time_point start;
  Clock::time_point last_activity;
  bool got_first_byte = false;
  Clock::time_point first_byte;
  HttpResponse response;
  bool stopped_early = false;
  bool too_large = false;
  size_t body_bytes = 0;

  void touch() {
    last_activity = Clock::now();
    if (!got_first_byte) {
      got_first_byte = true;
      first_byte = last_activity;
    }
  }
};

size_t on_header(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  t->touch();
  std::string_view line(data, n);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  if (util::starts_with(line, "HTTP/")) {
    // A new status line (after "100 Continue" or an informational response): start over.
    t->response.headers.clear();
    return n;
  }
  size_t colon = line.find(':');
  if (colon == std::string_view::npos) return n;
  std::string name = util::to_lower(util::trim(line.substr(0, colon)));
  std::string value(util::trim(line.substr(colon + 1)));
  t->response.headers.emplace_back(std::move(name), std::move(value));
  return n;
}

size_t on_body(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  t->touch();
  t->body_bytes += n;
  if (t->body_bytes > k_max_body_bytes) {
    t->too_large = true;
    return 0;  // CURLE_WRITE_ERROR
  }
  long status = 0;
  curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
  if (t->request->streaming && t->request->on_data && status >= 200 && status < 300) {
    if (!t->request->on_data(std::string_view(data, n))) {
      t->stopped_early = true;
      return 0;
    }
    return n;
  }
  t->response.body.append(data, n);
  return n;
}

bool cancelled(const HttpRequest& r) {
  return (r.cancel != nullptr && r.cancel->cancelled()) ||
         (r.cancel_other != nullptr && r.cancel_other->cancelled());
}

std::string seconds_text(std::chrono::milliseconds ms) {
  return fmt::format("{:g} s", static_cast<double>(ms.count()) / 1000.0);
}

// The failure `kind` with `message` (redacted), and what `t` got before it failed.
std::unexpected<HttpError> transfer_error(HttpFailure kind, std::string message,
                                          const Transfer& t) {
  HttpError e;
  e.kind = kind;
  e.message = redact(message);
  long status = 0;
  if (t.easy != nullptr) curl_easy_getinfo(t.easy, CURLINFO_RESPONSE_CODE, &status);
  e.status = static_cast<int>(status);
  e.partial_body = t.response.body;
  e.seconds = seconds_between(t.start, Clock::now());
  return std::unexpected(std::move(e));
}

using HeaderList = std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)>;

// The request's headers as curl's list, plus an empty "Expect:" (no 100-continue round trip).
HeaderList header_list_of(const HttpRequest& request) {
  curl_slist* header_list = nullptr;
  for (const auto& [k, v] : request.headers) {
    header_list = curl_slist_append(header_list, fmt::format("{}: {}", k, v).c_str());
  }
  header_list = curl_slist_append(header_list, "Expect:");  // no 100-continue round trip
  return HeaderList(header_list, &curl_slist_free_all);
}

// Sets every option of the easy handle `e` for `request`: its callbacks write into `t`.
void configure_easy(CURL* e, const HttpRequest& request, curl_slist* header_list, Transfer& t,
                    char* errbuf, CURLSH* share) {
  curl_easy_setopt(e, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_POST, 1L);
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, request.body.data());
  curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, header_list);
  curl_easy_setopt(e, CURLOPT_USERAGENT, "kope/" KOPE_VERSION);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(request.connect_timeout.count()));
  // Our loop enforces the total timeout; curl's copy is a backstop a little later.
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(request.total_timeout.count() + 2000));
  curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, k_tcp_keepalive_idle_s);
  curl_easy_setopt(e, CURLOPT_TCP_KEEPINTVL, k_tcp_keepalive_interval_s);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &on_header);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &on_body);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
  if (share != nullptr) curl_easy_setopt(e, CURLOPT_SHARE, share);
}

// Drives the transfer of `e` on `multi` until curl has finished it, checking cancellation and
// the total and idle timeouts every k_http_poll_slice; an error when one of them stopped it.
std::expected<void, HttpError> drive_transfer(CURLM* multi, CURL* e, const HttpRequest& request,
                                              const std::string& host, Transfer& t) {
  const Clock::time_point deadline = t.start + request.total_timeout;
  bool idle_clock_started = request.streaming;
  int running = 1;
  while (running != 0) {
    CURLMcode mc = curl_multi_perform(multi, &running);
    if (mc != CURLM_OK)
      return transfer_error(HttpFailure::transport,
                            fmt::format("libcurl: {}", curl_multi_strerror(mc)), t);
    if (running == 0) break;
    const Clock::time_point now = Clock::now();
    if (cancelled(request))
      return transfer_error(HttpFailure::cancelled, "cancelled while waiting for the response", t);
    if (now >= deadline) {
      return transfer_error(HttpFailure::timeout,
                            fmt::format("total timeout: no complete response from {} within {}",
                                        host, seconds_text(request.total_timeout)),
                            t);
    }
    if (!idle_clock_started && t.got_first_byte) idle_clock_started = true;
    if (idle_clock_started) {
      // Connecting is bounded by the connect timeout, not the idle one.
      curl_off_t pretransfer_us = 0;
      curl_easy_getinfo(e, CURLINFO_PRETRANSFER_TIME_T, &pretransfer_us);
      if (pretransfer_us > 0) {
        Clock::time_point sent = t.start + std::chrono::microseconds(pretransfer_us);
        t.last_activity = std::max(t.last_activity, sent);
        if (now - t.last_activity >= request.idle_timeout) {
          return transfer_error(HttpFailure::timeout,
                                fmt::format("idle timeout: no data from {} for {}{}", host,
                                            seconds_text(request.idle_timeout),
                                            t.got_first_byte ? " (the response stalled)" : ""),
                                t);
        }
      }
    }
    curl_multi_poll(multi, nullptr, 0, static_cast<int>(k_http_poll_slice.count()), nullptr);
  }
  return {};
}

// curl's result for `e` once the transfer is over (CURLE_OK when it reports none).
CURLcode transfer_result(CURLM* multi, CURL* e) {
  CURLcode code = CURLE_OK;
  int queued = 0;
  while (CURLMsg* msg = curl_multi_info_read(multi, &queued)) {
    if (msg->msg == CURLMSG_DONE && msg->easy_handle == e) code = msg->data.result;
  }
  return code;
}

// Fills t.response's status, content type, stop flag and timings from the finished `e`.
void complete_response(CURL* e, Transfer& t) {
  long status = 0;
  curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
  t.response.status = static_cast<int>(status);
  t.response.stopped_early = t.stopped_early;
  const char* ctype = nullptr;
  if (curl_easy_getinfo(e, CURLINFO_CONTENT_TYPE, &ctype) == CURLE_OK && ctype != nullptr) {
    t.response.content_type = ctype;
  }
  const Clock::time_point end = Clock::now();
  t.response.seconds = seconds_between(t.start, end);
  t.response.first_byte_seconds =
      t.got_first_byte ? seconds_between(t.start, t.first_byte) : t.response.seconds;
}

// The failure curl's `code` means for the transfer `t` of `e`, classified and named with the
// host (`errbuf` is curl's own detail, when it wrote one).
std::unexpected<HttpError> classify_failure(CURLcode code, CURL* e, const char* errbuf,
                                            const HttpRequest& request, const std::string& host,
                                            const Transfer& t) {
  std::string detail =
      errbuf[0] != '\0' ? std::string(errbuf) : std::string(curl_easy_strerror(code));
  switch (code) {
    case CURLE_OPERATION_TIMEDOUT: {
      curl_off_t connect_us = 0;
      curl_easy_getinfo(e, CURLINFO_CONNECT_TIME_T, &connect_us);
      if (connect_us == 0) {
        return transfer_error(HttpFailure::timeout,
                              fmt::format("connect timeout: cannot connect to {} within {}", host,
                                          seconds_text(request.connect_timeout)),
                              t);
      }
      return transfer_error(HttpFailure::timeout,
                            fmt::format("total timeout: {} ({})", host, detail), t);
    }
    case CURLE_PARTIAL_FILE:
      return transfer_error(
          HttpFailure::truncated,
          fmt::format("truncated response from {}: the connection closed after {} body bytes ({})",
                      host, t.body_bytes, detail),
          t);
    case CURLE_WRITE_ERROR:
      if (t.too_large) {
        return transfer_error(
            HttpFailure::transport,
            fmt::format("response from {} exceeds {} bytes; stopped", host, k_max_body_bytes), t);
      }
      break;
    case CURLE_COULDNT_RESOLVE_HOST:
      return transfer_error(HttpFailure::transport,
                            fmt::format("unreachable: cannot resolve host {} ({})", host, detail),
                            t);
    case CURLE_COULDNT_CONNECT:
      return transfer_error(HttpFailure::transport,
                            fmt::format("unreachable: cannot connect to {} ({})", host, detail), t);
    case CURLE_GOT_NOTHING:
      return transfer_error(
          HttpFailure::transport,
          fmt::format("{} closed the connection without answering ({})", host, detail), t);
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
      if (t.got_first_byte && t.response.status != 0 && t.body_bytes > 0) {
        return transfer_error(
            HttpFailure::truncated,
            fmt::format("truncated response from {}: connection failed after {} body bytes ({})",
                        host, t.body_bytes, detail),
            t);
      }
      return transfer_error(HttpFailure::transport,
                            fmt::format("connection to {} failed: {}", host, detail), t);
    default:
      break;
  }
  return transfer_error(HttpFailure::transport,
                        fmt::format("request to {} failed: {}", host, detail), t);
}

}  // namespace

std::string_view HttpResponse::header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k == name) return v;
  }
  return {};
}

struct HttpClient::Impl {
  CURLSH* share = nullptr;
  std::array<std::mutex, CURL_LOCK_DATA_LAST> locks;

  static void lock(CURL*, curl_lock_data data, curl_lock_access, void* user) {
    static_cast<Impl*>(user)->locks[static_cast<size_t>(data)].lock();
  }
  static void unlock(CURL*, curl_lock_data data, void* user) {
    static_cast<Impl*>(user)->locks[static_cast<size_t>(data)].unlock();
  }

  Impl() {
    global_init();
    share = curl_share_init();
    if (share != nullptr) {
      curl_share_setopt(share, CURLSHOPT_LOCKFUNC, &Impl::lock);
      curl_share_setopt(share, CURLSHOPT_UNLOCKFUNC, &Impl::unlock);
      curl_share_setopt(share, CURLSHOPT_USERDATA, this);
      curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
      curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
      curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
    }
  }
  ~Impl() {
    if (share != nullptr) curl_share_cleanup(share);
  }
};

HttpClient::HttpClient() : m_impl(std::make_unique<Impl>()) {}
HttpClient::~HttpClient() = default;

// Sends the request and waits for the whole answer: set up, drive, then complete or classify.
std::expected<HttpResponse, HttpError> HttpClient::post(const HttpRequest& request) {
  const std::string host = host_of(request.url);
  Transfer t;
  t.request = &request;
  t.start = Clock::now();
  t.last_activity = t.start;
  if (cancelled(request))
    return transfer_error(HttpFailure::cancelled, "cancelled before the request was sent", t);

  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> easy(curl_easy_init(), &curl_easy_cleanup);
  std::unique_ptr<CURLM, decltype(&curl_multi_cleanup)> multi(curl_multi_init(),
                                                              &curl_multi_cleanup);
  if (!easy || !multi)
    return transfer_error(HttpFailure::transport, "cannot initialise libcurl", t);
  t.easy = easy.get();

  HeaderList headers_guard = header_list_of(request);
  std::array<char, CURL_ERROR_SIZE> errbuf{};
  CURL* e = easy.get();
  configure_easy(e, request, headers_guard.get(), t, errbuf.data(), m_impl->share);

  curl_multi_add_handle(multi.get(), e);
  struct Remove {
    CURLM* m;
    CURL* e;
    ~Remove() { curl_multi_remove_handle(m, e); }
  } remove_guard{multi.get(), e};

  if (auto driven = drive_transfer(multi.get(), e, request, host, t); !driven)
    return std::unexpected(std::move(driven).error());
  const CURLcode code = transfer_result(multi.get(), e);
  complete_response(e, t);
  if (code == CURLE_OK || (code == CURLE_WRITE_ERROR && t.stopped_early))
    return std::move(t.response);
  return classify_failure(code, e, errbuf.data(), request, host, t);
}

std::string host_of(std::string_view url) {
  size_t scheme = url.find("://");
  size_t from = scheme == std::string_view::npos ? 0 : scheme + 3;
  size_t end = url.find_first_of("/?#", from);
  std::string_view host =
      url.substr(from, end == std::string_view::npos ? std::string_view::npos : end - from);
  if (size_t at = host.rfind('@'); at != std::string_view::npos)
    host = host.substr(at + 1);  // user:pass@
  return std::string(host);
}

}  // namespace kope::llm
