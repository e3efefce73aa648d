#include "llm/transcript.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <map>

#include "kope/llm.h"
#include "util/fs.h"
#include "util/time.h"

namespace kope::llm {

Result<std::shared_ptr<TranscriptWriter>> TranscriptWriter::open(
    const std::filesystem::path& path) {
  static std::mutex mutex;
  static std::map<std::filesystem::path, std::weak_ptr<TranscriptWriter>> writers;
  std::error_code ec;
  std::filesystem::path key = std::filesystem::weakly_canonical(path, ec);
  if (ec) key = std::filesystem::absolute(path);
  std::lock_guard lock(mutex);
  if (auto existing = writers[key].lock()) return existing;
  if (!path.parent_path().empty()) KOPE_TRY(util::make_dirs(path.parent_path()));
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) {
    return fail(ErrorKind::io, "cannot open transcript {}: {}", path.string(),
                std::strerror(errno));
  }
  std::shared_ptr<TranscriptWriter> w(new TranscriptWriter(path, fd));
  writers[key] = w;
  return w;
}

TranscriptWriter::~TranscriptWriter() {
  if (m_fd >= 0) ::close(m_fd);
}

Status TranscriptWriter::write(nlohmann::ordered_json event) {
  nlohmann::ordered_json line = nlohmann::ordered_json::object();
  line["ts"] = util::now_iso8601();
  line["pid"] = static_cast<int64_t>(::getpid());
  for (auto& [k, v] : event.items()) line[k] = std::move(v);
  // Invalid UTF-8 from a server must not make the line unwritable.
  std::string text =
      redact(line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
  text.push_back('\n');
  std::lock_guard lock(m_mutex);
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(m_fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(ErrorKind::io, "cannot append to transcript {}: {}", m_path.string(),
                  std::strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
  if (::fdatasync(m_fd) != 0) {
    return fail(ErrorKind::io, "cannot flush transcript {}: {}", m_path.string(),
                std::strerror(errno));
  }
  return {};
}

}  // namespace kope::llm
