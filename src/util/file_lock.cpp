#include "util/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "util/fs.h"

namespace kope::util {

Result<FileLock> FileLock::acquire(const std::filesystem::path& path,
                                   std::optional<std::chrono::milliseconds> timeout) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0 && (errno == EACCES || errno == EPERM)) {
    // Another user's lock file: a read-only descriptor is enough for flock.
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  }
  if (fd < 0) return fail(ErrorKind::io, "cannot open the lock file {}: {}", path.string(), std::strerror(errno));
  // Other users must be able to share the lock; umask may have narrowed the mode.
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_uid == ::geteuid() && (st.st_mode & 0666) != 0666) ::fchmod(fd, 0666);
  if (!timeout) {
    int rc;
    do {
      rc = ::flock(fd, LOCK_EX);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
      int saved = errno;
      ::close(fd);
      return fail(ErrorKind::io, "cannot lock {}: {}", path.string(), std::strerror(saved));
    }
    return FileLock(fd);
  }
  auto deadline = std::chrono::steady_clock::now() + *timeout;
  for (;;) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return FileLock(fd);
    if (errno != EWOULDBLOCK && errno != EINTR) {
      int saved = errno;
      ::close(fd);
      return fail(ErrorKind::io, "cannot lock {}: {}", path.string(), std::strerror(saved));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      ::close(fd);
      return fail(ErrorKind::unavailable, "{} stayed locked for {} ms (another measurement is running)",
                  path.string(), timeout->count());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

FileLock::FileLock(FileLock&& other) noexcept : m_fd(other.m_fd) { other.m_fd = -1; }

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    release();
    m_fd = other.m_fd;
    other.m_fd = -1;
  }
  return *this;
}

FileLock::~FileLock() { release(); }

void FileLock::release() {
  if (m_fd >= 0) {
    ::flock(m_fd, LOCK_UN);
    ::close(m_fd);
    m_fd = -1;
  }
}

namespace {

Result<int> open_lock_file(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0 && (errno == EACCES || errno == EPERM)) fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(ErrorKind::io, "cannot open the lock file {}: {}", path.string(), std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_uid == ::geteuid() && (st.st_mode & 0666) != 0666) ::fchmod(fd, 0666);
  return fd;
}

// flock(fd, op) until it succeeds or `deadline` passes (unavailable); blocking without one.
Status flock_until(int fd, int op, const std::filesystem::path& path,
                   std::optional<std::chrono::steady_clock::time_point> deadline,
                   std::optional<std::chrono::milliseconds> timeout) {
  if (!deadline) {
    int rc;
    do {
      rc = ::flock(fd, op);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) return fail(ErrorKind::io, "cannot lock {}: {}", path.string(), std::strerror(errno));
    return {};
  }
  for (;;) {
    if (::flock(fd, op | LOCK_NB) == 0) return {};
    if (errno != EWOULDBLOCK && errno != EINTR) return fail(ErrorKind::io, "cannot lock {}: {}", path.string(), std::strerror(errno));
    if (std::chrono::steady_clock::now() >= *deadline) {
      return fail(ErrorKind::unavailable, "{} stayed locked for {} ms (another measurement is running)", path.string(),
                  timeout ? timeout->count() : 0);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

// What this thread holds, per lock file: the strongest mode and how many guards own or nest.
struct HeldLock {
  std::string key;
  SharedLock::Mode mode;
  int count;
};
thread_local std::vector<HeldLock> t_held;

HeldLock* held_by_this_thread(const std::string& key) {
  for (auto& h : t_held) {
    if (h.key == key) return &h;
  }
  return nullptr;
}

}  // namespace

Result<SharedLock> SharedLock::acquire(const std::filesystem::path& path, Mode mode,
                                       std::optional<std::chrono::milliseconds> timeout) {
  std::string key = std::filesystem::absolute(path).lexically_normal().string();
  if (HeldLock* h = held_by_this_thread(key)) {
    if (mode == Mode::exclusive && h->mode == Mode::shared) {
      return fail(ErrorKind::internal, "this thread asked for {} exclusively while holding it shared (it would wait for itself)",
                  path.string());
    }
    ++h->count;
    return SharedLock(-1, mode, key);
  }
  std::optional<std::chrono::steady_clock::time_point> deadline;
  if (timeout) deadline = std::chrono::steady_clock::now() + *timeout;
  std::filesystem::path turnstile_path = path;
  turnstile_path += ".turnstile";
  KOPE_ASSIGN(int turnstile, open_lock_file(turnstile_path));
  auto main = open_lock_file(path);
  if (!main) {
    ::close(turnstile);
    return std::unexpected(main.error());
  }
  int fd = *main;
  // Both modes queue at the turnstile; the exclusive taker keeps it until it holds the lock, so
  // shared takers that arrive after it wait behind it.
  Status st = flock_until(turnstile, LOCK_EX, turnstile_path, deadline, timeout);
  if (st && mode == Mode::shared) {
    ::flock(turnstile, LOCK_UN);
    st = flock_until(fd, LOCK_SH, path, deadline, timeout);
  } else if (st) {
    st = flock_until(fd, LOCK_EX, path, deadline, timeout);
    ::flock(turnstile, LOCK_UN);
  }
  ::close(turnstile);
  if (!st) {
    ::close(fd);
    return std::unexpected(st.error());
  }
  t_held.push_back(HeldLock{key, mode, 1});
  return SharedLock(fd, mode, key);
}

SharedLock::SharedLock(SharedLock&& other) noexcept
    : m_fd(other.m_fd), m_mode(other.m_mode), m_held(other.m_held), m_key(std::move(other.m_key)) {
  other.m_fd = -1;
  other.m_held = false;
}

SharedLock& SharedLock::operator=(SharedLock&& other) noexcept {
  if (this != &other) {
    release();
    m_fd = other.m_fd;
    m_mode = other.m_mode;
    m_held = other.m_held;
    m_key = std::move(other.m_key);
    other.m_fd = -1;
    other.m_held = false;
  }
  return *this;
}

SharedLock::~SharedLock() { release(); }

void SharedLock::release() {
  if (!m_held) return;
  m_held = false;
  for (size_t i = 0; i < t_held.size(); ++i) {
    if (t_held[i].key == m_key && --t_held[i].count == 0) {
      t_held.erase(t_held.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  }
  if (m_fd >= 0) {
    ::flock(m_fd, LOCK_UN);
    ::close(m_fd);
    m_fd = -1;
  }
}

Result<SharedLock> lock_for_timing() { return SharedLock::acquire(timing_lock_path(), SharedLock::Mode::exclusive); }

Result<SharedLock> lock_for_work() { return SharedLock::acquire(timing_lock_path(), SharedLock::Mode::shared); }

std::filesystem::path timing_lock_path() {
  if (auto p = get_env("KOPE_TIMING_LOCK")) return *p;
  return "/tmp/kope-timing.lock";
}

}  // namespace kope::util
