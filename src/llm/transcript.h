// llm/transcript.h — the JSONL transcript of LLM calls (ClientOptions::transcript).
//
// One JSON object per line, appended with a single write(2) to a file opened O_APPEND and
// fdatasync'ed before write() returns, so a crash loses at most the line being written and
// lines of several threads or processes never interleave. Every line passes through redact().
// Every event has "ts" (UTC, ISO 8601 with milliseconds), "pid" and "event":
//   request        call, profile, provider, model, url, purpose, stream, body (the JSON sent)
//   response       call, attempt, status, request_id, latency_s, first_byte_s, text,
//                  finish_reason, usage {prompt, completion, cached, estimated}, cost_usd, body
//                  (the provider's JSON for a non-streamed answer)
//   attempt_failed call, attempt, class, http_status, message, body (the error body, capped),
//                  retry_in_s (absent when this was the last attempt)
//   failure        call, attempts, class, http_status, message
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>

#include "kope/error.h"

namespace kope::llm {

class TranscriptWriter {
 public:
  // The writer of `path` in this process (one per file, shared). Creates parent directories
  // and the file; fails with io when it cannot be opened for appending.
  static Result<std::shared_ptr<TranscriptWriter>> open(const std::filesystem::path& path);
  ~TranscriptWriter();
  TranscriptWriter(const TranscriptWriter&) = delete;
  TranscriptWriter& operator=(const TranscriptWriter&) = delete;

  // Adds "ts" and "pid" and appends the event. Thread-safe.
  Status write(nlohmann::ordered_json event);
  const std::filesystem::path& path() const { return m_path; }

 private:
  TranscriptWriter(std::filesystem::path path, int fd) : m_path(std::move(path)), m_fd(fd) {}
  std::filesystem::path m_path;
  int m_fd = -1;
  std::mutex m_mutex;
};

}  // namespace kope::llm
