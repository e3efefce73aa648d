#include "eval/session.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>

#include "eval/native.h"
#include "eval/sandbox.h"
#include "util/fs.h"
#include "util/strings.h"
#include "util/subprocess.h"

#ifndef KOPE_RUNNER_PATH
#define KOPE_RUNNER_PATH ""
#endif

namespace kope::eval {

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t k_tail_keep = 16 << 10;  // bytes of each stream kept for diagnostics

struct Stream {
  int fd = -1;
  std::string kept;  // the first k_tail_keep bytes
  uint64_t total = 0;
};

uint64_t random_u64() {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  return rng();
}

std::string human(uint64_t bytes) { return util::human_bytes(static_cast<double>(bytes)); }

}  // namespace

std::string syscall_name(int nr) {
  char* n = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
  std::string s = n != nullptr ? std::string(n) : fmt::format("syscall {}", nr);
  std::free(n);
  return s;
}

Result<fs::path> find_runner() {
  if (auto p = util::get_env("KOPE_RUNNER")) {
    if (fs::exists(*p)) return fs::path(*p);
    return fail(ErrorKind::unavailable, "$KOPE_RUNNER names {}, which does not exist", *p);
  }
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    fs::path beside = self.parent_path() / "kope-runner";
    if (fs::exists(beside, ec)) return beside;
  }
  fs::path built = KOPE_RUNNER_PATH;
  if (!built.empty() && fs::exists(built, ec)) return built;
  return fail(ErrorKind::unavailable, "cannot find kope-runner (looked beside {} and at '{}'; set $KOPE_RUNNER)",
              self.string(), built.string());
}

struct Session::Impl {
  std::optional<util::TempDir> scratch;
  std::optional<util::Process> proc;
  int sock = -1;
  uint32_t seq = 0;
  Stream out, err;
  size_t output_cap = 0;
  std::vector<std::string> view_names;  // "output y", per view of the current case
  std::vector<uint64_t> view_bytes;
  bool exited = false;
  bool killed_by_us = false;
  bool closed = false;
  // The calling thread's CPUs before keep_calling_thread_on first changed them.
  std::optional<cpu_set_t> calling_cpus;

  ~Impl() {
    if (sock >= 0) ::close(sock);
  }
};

Session::Session() : m(std::make_unique<Impl>()) {}

Session::~Session() {
  if (m && m->proc && !m->proc->reaped()) {
    m->proc->kill_group(SIGKILL);
    m->proc->wait();
  }
}

