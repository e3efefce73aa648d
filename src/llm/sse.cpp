// Server-sent events, after the WHATWG "event stream interpretation" rules.
#include "llm/sse.h"

namespace kope::llm {

bool SseParser::feed(std::string_view bytes) {
  if (m_stopped) return false;
  for (char c : bytes) {
    if (c == '\n' && m_last_was_cr) {  // the "\n" of a "\r\n"
      m_last_was_cr = false;
      continue;
    }
    m_last_was_cr = c == '\r';
    if (c == '\n' || c == '\r') {
      std::string done;
      done.swap(m_buffer);
      if (!line(done)) {
        m_stopped = true;
        return false;
      }
      continue;
    }
    m_buffer.push_back(c);
  }
  return true;
}

bool SseParser::finish() {
  if (m_stopped) return false;
  if (!m_buffer.empty()) {
    std::string rest;
    rest.swap(m_buffer);
    if (!line(rest)) return false;
  }
  if (m_has_data) return dispatch();
  return true;
}

bool SseParser::line(std::string_view l) {
  if (l.empty()) {
    if (m_has_data) return dispatch();
    m_current = SseEvent{};  // an event without data is dropped
    return true;
  }
  if (l.front() == ':') return true;  // comment / keep-alive
  size_t colon = l.find(':');
  std::string_view field = l.substr(0, colon);
  std::string_view value =
      colon == std::string_view::npos ? std::string_view() : l.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (field == "data") {
    if (m_has_data) m_current.data.push_back('\n');
    m_current.data.append(value);
    m_has_data = true;
  } else if (field == "event") {
    m_current.event = std::string(value);
  } else if (field != "id" && field != "retry") {
    // Not an SSE field: keep it so the caller can show what the server sent instead.
    if (m_stray.size() < 4096) {
      m_stray.append(l.substr(0, 4096 - m_stray.size()));
      m_stray.push_back('\n');
    }
  }
  return true;
}

bool SseParser::dispatch() {
  SseEvent ev;
  std::swap(ev, m_current);
  m_has_data = false;
  ++m_events;
  return m_handler(ev);
}

}  // namespace kope::llm
