// agent/events.h — the run's event log: one JSON object per line, appended durably.
//
// Every step that a resumed run must not redo is logged here before the next step starts
// (answers, attempts, memory writes, reflections, finished ops), each line fsynced. A run killed
// at any point (SIGKILL included) leaves at worst one torn last line, which read_events()
// ignores. The log is the source of truth for resume; memory writes are replayed from it
// idempotently (natural keys). EventLog is thread-safe; every event gets a sequence number.
#pragma once

#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kope/error.h"

namespace kope::agent {

class EventLog {
 public:
  // Opens (creating when missing) the log at `path`; the next sequence number follows the
  // events already there.
  static Result<std::unique_ptr<EventLog>> open(const std::filesystem::path& path);

  // Appends `event` with "seq" and "time" (ISO 8601 UTC) added; fsyncs before returning.
  Status append(nlohmann::json event);
  const std::filesystem::path& path() const { return m_path; }

 private:
  EventLog() = default;
  std::filesystem::path m_path;
  std::mutex m_mutex;
  int64_t m_next_seq = 1;
};

// Reads every complete event. A malformed last line (a torn write) is skipped; a malformed line
// before the end fails with corrupt naming the file and line.
Result<std::vector<nlohmann::json>> read_events(const std::filesystem::path& path);

// Current time as ISO 8601 UTC with milliseconds ("2026-05-01T12:00:00.123Z").
std::string now_iso8601();

}  // namespace kope::agent
