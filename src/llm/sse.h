// llm/sse.h — an incremental parser for server-sent events (text/event-stream).
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace kope::llm {

struct SseEvent {
  std::string event;  // the "event:" field ("" when absent: the default "message")
  std::string data;   // "data:" lines joined with '\n'
};

// Feed bytes as they arrive; each complete event (ended by a blank line) goes to the handler.
// Lines may end in "\n", "\r\n" or "\r"; comment lines (":...") and unknown fields are skipped.
// Not thread-safe (one stream, one parser).
class SseParser {
 public:
  // The handler returns false to stop: feed() then returns false and ignores the rest.
  using Handler = std::function<bool(const SseEvent&)>;
  explicit SseParser(Handler handler) : m_handler(std::move(handler)) {}

  bool feed(std::string_view bytes);
  // Dispatches an event left without its closing blank line (a stream that ends after the last
  // "data:" line). Returns false when the handler asked to stop.
  bool finish();
  // Bytes received that did not belong to any event line (e.g. a JSON body instead of SSE).
  const std::string& stray() const { return m_stray; }
  size_t events() const { return m_events; }

 private:
  bool line(std::string_view line);
  bool dispatch();

  Handler m_handler;
  std::string m_buffer;
  SseEvent m_current;
  bool m_has_data = false;
  bool m_stopped = false;
  bool m_last_was_cr = false;
  size_t m_events = 0;
  std::string m_stray;
};

}  // namespace kope::llm
