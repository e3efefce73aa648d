#include "util/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "util/fs.h"

namespace kope::util {

namespace {

void set_limit(int resource, std::optional<uint64_t> value) {
  if (!value) return;
  struct rlimit rl;
  rl.rlim_cur = static_cast<rlim_t>(*value);
  rl.rlim_max = static_cast<rlim_t>(*value);
  if (resource == RLIMIT_CPU) rl.rlim_max = static_cast<rlim_t>(*value + 1);  // SIGXCPU first
  ::setrlimit(resource, &rl);
}

int open_pidfd(pid_t pid) {
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
}

ExitStatus decode(int wstatus, const struct rusage& ru) {
  ExitStatus st;
  if (WIFEXITED(wstatus)) {
    st.exited = true;
    st.code = WEXITSTATUS(wstatus);
  } else if (WIFSIGNALED(wstatus)) {
    st.exited = false;
    st.signal = WTERMSIG(wstatus);
  }
  st.user_seconds = static_cast<double>(ru.ru_utime.tv_sec) + static_cast<double>(ru.ru_utime.tv_usec) * 1e-6;
  st.system_seconds = static_cast<double>(ru.ru_stime.tv_sec) + static_cast<double>(ru.ru_stime.tv_usec) * 1e-6;
  st.max_rss_bytes = static_cast<uint64_t>(ru.ru_maxrss) * 1024;
  return st;
}

}  // namespace

std::string signal_name(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  if (abbrev == nullptr) return fmt::format("SIG{}", sig);
  return fmt::format("SIG{}", abbrev);
}

std::string ExitStatus::describe() const {
  if (exited) return fmt::format("exited with code {}", code);
  const char* desc = ::sigdescr_np(signal);
  return fmt::format("killed by signal {} ({}{}{})", signal, signal_name(signal),
                     desc ? ": " : "", desc ? desc : "");
}

Result<Process> Process::spawn(const SpawnOptions& options) {
  if (options.argv.empty()) return fail(ErrorKind::internal, "spawn: empty argv");
  auto exe = find_executable(options.argv[0]);
  if (!exe) return fail(ErrorKind::io, "cannot run {}: not found in PATH", options.argv[0]);

  // Everything the child needs is prepared before fork: after it only async-signal-safe calls.
  std::string exe_path = exe->string();
  std::vector<char*> argv;
  for (const auto& a : options.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  if (options.env) {
    for (const auto& e : *options.env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
  }
  std::string cwd = options.cwd.string();
  std::vector<int> keep = options.pass_fds;

  int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1}, exec_pipe[2] = {-1, -1};
  auto close_all = [&] {
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1], exec_pipe[0], exec_pipe[1]}) {
      if (fd >= 0) ::close(fd);
    }
  };
  if ((options.capture_stdout && ::pipe2(out_pipe, O_CLOEXEC) != 0) ||
      (options.capture_stderr && ::pipe2(err_pipe, O_CLOEXEC) != 0) ||
      ::pipe2(exec_pipe, O_CLOEXEC) != 0) {
    int saved = errno;
    close_all();
    return fail(ErrorKind::io, "cannot create pipes: {}", std::strerror(saved));
  }
  int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull < 0) {
    close_all();
    return fail(ErrorKind::io, "cannot open /dev/null: {}", std::strerror(errno));
  }
  pid_t parent = ::getpid();
  keep.push_back(exec_pipe[1]);
  std::sort(keep.begin(), keep.end());

  pid_t pid = ::fork();
  if (pid < 0) {
    int saved = errno;
    close_all();
    ::close(devnull);
    return fail(ErrorKind::io, "cannot fork: {}", std::strerror(saved));
  }
  if (pid == 0) {
    // Child.
    ::setsid();
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    sigset_t empty;
    sigemptyset(&empty);
    ::sigprocmask(SIG_SETMASK, &empty, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    ::dup2(devnull, 0);
    ::dup2(options.capture_stdout ? out_pipe[1] : devnull, 1);
    ::dup2(options.capture_stderr ? err_pipe[1] : devnull, 2);
    // Close everything else except the passed fds and the exec-error pipe (close-on-exec).
    unsigned lo = 3;
    for (int fd : keep) {
      if (fd < 3) continue;
      if (static_cast<unsigned>(fd) > lo) {
        ::syscall(SYS_close_range, lo, static_cast<unsigned>(fd) - 1, 0);
      }
      if (fd != exec_pipe[1]) {
        int flags = ::fcntl(fd, F_GETFD);
        if (flags >= 0) ::fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC);
      }
      lo = static_cast<unsigned>(fd) + 1;
    }
    ::syscall(SYS_close_range, lo, ~0U, 0);
    const ResourceLimits& l = options.limits;
    set_limit(RLIMIT_CPU, l.cpu_seconds);
    set_limit(RLIMIT_AS, l.address_space_bytes);
    set_limit(RLIMIT_FSIZE, l.file_size_bytes);
    set_limit(RLIMIT_NOFILE, l.open_files);
    set_limit(RLIMIT_NPROC, l.processes);
    set_limit(RLIMIT_STACK, l.stack_bytes);
    if (l.no_core_dumps) set_limit(RLIMIT_CORE, 0);
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) {
      int e = errno;
      (void)!::write(exec_pipe[1], &e, sizeof e);
      ::_exit(127);
    }
    if (options.env) {
      ::execve(exe_path.c_str(), argv.data(), envp.data());
    } else {
      ::execv(exe_path.c_str(), argv.data());
    }
    int e = errno;
    (void)!::write(exec_pipe[1], &e, sizeof e);
    ::_exit(127);
  }

  // Parent.
  ::close(devnull);
  if (out_pipe[1] >= 0) ::close(out_pipe[1]);
  if (err_pipe[1] >= 0) ::close(err_pipe[1]);
  ::close(exec_pipe[1]);
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(exec_pipe[0], &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  ::close(exec_pipe[0]);

  Process p;
  p.m_pid = pid;
  p.m_out = out_pipe[0];
  p.m_err = err_pipe[0];
  p.m_reaped = false;
  p.m_pidfd = open_pidfd(pid);
  if (n > 0) {
    p.wait();
    return fail(ErrorKind::io, "cannot execute {}: {}", exe_path, std::strerror(child_errno));
  }
  return p;
}