Result<std::unique_ptr<Session>> Session::start(const fs::path& kernel_so, const RunnerOptions& o, uint64_t in_capacity,
                                                uint64_t out_capacity, const Arena* buffers_of) {
  std::unique_ptr<Session> s(new Session());
  if (buffers_of != nullptr && (buffers_of->in_capacity() < in_capacity || buffers_of->out_capacity() < out_capacity)) {
    return fail(ErrorKind::internal, "shared buffers of {} and {} bytes are too small for {} and {}", buffers_of->in_capacity(),
                buffers_of->out_capacity(), in_capacity, out_capacity);
  }
  if (buffers_of != nullptr) {
    KOPE_ASSIGN(s->m_arena, buffers_of->share_buffers());
  } else {
    KOPE_ASSIGN(s->m_arena, Arena::create(in_capacity, out_capacity));
  }
  KOPE_ASSIGN(util::TempDir scratch, util::TempDir::create("kope-run-", sandbox_scratch_parent()));
  // The sandbox sees only this directory (read-only): the runner and the kernel, copied so that
  // a sandbox running under another uid can read them wherever kope's cache lives.
  std::error_code ec;
  fs::copy_file(o.runner, scratch.path() / "runner", fs::copy_options::overwrite_existing, ec);
  if (ec) return fail(ErrorKind::io, "cannot copy {} into {}: {}", o.runner.string(), scratch.path().string(), ec.message());
  fs::copy_file(kernel_so, scratch.path() / "kernel.so", fs::copy_options::overwrite_existing, ec);
  if (ec) return fail(ErrorKind::io, "cannot copy {} into {}: {}", kernel_so.string(), scratch.path().string(), ec.message());
  for (const auto& name : o.companions) {
    fs::copy_file(kernel_so.parent_path() / name, scratch.path() / name, fs::copy_options::overwrite_existing, ec);
    if (ec) return fail(ErrorKind::io, "cannot copy {} into {}: {}", (kernel_so.parent_path() / name).string(), scratch.path().string(), ec.message());
    ::chmod((scratch.path() / name).c_str(), 0644);
  }
  ::chmod(scratch.path().c_str(), 0755);
  ::chmod((scratch.path() / "runner").c_str(), 0755);
  ::chmod((scratch.path() / "kernel.so").c_str(), 0644);

  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    return fail(ErrorKind::io, "socketpair: {}", std::strerror(errno));
  }
  s->m->sock = pair[0];
  int child_sock = pair[1];
  int one = 1;
  ::setsockopt(pair[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof one);

  SandboxSpec spec;
  spec.uid = prepare_sandbox_uid({});
  spec.ro_binds.emplace_back(scratch.path(), "/kope");
  spec.tmp_bytes = o.host_shim ? 64ull << 20 : 16ull << 20;  // host shims unpack their device binaries there
  bool trusted = o.mode == proto::Mode::trusted;
  // Trusted library baselines (OpenBLAS, oneDNN) read the CPU topology from /proc and /sys.
  spec.proc = trusted || o.proc_and_sys;
  spec.sys = trusted || o.proc_and_sys;
  int threads = std::max(1, o.threads);
  spec.env = {{"PATH", "/usr/bin:/bin"},
              {"LANG", "C"},
              {"OMP_NUM_THREADS", std::to_string(threads)},
              {"OMP_THREAD_LIMIT", std::to_string(threads)},
              {"OMP_DYNAMIC", "false"},
              {"OMP_MAX_ACTIVE_LEVELS", "1"},
              // OpenMP workers that have finished a region spin before they sleep (libgomp: 300,000
              // rounds by default), long enough to reach into the next runner's batch: timed in
              // alternation with a reference and a library beside it, a two-thread conv kernel
              // waited for a CPU 21-25% of its runnable time on an idle machine and was marked
              // disturbed; with 10,000 rounds it waited 0-4.5% and ran 17-35% faster, the same with
              // OMP_WAIT_POLICY=passive. Within a batch the calls follow each other closely
              // enough that the workers are still spinning.
              {"GOMP_SPINCOUNT", "10000"}};
  if (trusted) {
    spec.env.emplace_back("OPENBLAS_NUM_THREADS", std::to_string(threads));
    // The vendor libraries' configuration: the user's (see library_env_default), or the
    // setting the caller chose (library --library-config best).
    for (const auto& [name, value] : o.library_env ? *o.library_env : library_env_default()) {
      if (value) spec.env.emplace_back(name, *value);
    }
    spec.env.emplace_back("ONEDNN_VERBOSE", "0");
  }
  for (const auto& kv : o.env) spec.env.push_back(kv);
  spec.command = {"/kope/runner",  "--sock",    std::to_string(child_sock),
                  "--in",          std::to_string(s->m_arena.in_fd_readonly()),
                  "--out",         std::to_string(s->m_arena.out_fd()),
                  "--status",      std::to_string(s->m_arena.status_fd()),
                  "--kernel",      "/kope/kernel.so",
                  "--threads",     std::to_string(threads),
                  "--mode",        trusted ? "trusted" : "candidate"};
  if (o.host_shim) {
    spec.command.emplace_back("--host");
    spec.command.emplace_back("/kope");
  }
  if (o.device_ioctl) {
    spec.command.emplace_back("--ioctl");
    spec.command.emplace_back("1");
  }
  spec.devices = o.devices;
  auto argv = sandbox_argv(spec);
  if (!argv) {
    ::close(child_sock);
    return std::unexpected(argv.error());
  }
  util::SpawnOptions so;
  so.argv = std::move(*argv);
  so.env = std::vector<std::string>{"PATH=/usr/bin:/bin", "LANG=C"};
  so.pass_fds = {child_sock, s->m_arena.in_fd_readonly(), s->m_arena.out_fd(), s->m_arena.status_fd()};
  so.limits.address_space_bytes = o.memory_bytes;
  so.limits.cpu_seconds = o.cpu_seconds;
  so.limits.file_size_bytes = 16ull << 20;
  so.limits.open_files = 64;
  so.limits.processes = o.processes;
  so.limits.no_core_dumps = true;
  auto proc = util::Process::spawn(so);
  ::close(child_sock);
  if (!proc) return fail(ErrorKind::unavailable, "cannot start the sandbox: {}", proc.error().message);
  s->m->proc.emplace(std::move(*proc));
  s->m->scratch.emplace(std::move(scratch));
  s->m->out.fd = s->m->proc->stdout_fd();
  s->m->err.fd = s->m->proc->stderr_fd();
  // Drained after a death too: never block on a pipe a dying sandbox still holds open.
  for (int fd : {s->m->out.fd, s->m->err.fd}) {
    if (fd >= 0) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  s->m->output_cap = o.output_cap;

  KOPE_ASSIGN(bool ready, s->send_and_wait(nullptr, 0, 0, 0, o.start_timeout, nullptr, true));
  if (!ready && s->m_failure && s->m_failure->message.find("bwrap:") != std::string::npos) {
    return fail(ErrorKind::unavailable, "the sandbox could not start: {}", s->m_failure->message);
  }
  return s;
}

void Session::fail_with(Verdict v, std::string message) {
  if (!m_failure) m_failure = RunnerFailure{v, std::move(message)};
  if (m->proc && !m->proc->reaped()) {
    m->killed_by_us = true;
    m->proc->kill_group(SIGKILL);
    m->proc->wait();
  }
}

Session::CpuTimes Session::cpu_times() const {
  CpuTimes t;
  if (m_runner_pid <= 0 || (m->proc && m->proc->reaped())) return t;
  std::error_code ec;
  fs::path tasks = fs::path("/proc") / std::to_string(m_runner_pid) / "task";
  for (const auto& e : fs::directory_iterator(tasks, ec)) {
    auto text = util::read_file(e.path() / "schedstat");
    if (!text) continue;
    unsigned long long run = 0, wait = 0;
    if (std::sscanf(text->c_str(), "%llu %llu", &run, &wait) == 2) {
      t.run_ns += run;
      t.wait_ns += wait;
      if (run > 0) ++t.busy_threads;
      t.threads.push_back({static_cast<pid_t>(std::atoi(e.path().filename().c_str())), run, wait});
    }
  }
  return t;
}

int Session::calling_cpu() const {
  if (m_runner_pid <= 0 || (m->proc && m->proc->reaped())) return -1;
  auto text = util::read_file(fs::path("/proc") / std::to_string(m_runner_pid) / "task" / std::to_string(m_runner_pid) / "stat");
  if (!text) return -1;
  // The command name may hold spaces and parentheses: the fields start after the last ')'.
  size_t close = text->rfind(')');
  if (close == std::string::npos) return -1;
  // Field 39 of stat (processor) is the 37th after the name (state is field 3).
  std::istringstream fields(text->substr(close + 1));
  std::string field;
  for (int i = 0; i < 37 && fields >> field; ++i) {
    if (i == 36) return std::atoi(field.c_str());
  }
  return -1;
}

bool Session::keep_calling_thread_on(std::optional<int> cpu) {
  if (m_runner_pid <= 0 || (m->proc && m->proc->reaped())) return false;
  if (!m->calling_cpus) {
    if (!cpu) return true;  // never changed
    cpu_set_t now;
    CPU_ZERO(&now);
    if (::sched_getaffinity(m_runner_pid, sizeof now, &now) != 0) return false;
    m->calling_cpus = now;
  }
  const cpu_set_t& every = *m->calling_cpus;
  cpu_set_t want = every;
  cpu_set_t rest = every;  // the other threads': every CPU but the calling thread's
  if (cpu) {
    if (*cpu < 0 || *cpu >= CPU_SETSIZE || !CPU_ISSET(*cpu, &every)) return false;
    CPU_ZERO(&want);
    CPU_SET(*cpu, &want);
    if (CPU_COUNT(&every) > 1) CPU_CLR(*cpu, &rest);
  }
  if (::sched_setaffinity(m_runner_pid, sizeof want, &want) != 0) return false;
  // The other threads (the OpenMP pool, a library's own) leave the calling thread's CPU: a
  // worker woken onto it waits there for the whole batch while another CPU idles, whenever the
  // scheduler sees no cache shared between the CPUs (a VM that reports no L3), which halved a
  // two-thread kernel's speed in half its batches. A thread that has just exited is no error.
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path("/proc") / std::to_string(m_runner_pid) / "task", ec)) {
    pid_t tid = static_cast<pid_t>(std::atoi(e.path().filename().c_str()));
    if (tid > 0 && tid != m_runner_pid) ::sched_setaffinity(tid, sizeof rest, &rest);
  }
  return true;
}

