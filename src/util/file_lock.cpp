#include "util/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

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

std::filesystem::path timing_lock_path() {
  if (auto p = get_env("KOPE_TIMING_LOCK")) return *p;
  return "/tmp/kope-timing.lock";
}

}  // namespace kope::util