Process::Process(Process&& other) noexcept { *this = std::move(other); }

Process& Process::operator=(Process&& other) noexcept {
  if (this != &other) {
    if (!m_reaped) {
      kill_group();
      wait();
    }
    close_fds();
    m_pid = other.m_pid;
    m_out = other.m_out;
    m_err = other.m_err;
    m_pidfd = other.m_pidfd;
    m_reaped = other.m_reaped;
    m_status = other.m_status;
    other.m_out = other.m_err = other.m_pidfd = -1;
    other.m_reaped = true;
    other.m_pid = -1;
  }
  return *this;
}

Process::~Process() {
  if (!m_reaped) {
    kill_group();
    wait();
  }
  close_fds();
}

void Process::close_fds() {
  for (int* fd : {&m_out, &m_err, &m_pidfd}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
}

void Process::kill_group(int sig) const {
  if (m_pid > 0 && !m_reaped) {
    // The group holds the child itself (it is the group's leader): one signal each, so a
    // child that counts its signals (kope's second Ctrl-C exits at once) sees one. The child
    // alone only where its group is not there to signal.
    if (::kill(-m_pid, sig) != 0) ::kill(m_pid, sig);
  }
}

ExitStatus Process::wait() {
  if (m_reaped) return m_status;
  int wstatus = 0;
  struct rusage ru {};
  pid_t r;
  do {
    r = ::wait4(m_pid, &wstatus, 0, &ru);
  } while (r < 0 && errno == EINTR);
  m_reaped = true;
  m_status = decode(wstatus, ru);
  // Whatever the child left behind in its group goes with it.
  ::kill(-m_pid, SIGKILL);
  return m_status;
}

std::optional<ExitStatus> Process::try_wait() {
  if (m_reaped) return m_status;
  int wstatus = 0;
  struct rusage ru {};
  pid_t r;
  do {
    r = ::wait4(m_pid, &wstatus, WNOHANG, &ru);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return std::nullopt;
  m_reaped = true;
  m_status = decode(wstatus, ru);
  ::kill(-m_pid, SIGKILL);
  return m_status;
}

Result<RunResult> run(const RunOptions& options) {
  auto start = std::chrono::steady_clock::now();
  KOPE_ASSIGN(Process proc, Process::spawn(options.spawn));
  RunResult result;
  struct Stream {
    int fd;
    std::string* buf;
    uint64_t* total;
    size_t cap;
    bool open;
  };
  Stream streams[2] = {
      {proc.stdout_fd(), &result.out, &result.out_bytes, options.stdout_cap, proc.stdout_fd() >= 0},
      {proc.stderr_fd(), &result.err, &result.err_bytes, options.stderr_cap, proc.stderr_fd() >= 0},
  };
  auto deadline = options.timeout.count() > 0 ? start + options.timeout
                                              : std::chrono::steady_clock::time_point::max();
  bool exited = false;
  bool killed = false;
  // After the child exits, leftover writers in its group are killed; drain what is buffered.
  char buf[65536];
  for (;;) {
    bool any_open = streams[0].open || streams[1].open;
    if (exited && !any_open) break;
    struct pollfd fds[3];
    int nfds = 0;
    int idx[3];
    for (int i = 0; i < 2; ++i) {
      if (streams[i].open) {
        fds[nfds] = {streams[i].fd, POLLIN, 0};
        idx[nfds++] = i;
      }
    }
    if (!exited && proc.pidfd() >= 0) {
      fds[nfds] = {proc.pidfd(), POLLIN, 0};
      idx[nfds++] = 2;
    }
    int wait_ms = -1;
    if (deadline != std::chrono::steady_clock::time_point::max()) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      wait_ms = static_cast<int>(std::max<int64_t>(0, left.count()));
    }
    if (exited) wait_ms = 200;  // grandchildren are dead; only drain
    if (proc.pidfd() < 0 && !exited) wait_ms = wait_ms < 0 ? 50 : std::min(wait_ms, 50);
    int rc = ::poll(fds, static_cast<nfds_t>(nfds), wait_ms);
    if (rc < 0 && errno != EINTR) return fail(ErrorKind::io, "poll: {}", std::strerror(errno));
    if (rc == 0 && exited) break;
    if (!exited && std::chrono::steady_clock::now() >= deadline) {
      result.timed_out = true;
      proc.kill_group(SIGKILL);
      killed = true;
    }
    for (int k = 0; k < nfds && rc > 0; ++k) {
      if (fds[k].revents == 0) continue;
      if (idx[k] == 2) continue;
      Stream& s = streams[idx[k]];
      ssize_t n = ::read(s.fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        s.open = false;
        continue;
      }
      *s.total += static_cast<uint64_t>(n);
      if (s.buf->size() < s.cap) s.buf->append(buf, std::min<size_t>(static_cast<size_t>(n), s.cap - s.buf->size()));
      if (*s.total > s.cap) {
        result.output_capped = true;
        if (options.kill_on_output_cap && !killed) {
          proc.kill_group(SIGKILL);
          killed = true;
        }
      }
    }
    if (!exited) {
      if (auto st = proc.try_wait()) {
        exited = true;
        result.status = *st;
      } else if (killed) {
        result.status = proc.wait();
        exited = true;
      }
    }
  }
  if (!exited) result.status = proc.wait();
  result.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace kope::util