std::string Session::output_tail() const {
  std::string out;
  auto add = [&](const char* name, const Stream& s) {
    if (s.total == 0) return;
    std::string_view t = s.kept;
    out += fmt::format("--- {} ({}{}) ---\n", name, human(s.total), s.total > s.kept.size() ? ", start shown" : "");
    out += std::string(t.substr(0, 4000));
    if (!out.ends_with('\n')) out += '\n';
  };
  add("stderr", m->err);
  add("stdout", m->out);
  return out;
}

// Reads the exit status and the status page and says what happened, as a verdict.
void Session::decode_death() {
  util::ExitStatus st = m->proc->wait();
  const proto::StatusPage* page = m_arena.status();
  int sig = st.exited ? 0 : st.signal;
  // bwrap reports a child killed by signal N as exit code 128 + N.
  if (st.exited && st.code > 128 && st.code < 128 + 65) sig = st.code - 128;
  int fault = page != nullptr ? page->fault_signal : 0;
  if (fault != 0 && (sig == 0 || sig == fault)) sig = fault;
  uint64_t failed_alloc = page != nullptr ? page->alloc_failed_bytes : 0;
  std::string stderr_line;
  if (!m->err.kept.empty()) {
    auto lines = util::split(util::trim(m->err.kept), '\n');
    if (!lines.empty()) stderr_line = std::string(util::trim(lines.back())).substr(0, 200);
  }
  auto view = [&](int idx) -> std::string {
    if (idx >= 0 && static_cast<size_t>(idx) < m->view_names.size()) return m->view_names[static_cast<size_t>(idx)];
    return "a buffer";
  };
  if (sig == SIGSYS) {
    int nr = page != nullptr ? page->syscall_nr : -1;
    fail_with(Verdict::rejected, nr >= 0 ? fmt::format("made a forbidden system call ({}); the sandbox stopped it", syscall_name(nr))
                                         : std::string("made a forbidden system call; the sandbox stopped it"));
    return;
  }
  if ((sig == SIGSEGV || sig == SIGBUS || sig == SIGABRT) && failed_alloc > 0) {
    fail_with(Verdict::resource_limit, fmt::format("ran out of memory: an allocation of {} failed under the sandbox's memory limit", human(failed_alloc)));
    return;
  }
  if (sig == SIGSEGV || sig == SIGBUS) {
    auto where = static_cast<proto::FaultWhere>(page != nullptr ? page->fault_where : 0);
    int v = page != nullptr ? page->fault_view : -1;
    int64_t off = page != nullptr ? page->fault_offset : 0;
    const char* verb = page != nullptr && page->fault_write == 1 ? "wrote" : (page != nullptr && page->fault_write == 0 ? "read" : "accessed memory");
    uint64_t size = v >= 0 && static_cast<size_t>(v) < m->view_bytes.size() ? m->view_bytes[static_cast<size_t>(v)] : 0;
    switch (where) {
      case proto::FaultWhere::past_end:
        fail_with(Verdict::runtime_error, fmt::format("{} past the end of {} (byte {} of a {}-byte buffer; guard page hit, {})", verb, view(v), off, size, util::signal_name(sig)));
        return;
      case proto::FaultWhere::before_start:
        fail_with(Verdict::runtime_error, fmt::format("{} before the start of {} (byte {}; guard page hit, {})", verb, view(v), off, util::signal_name(sig)));
        return;
      case proto::FaultWhere::read_only:
        fail_with(Verdict::rejected, fmt::format("wrote to {} (inputs are read-only; byte {})", view(v), off));
        return;
      default:
        fail_with(Verdict::runtime_error, fmt::format("crashed with {} ({} at address {:#x})", util::signal_name(sig), verb,
                                                      page != nullptr ? page->fault_addr : 0));
        return;
    }
  }
  if (sig == SIGXCPU) {
    fail_with(Verdict::timeout, "exceeded the sandbox's CPU-time limit (SIGXCPU)");
    return;
  }
  if (sig == SIGXFSZ) {
    fail_with(Verdict::resource_limit, "exceeded the sandbox's file-size limit (SIGXFSZ)");
    return;
  }
  if (sig == SIGKILL) {
    fail_with(Verdict::resource_limit, "was killed (SIGKILL), most likely by the system's out-of-memory killer");
    return;
  }
  if (sig != 0) {
    std::string extra = sig == SIGABRT && !stderr_line.empty() ? fmt::format(": {}", stderr_line) : "";
    fail_with(Verdict::runtime_error, fmt::format("crashed with {}{}", util::signal_name(sig), extra));
    return;
  }
  if (st.exited && st.code == 1 && m->err.kept.find("bwrap:") != std::string::npos) {
    fail_with(Verdict::runtime_error, fmt::format("bwrap: {}", std::string(util::trim(m->err.kept)).substr(0, 300)));
    return;
  }
  fail_with(Verdict::runtime_error, fmt::format("ended the process (exit code {}) instead of returning from the call", st.code));
}

