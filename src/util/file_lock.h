// util/file_lock.h — exclusive and shared/exclusive locks that hold across threads and processes
// (flock(2)).
//
// Used to keep timed measurements from overlapping anywhere on the machine: the evaluator's
// timing phase and the hardware probe take the same lock file. The lock is tied to an open file
// description, so two threads of one process exclude each other as two processes do, and the
// kernel drops it when the holder dies (a crashed kope never leaves the machine locked).
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>

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

// A shared/exclusive lock that holds across threads and processes, with writer preference: an
// exclusive taker that is waiting blocks new shared takers, so exclusive holders are never
// starved by a stream of shared ones.
//
// Built from two flock(2) files: `path` itself (LOCK_SH / LOCK_EX) and `path` + ".turnstile".
// An exclusive taker holds the turnstile while it waits for `path`; a shared taker passes
// through the turnstile (takes and drops it) before it takes `path` shared. Processes that take
// `path` with a plain FileLock exclude (and are excluded by) both modes.
//
// Within one thread the lock nests: a shared or exclusive request while the thread already holds
// the lock exclusively, or a shared request while it holds it shared, returns a guard that owns
// nothing (so a compile inside a timing cannot deadlock on its own timing). An exclusive request
// while the thread holds it only shared fails with internal (it could never be granted). Guards
// must be released on the thread that acquired them. Distinct threads and processes exclude each
// other as described above.
class SharedLock {
 public:
  enum class Mode { shared, exclusive };

  // Blocks until `path` is held in `mode` (the files are created, mode 0666, when missing). With
  // a timeout, fails with unavailable once it passes. Fails with io when a file cannot be opened.
  static Result<SharedLock> acquire(const std::filesystem::path& path, Mode mode,
                                    std::optional<std::chrono::milliseconds> timeout = std::nullopt);

  SharedLock(SharedLock&& other) noexcept;
  SharedLock& operator=(SharedLock&& other) noexcept;
  SharedLock(const SharedLock&) = delete;
  SharedLock& operator=(const SharedLock&) = delete;
  ~SharedLock();  // releases

  void release();
  bool held() const { return m_held; }
  Mode mode() const { return m_mode; }
  // True for a guard that nests inside a lock this thread already holds (it owns nothing).
  bool nested() const { return m_held && m_fd < 0; }

 private:
  SharedLock(int fd, Mode mode, std::string key) : m_fd(fd), m_mode(mode), m_held(true), m_key(std::move(key)) {}
  int m_fd = -1;
  Mode m_mode = Mode::shared;
  bool m_held = false;
  std::string m_key;  // the lock file, for this thread's bookkeeping
};

// The machine-wide timing lock: $KOPE_TIMING_LOCK, else /tmp/kope-timing.lock. Every kope
// process that measures time (evaluator timing, `kope hw`) holds it exclusively while measuring;
// kope's own CPU work that would disturb a measurement (compiles, verification, generating
// data) holds it shared.
std::filesystem::path timing_lock_path();

// SharedLock::acquire(timing_lock_path(), exclusive): for measuring.
Result<SharedLock> lock_for_timing();
// SharedLock::acquire(timing_lock_path(), shared): for kope's own work beside other timings.
Result<SharedLock> lock_for_work();

}  // namespace kope::util
