#include "util/fs.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>

#include "util/strings.h"

namespace kope::util {

namespace {

Status write_all(int fd, std::string_view data, const fs::path& path) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(ErrorKind::io, "cannot write {}: {}", path.string(), std::strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
  return {};
}

Status fsync_dir(const fs::path& dir) {
  int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return fail(ErrorKind::io, "cannot open {}: {}", dir.string(), std::strerror(errno));
  int rc = ::fsync(fd);
  int saved = errno;
  ::close(fd);
  if (rc != 0) return fail(ErrorKind::io, "cannot fsync {}: {}", dir.string(), std::strerror(saved));
  return {};
}

}  // namespace

Result<std::string> read_file(const fs::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return fail(errno == ENOENT ? ErrorKind::not_found : ErrorKind::io, "cannot read {}: {}",
                path.string(), std::strerror(errno));
  }
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      int saved = errno;
      ::close(fd);
      return fail(ErrorKind::io, "cannot read {}: {}", path.string(), std::strerror(saved));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

Status write_file_atomic(const fs::path& path, std::string_view data) {
  fs::path dir = path.parent_path();
  if (!dir.empty()) KOPE_TRY(make_dirs(dir));
  std::random_device rd;
  fs::path tmp = path;
  tmp += fmt::format(".tmp.{}.{:x}", ::getpid(), rd());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return fail(ErrorKind::io, "cannot create {}: {}", tmp.string(), std::strerror(errno));
  Status st = write_all(fd, data, path);
  if (st && ::fsync(fd) != 0) {
    st = fail(ErrorKind::io, "cannot fsync {}: {}", tmp.string(), std::strerror(errno));
  }
  ::close(fd);
  if (st && ::rename(tmp.c_str(), path.c_str()) != 0) {
    st = fail(ErrorKind::io, "cannot rename {} to {}: {}", tmp.string(), path.string(),
              std::strerror(errno));
  }
  if (!st) {
    ::unlink(tmp.c_str());
    return st;
  }
  return fsync_dir(dir);
}

Status append_line_durable(const fs::path& path, std::string_view line) {
  if (!path.parent_path().empty()) KOPE_TRY(make_dirs(path.parent_path()));
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return fail(ErrorKind::io, "cannot open {}: {}", path.string(), std::strerror(errno));
  std::string buf(line);
  buf += '\n';
  Status st = write_all(fd, buf, path);
  if (st && ::fsync(fd) != 0) {
    st = fail(ErrorKind::io, "cannot fsync {}: {}", path.string(), std::strerror(errno));
  }
  ::close(fd);
  return st;
}

Status make_dirs(const fs::path& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) return fail(ErrorKind::io, "cannot create directory {}: {}", path.string(), ec.message());
  return {};
}

Result<TempDir> TempDir::create(std::string_view prefix, const fs::path& parent) {
  fs::path base = parent;
  if (base.empty()) {
    auto tmp = get_env("TMPDIR");
    base = tmp ? fs::path(*tmp) : fs::path("/tmp");
  }
  KOPE_TRY(make_dirs(base));
  std::string templ = (base / (std::string(prefix) + "XXXXXX")).string();
  if (::mkdtemp(templ.data()) == nullptr) {
    return fail(ErrorKind::io, "cannot create a temporary directory under {}: {}", base.string(),
                std::strerror(errno));
  }
  return TempDir(fs::path(templ));
}

TempDir::TempDir(TempDir&& other) noexcept : m_path(std::move(other.m_path)), m_keep(other.m_keep) {
  other.m_path.clear();
}

TempDir& TempDir::operator=(TempDir&& other) noexcept {
  if (this != &other) {
    if (!m_path.empty() && !m_keep) {
      std::error_code ec;
      fs::remove_all(m_path, ec);
    }
    m_path = std::move(other.m_path);
    m_keep = other.m_keep;
    other.m_path.clear();
  }
  return *this;
}

TempDir::~TempDir() {
  if (!m_path.empty() && !m_keep) {
    std::error_code ec;
    fs::remove_all(m_path, ec);
  }
}

std::optional<fs::path> find_executable(std::string_view name) {
  if (name.find('/') != std::string_view::npos) {
    fs::path p(name);
    if (::access(p.c_str(), X_OK) == 0) return p;
    return std::nullopt;
  }
  auto path = get_env("PATH");
  for (const auto& dir : split(path ? *path : "/usr/local/bin:/usr/bin:/bin", ':')) {
    if (dir.empty()) continue;
    fs::path p = fs::path(dir) / name;
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return std::nullopt;
}

std::optional<std::string> get_env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

fs::path data_dir() {
  if (auto v = get_env("KOPE_DATA_DIR")) return fs::path(*v);
  std::error_code ec;
  return fs::current_path(ec) / ".kope";
}

fs::path cache_dir() {
  if (auto v = get_env("KOPE_CACHE_DIR")) return fs::path(*v);
  if (auto v = get_env("XDG_CACHE_HOME")) return fs::path(*v) / "kope";
  if (auto v = get_env("HOME")) return fs::path(*v) / ".cache" / "kope";
  return fs::path("/tmp") / fmt::format("kope-cache-{}", ::getuid());
}

namespace {
// An installed tree: <prefix>/bin/kope with its data in <prefix>/share/kope (ops/ is what tells
// it from the source tree's share/kope, which holds only the files installed beside ops/).
std::optional<fs::path> installed_share_dir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return std::nullopt;
  fs::path dir = exe.parent_path().parent_path() / "share" / "kope";
  if (fs::is_directory(dir / "ops", ec)) return dir;
  return std::nullopt;
}
}  // namespace

fs::path share_dir() {
  if (auto v = get_env("KOPE_SHARE_DIR")) return fs::path(*v);
  if (auto d = installed_share_dir()) return *d;
  return fs::path(KOPE_SOURCE_DATA_DIR);
}

std::optional<fs::path> find_share_file(const fs::path& relative) {
  fs::path root = share_dir();
  std::error_code ec;
  for (const fs::path& p : {root / relative, root / "share" / "kope" / relative}) {
    if (fs::is_regular_file(p, ec)) return p;
  }
  return std::nullopt;
}

}  // namespace kope::util