Result<bool> Session::send_and_wait(const void* msg, size_t size, uint32_t seq, uint64_t token,
                                    std::chrono::milliseconds timeout, double* seconds, bool boot) {
  if (m_failure) return false;
  auto start = Clock::now();
  if (msg != nullptr) {
    ssize_t n;
    do {
      n = ::send(m->sock, msg, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n != static_cast<ssize_t>(size)) {
      if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
        // The runner is gone; find out how.
        decode_death();
        return false;
      }
      return fail(ErrorKind::io, "cannot send to the runner: {}", std::strerror(errno));
    }
  }
  auto deadline = start + timeout;
  bool sock_open = true;
  for (;;) {
    struct pollfd fds[4];
    int idx[4];
    int nfds = 0;
    if (sock_open) {
      fds[nfds] = {m->sock, POLLIN, 0};
      idx[nfds++] = 0;
    }
    if (m->out.fd >= 0) {
      fds[nfds] = {m->out.fd, POLLIN, 0};
      idx[nfds++] = 1;
    }
    if (m->err.fd >= 0) {
      fds[nfds] = {m->err.fd, POLLIN, 0};
      idx[nfds++] = 2;
    }
    if (m->proc->pidfd() >= 0) {
      fds[nfds] = {m->proc->pidfd(), POLLIN, 0};
      idx[nfds++] = 3;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    int rc = ::poll(fds, static_cast<nfds_t>(nfds), static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(left, 1000))));
    if (rc < 0 && errno != EINTR) return fail(ErrorKind::io, "poll: {}", std::strerror(errno));
    for (int k = 0; rc > 0 && k < nfds; ++k) {
      if (fds[k].revents == 0) continue;
      if (idx[k] == 0) {
        proto::Reply r;
        // Every message carries the sender's credentials (SO_PASSCRED), pid translated into
        // our pid namespace: the ready message tells us who the runner is.
        alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(struct ucred))];
        struct iovec iov = {&r, sizeof r};
        struct msghdr mh {};
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        mh.msg_control = control;
        mh.msg_controllen = sizeof control;
        ssize_t n = ::recvmsg(m->sock, &mh, MSG_DONTWAIT | MSG_TRUNC | MSG_CMSG_CLOEXEC);
        if (n > 0 && boot) {
          for (struct cmsghdr* cm = CMSG_FIRSTHDR(&mh); cm != nullptr; cm = CMSG_NXTHDR(&mh, cm)) {
            if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_CREDENTIALS) {
              struct ucred cred;
              std::memcpy(&cred, CMSG_DATA(cm), sizeof cred);
              m_runner_pid = cred.pid;
            }
          }
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (n <= 0) {
          sock_open = false;  // the runner closed it: it is exiting; wait for the pid
          continue;
        }
        auto end = Clock::now();
        bool shape = n == static_cast<ssize_t>(sizeof r);
        auto kind = static_cast<proto::ReplyKind>(r.kind);
        if (!shape || r.seq != seq || r.token != token ||
            (boot ? kind != proto::ReplyKind::ready : kind == proto::ReplyKind::ready)) {
          fail_with(Verdict::rejected, "wrote to the harness's private channel (a forged or unexpected message)");
          return false;
        }
        if (kind == proto::ReplyKind::error || (boot && r.code != 0)) {
          r.text[sizeof r.text - 1] = '\0';
          fail_with(boot ? Verdict::runtime_error : Verdict::resource_limit, std::string(r.text));
          return false;
        }
        if (boot) {
          m_threads = r.threads;
          r.text[sizeof r.text - 1] = '\0';
          m_ready_text = r.text;
        }
        if (seconds) *seconds = std::chrono::duration<double>(end - start).count();
        return true;
      }
      if (idx[k] == 1 || idx[k] == 2) {
        Stream& s = idx[k] == 1 ? m->out : m->err;
        char buf[65536];
        ssize_t n = ::read(s.fd, buf, sizeof buf);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (n <= 0) {
          s.fd = -1;  // closed; the Process still owns the descriptor
          continue;
        }
        s.total += static_cast<uint64_t>(n);
        if (s.kept.size() < k_tail_keep) s.kept.append(buf, std::min<size_t>(static_cast<size_t>(n), k_tail_keep - s.kept.size()));
        if (s.total > m->output_cap) {
          fail_with(Verdict::resource_limit, fmt::format("flooded its {} (more than {}); output is capped and never read for the verdict",
                                                         idx[k] == 1 ? "stdout" : "stderr", human(m->output_cap)));
          return false;
        }
      }
      if (idx[k] == 3) {
        // Drain what is buffered, then decode the death.
        for (Stream* s : {&m->out, &m->err}) {
          char buf[65536];
          while (s->fd >= 0) {
            ssize_t n = ::read(s->fd, buf, sizeof buf);
            if (n <= 0) break;
            s->total += static_cast<uint64_t>(n);
            if (s->kept.size() < k_tail_keep) s->kept.append(buf, std::min<size_t>(static_cast<size_t>(n), k_tail_keep - s->kept.size()));
          }
        }
        decode_death();
        return false;
      }
    }
    if (Clock::now() >= deadline) {
      double secs = std::chrono::duration<double>(timeout).count();
      if (boot) {
        fail_with(Verdict::timeout, fmt::format("did not finish loading within {:.3g} s", secs));
      } else {
        fail_with(Verdict::timeout, fmt::format("did not return within {:.3g} s", secs));
      }
      return false;
    }
  }
}

