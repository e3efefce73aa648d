// eval/session.h — one kope-runner inside its sandbox, driven from the parent.
//
// A Session starts the runner for one kernel shared object under bubblewrap with resource
// limits, an Arena of shared buffers and a SOCK_SEQPACKET socket, and then issues commands: map
// a case's tensors, call the kernel, run a batch of calls, ping. Every command has a deadline;
// the parent drains the runner's stdout/stderr (capped: a flood kills it) while it waits. When
// the runner dies, misbehaves on the socket or passes a deadline, the session records a
// RunnerFailure (a verdict and a message naming the signal, the system call, the guard page or
// the limit) and every later command fails at once. Destroying a Session kills the whole sandbox.
// A Session is used by one thread at a time.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "eval/arena.h"
#include "eval/library.h"
#include "eval/runner_protocol.h"
#include "kope/error.h"
#include "kope/eval.h"
#include "kope/spec.h"

namespace kope::eval {

namespace fs = std::filesystem;

struct RunnerOptions {
  fs::path runner;                     // the kope-runner executable
  proto::Mode mode = proto::Mode::candidate;
  int threads = 1;                     // OpenMP threads pre-created (and the thread limit)
  uint64_t memory_bytes = 4ull << 30;  // RLIMIT_AS of the whole sandbox, buffers included
  uint64_t cpu_seconds = 600;          // RLIMIT_CPU (all threads together)
  uint64_t processes = 64;             // RLIMIT_NPROC (threads count; enforced when we drop uid)
  size_t output_cap = 1 << 20;         // stdout and stderr each: more is a flood and kills it
  std::chrono::milliseconds start_timeout{30000};
  // Host-shim mode (OpenCL): the kernel object is a trusted host program that the runner loads
  // and prepares (kope_host_prepare) before any seccomp filter, and that keeps the loading
  // filter for its calls (see runner/runner.cpp). Companion files are copied from beside the
  // kernel object into the sandbox's /kope directory under the same names.
  bool host_shim = false;
  std::vector<std::string> companions;
  std::vector<std::pair<std::string, std::string>> env;  // extra variables inside the sandbox
  // Trusted runners: the vendor libraries' variables (library_env_vars(); nullopt: unset, the
  // library detects). Unset: library_env_default(), the user's environment.
  std::optional<LibraryEnv> library_env;
  bool proc_and_sys = false;  // mount /proc and bind /sys read-only (runtimes that probe the CPU)
  std::vector<std::string> devices;  // device nodes bound into the sandbox (/dev/nvidia0, ...)
  bool device_ioctl = false;         // the filter also allows ioctl on open descriptors (GPU drivers)
};

// How a runner failed, as the candidate's verdict would read.
struct RunnerFailure {
  Verdict verdict = Verdict::runtime_error;
  std::string message;  // "wrote past the end of output y (byte 4096 of 4096)"
};

// Where the runner executable is: $KOPE_RUNNER, else beside this executable, else the path it
// was built at. Fails with unavailable when none exists.
Result<fs::path> find_runner();

class Session {
 public:
  // Starts a runner for `kernel_so` with buffers of these capacities, or on the buffers of
  // another session's arena (`buffers_of`, at least that large; Arena::share_buffers). Fails
  // with an Error only when kope cannot start it (no sandbox, no runner, out of file
  // descriptors); a kernel that cannot be loaded is a failure() of the returned session.
  static Result<std::unique_ptr<Session>> start(const fs::path& kernel_so, const RunnerOptions& options,
                                                uint64_t in_capacity, uint64_t out_capacity, const Arena* buffers_of = nullptr);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  Arena& arena() { return m_arena; }
  int threads() const { return m_threads; }

  // Each command returns true when it completed, false when the runner failed (see failure()).
  // An Error means kope itself failed (a broken socket on our side).
  Result<bool> map(const spec::OpSpec& op, const CaseLayout& layout, const std::vector<int64_t>& dims);
  Result<bool> call(int in_slot, int out_slot, std::chrono::milliseconds timeout, double* seconds = nullptr);
  // Calls j = 0..calls-1 use combination (j + phase) % combos.size() of (input slot, output slot).
  Result<bool> batch(uint64_t calls, uint32_t phase, const std::vector<std::pair<int, int>>& combos,
                     std::chrono::milliseconds timeout, double* seconds);
  Result<bool> ping(double* seconds);
  // Asks the runner to exit and reaps it; kills it when it does not.
  void close();

  const std::optional<RunnerFailure>& failure() const { return m_failure; }
  // Trusted runners: what the loaded libraries report about themselves ("openblas core=Haswell
  // threads=2 config=...; onednn isa=avx2"), empty when the kernel links none.
  const std::string& library_report() const { return m_ready_text; }

  // CPU accounting of the runner's threads, from the kernel's scheduler statistics
  // (/proc/<pid>/task/*/schedstat): time spent running and time spent runnable but waiting for
  // a CPU (other load on the machine). Zeros when unavailable.
  struct ThreadTimes {
    pid_t tid = 0;
    uint64_t run_ns = 0;
    uint64_t wait_ns = 0;
  };
  struct CpuTimes {
    uint64_t run_ns = 0;
    uint64_t wait_ns = 0;
    int busy_threads = 0;  // threads that ran at all
    std::vector<ThreadTimes> threads;  // per thread, the same figures
  };
  CpuTimes cpu_times() const;
  // The CPU the runner's calling thread (the one that makes the kernel's calls; OpenMP's thread
  // 0) last ran on, from /proc/<pid>/task/<pid>/stat; -1 when unknown.
  int calling_cpu() const;
  // Keeps the calling thread on `cpu` for the coming commands, and the runner's other threads
  // (the OpenMP pool, made before the kernel was loaded; a candidate cannot make more) on every
  // other CPU the calling thread could use at the start; or (nullopt) lets every thread run on
  // all of those again. False, and the threads as they were, when the kernel refuses it (a CPU
  // the runner may not use).
  bool keep_calling_thread_on(std::optional<int> cpu);
  // The runner's pid as this process sees it (learnt from the socket's credentials), or 0.
  pid_t runner_pid() const { return m_runner_pid; }
  // The last bytes the kernel wrote to stderr and stdout (for diagnostics only).
  std::string output_tail() const;

 private:
  Session();
  struct Impl;
  Result<bool> send_and_wait(const void* msg, size_t size, uint32_t seq, uint64_t token,
                             std::chrono::milliseconds timeout, double* seconds, bool boot);
  void fail_with(Verdict v, std::string message);
  void decode_death();

  std::unique_ptr<Impl> m;
  Arena m_arena;
  int m_threads = 0;
  pid_t m_runner_pid = 0;
  std::optional<RunnerFailure> m_failure;
  std::string m_ready_text;
};

// The name of a system call number on this architecture ("openat"), or "syscall N".
std::string syscall_name(int nr);

}  // namespace kope::eval
