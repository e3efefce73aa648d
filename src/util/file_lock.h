// util/file_lock.h — an exclusive lock that holds across threads and processes (flock(2)).
//
// Used to keep timed measurements from overlapping anywhere on the machine: the evaluator's
// timing phase and the hardware probe take the same lock file. The lock is tied to an open file
// description, so two threads of one process exclude each other as two processes do, and the
// kernel drops it when the holder dies (a crashed kope never leaves the machine locked).
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>

#include "kope/error.h"

namespace kope::util {

class FileLock {
 public:
  // Blocks until the lock on `path` is held (the file is created, mode 0666, when missing).
  // With a timeout, fails with unavailable once it passes. Fails with io when the file cannot
  // be opened.
  static Result<FileLock> acquire(const std::filesystem::path& path,
                                  std::optional<std::chrono::milliseconds> timeout = std::nullopt);

  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();  // releases

  void release();
  bool held() const { return m_fd >= 0; }

 private:
  explicit FileLock(int fd) : m_fd(fd) {}
  int m_fd = -1;
};

// The machine-wide timing lock: $KOPE_TIMING_LOCK, else /tmp/kope-timing.lock. Every kope
// process that measures time (evaluator timing, `kope hw`) holds it while measuring.
std::filesystem::path timing_lock_path();

}  // namespace kope::util