Result<bool> Session::map(const spec::OpSpec& op, const CaseLayout& layout, const std::vector<int64_t>& dims) {
  if (m_failure) return false;
  auto req = std::make_unique<proto::MapRequest>();
  req->h.op = static_cast<uint32_t>(proto::Op::map);
  req->h.seq = ++m->seq;
  req->h.token = random_u64();
  if (op.inputs.size() > proto::k_max_tensors || op.outputs.size() > proto::k_max_tensors || dims.size() > proto::k_max_dims ||
      layout.in_slots > static_cast<int>(proto::k_max_slots) || layout.out_slots > static_cast<int>(proto::k_max_slots)) {
    return fail(ErrorKind::config, "op {} has more tensors, dims or slots than the runner supports", op.name);
  }
  m->view_names.clear();
  m->view_bytes.clear();
  uint32_t v = 0;
  for (int sl = 0; sl < layout.in_slots; ++sl) {
    for (size_t t = 0; t < op.inputs.size(); ++t) {
      const Placement& p = layout.inputs[static_cast<size_t>(sl)][t];
      req->views[v] = {0, 0, p.file_offset, p.map_length, p.data_offset, p.data_bytes};
      req->input_view[sl][t] = v++;
      m->view_names.push_back("input " + op.inputs[t].name);
      m->view_bytes.push_back(p.data_bytes);
    }
  }
  for (int sl = 0; sl < layout.out_slots; ++sl) {
    for (size_t t = 0; t < op.outputs.size(); ++t) {
      const Placement& p = layout.outputs[static_cast<size_t>(sl)][t];
      req->views[v] = {1, 1, p.file_offset, p.map_length, p.data_offset, p.data_bytes};
      req->output_view[sl][t] = v++;
      m->view_names.push_back("output " + op.outputs[t].name);
      m->view_bytes.push_back(p.data_bytes);
    }
  }
  req->view_count = v;
  req->input_count = static_cast<uint32_t>(op.inputs.size());
  req->output_count = static_cast<uint32_t>(op.outputs.size());
  req->dim_count = static_cast<uint32_t>(dims.size());
  req->in_slots = static_cast<uint32_t>(layout.in_slots);
  req->out_slots = static_cast<uint32_t>(layout.out_slots);
  for (size_t d = 0; d < dims.size(); ++d) req->dims[d] = dims[d];
  for (auto [in, out] : op.inout_pairs()) {
    req->copy_input[req->copy_count] = static_cast<uint32_t>(in);
    req->copy_output[req->copy_count] = static_cast<uint32_t>(out);
    ++req->copy_count;
  }
  return send_and_wait(req.get(), sizeof *req, req->h.seq, req->h.token, std::chrono::seconds(30), nullptr, false);
}

