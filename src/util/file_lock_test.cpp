// The shared/exclusive machine lock: shared holders share, an exclusive holder excludes both
// modes, a waiting exclusive taker blocks new shared takers (no starvation of timings), across
// threads and across processes, and a thread's nested requests do not wait for itself.
#include "util/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <thread>

#include <gtest/gtest.h>

namespace kope::util {
namespace {

using namespace std::chrono_literals;
using Mode = SharedLock::Mode;

std::filesystem::path temp_lock(const char* name) {
  auto p = std::filesystem::temp_directory_path() / fmt::format("kope-lock-test-{}-{}", ::getpid(), name);
  std::filesystem::remove(p);
  std::filesystem::remove(p.string() + ".turnstile");
  return p;
}

// Holds the lock in its own thread (guards are released on the thread that took them) until
// told to let go.
class Holder {
 public:
  Holder(std::filesystem::path path, Mode mode) {
    m_thread = std::thread([this, path, mode] {
      auto l = SharedLock::acquire(path, mode);
      m_got.set_value(l.has_value());
      m_go.get_future().wait();
      if (l) l->release();
      m_released.set_value();
    });
  }
  ~Holder() {
    if (!m_let_go) let_go();
    m_thread.join();
  }
  std::future<bool> got() { return m_got.get_future(); }
  void let_go() {
    m_let_go = true;
    m_go.set_value();
    m_released.get_future().wait();
  }

 private:
  std::promise<bool> m_got;
  std::promise<void> m_go;
  std::promise<void> m_released;
  bool m_let_go = false;
  std::thread m_thread;
};

// True while some other open file description holds `path` (flock can't be taken without waiting).
bool locked_elsewhere(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool busy = ::flock(fd, LOCK_EX | LOCK_NB) != 0;
  if (!busy) ::flock(fd, LOCK_UN);
  ::close(fd);
  return busy;
}

TEST(SharedLock, SharedHoldersShare) {
  auto path = temp_lock("share");
  Holder a(path, Mode::shared);
  auto ga = a.got();
  ASSERT_TRUE(ga.get());
  auto b = SharedLock::acquire(path, Mode::shared, 2000ms);
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_FALSE(b->nested());
}

TEST(SharedLock, SharedWaitsWhileExclusiveHolds) {
  auto path = temp_lock("excl");
  Holder writer(path, Mode::exclusive);
  auto gw = writer.got();
  ASSERT_TRUE(gw.get());
  auto denied = SharedLock::acquire(path, Mode::shared, 200ms);
  ASSERT_FALSE(denied);
  EXPECT_EQ(denied.error().kind, ErrorKind::unavailable);
  auto waiting = std::async(std::launch::async, [&] { return SharedLock::acquire(path, Mode::shared).has_value(); });
  EXPECT_EQ(waiting.wait_for(300ms), std::future_status::timeout) << "a shared taker got in beside an exclusive holder";
  writer.let_go();
  ASSERT_EQ(waiting.wait_for(5s), std::future_status::ready);
  EXPECT_TRUE(waiting.get());
}

TEST(SharedLock, WaitingExclusiveBlocksNewSharedTakers) {
  auto path = temp_lock("pref");
  Holder reader(path, Mode::shared);
  auto gr = reader.got();
  ASSERT_TRUE(gr.get());
  Holder writer(path, Mode::exclusive);
  auto gw = writer.got();
  // The writer waits for the reader, holding the turnstile.
  auto turnstile = std::filesystem::path(path.string() + ".turnstile");
  auto until = std::chrono::steady_clock::now() + 5s;
  while (!locked_elsewhere(turnstile) && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(5ms);
  ASSERT_TRUE(locked_elsewhere(turnstile)) << "the exclusive taker never queued";
  EXPECT_EQ(gw.wait_for(100ms), std::future_status::timeout) << "exclusive granted beside a shared holder";
  // Only a shared holder holds the lock, yet a new shared taker must wait behind the writer.
  auto late = SharedLock::acquire(path, Mode::shared, 300ms);
  ASSERT_FALSE(late) << "a new shared taker overtook a waiting exclusive one";
  EXPECT_EQ(late.error().kind, ErrorKind::unavailable);
  auto late_blocking = std::async(std::launch::async, [&] { return SharedLock::acquire(path, Mode::shared).has_value(); });
  reader.let_go();
  ASSERT_EQ(gw.wait_for(5s), std::future_status::ready);
  EXPECT_TRUE(gw.get());
  EXPECT_EQ(late_blocking.wait_for(200ms), std::future_status::timeout) << "shared granted beside the exclusive holder";
  writer.let_go();
  ASSERT_EQ(late_blocking.wait_for(5s), std::future_status::ready);
  EXPECT_TRUE(late_blocking.get());
}

TEST(SharedLock, ExcludesAcrossProcesses) {
  auto path = temp_lock("proc");
  int to_child[2], from_child[2];
  ASSERT_EQ(::pipe(to_child), 0);
  ASSERT_EQ(::pipe(from_child), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto l = SharedLock::acquire(path, Mode::exclusive);
    char c = l ? 'y' : 'n';
    (void)!::write(from_child[1], &c, 1);
    (void)!::read(to_child[0], &c, 1);
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(from_child[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  auto denied = SharedLock::acquire(path, Mode::shared, 200ms);
  EXPECT_FALSE(denied) << "shared granted while another process held the lock exclusively";
  (void)!::write(to_child[1], "x", 1);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  auto granted = SharedLock::acquire(path, Mode::shared, 2000ms);
  EXPECT_TRUE(granted) << granted.error().message;
  for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1]}) ::close(fd);
}

TEST(SharedLock, NestsWithinAThread) {
  auto path = temp_lock("nest");
  auto outer = SharedLock::acquire(path, Mode::exclusive, 2000ms);
  ASSERT_TRUE(outer) << outer.error().message;
  auto inner = SharedLock::acquire(path, Mode::shared, 200ms);
  ASSERT_TRUE(inner) << "a compile inside this thread's own timing waited for itself";
  EXPECT_TRUE(inner->nested());
  inner->release();
  EXPECT_TRUE(locked_elsewhere(path)) << "releasing the nested guard dropped the outer lock";
  outer->release();
  EXPECT_FALSE(locked_elsewhere(path));
  auto shared = SharedLock::acquire(path, Mode::shared, 2000ms);
  ASSERT_TRUE(shared);
  auto upgrade = SharedLock::acquire(path, Mode::exclusive, 200ms);
  ASSERT_FALSE(upgrade);
  EXPECT_EQ(upgrade.error().kind, ErrorKind::internal);
}

}  // namespace
}  // namespace kope::util