Result<bool> Session::call(int in_slot, int out_slot, std::chrono::milliseconds timeout, double* seconds) {
  proto::CallRequest c;
  c.h.op = static_cast<uint32_t>(proto::Op::call);
  c.h.seq = ++m->seq;
  c.h.token = random_u64();
  c.in_slot = static_cast<uint32_t>(in_slot);
  c.out_slot = static_cast<uint32_t>(out_slot);
  return send_and_wait(&c, sizeof c, c.h.seq, c.h.token, timeout, seconds, false);
}

Result<bool> Session::batch(uint64_t calls, uint32_t phase, const std::vector<std::pair<int, int>>& combos,
                            std::chrono::milliseconds timeout, double* seconds) {
  proto::BatchRequest b;
  b.h.op = static_cast<uint32_t>(proto::Op::batch);
  b.h.seq = ++m->seq;
  b.h.token = random_u64();
  b.calls = calls;
  b.phase = phase;
  if (combos.empty() || combos.size() > proto::k_max_combos) return fail(ErrorKind::internal, "bad combination list");
  b.combo_count = static_cast<uint32_t>(combos.size());
  for (size_t i = 0; i < combos.size(); ++i) {
    b.combo_in[i] = static_cast<uint8_t>(combos[i].first);
    b.combo_out[i] = static_cast<uint8_t>(combos[i].second);
  }
  return send_and_wait(&b, sizeof b, b.h.seq, b.h.token, timeout, seconds, false);
}

Result<bool> Session::ping(double* seconds) {
  proto::Header h;
  h.op = static_cast<uint32_t>(proto::Op::ping);
  h.seq = ++m->seq;
  h.token = random_u64();
  return send_and_wait(&h, sizeof h, h.seq, h.token, std::chrono::seconds(10), seconds, false);
}

void Session::close() {
  if (!m->proc || m->proc->reaped()) return;
  if (!m_failure) {
    proto::Header h;
    h.op = static_cast<uint32_t>(proto::Op::exit);
    h.seq = ++m->seq;
    h.token = random_u64();
    (void)send_and_wait(&h, sizeof h, h.seq, h.token, std::chrono::seconds(5), nullptr, false);
  }
  m->proc->kill_group(SIGKILL);
  m->proc->wait();
}

}  // namespace kope::eval
