// util/subprocess.h — spawning child processes safely (after ninja's subprocess-posix).
//
// An argv array, never a shell. Each child gets its own session and process group (killed as a
// group), stdin from /dev/null, separate stdout/stderr pipes read with byte caps, rlimits set in
// the child before exec, and PR_SET_PDEATHSIG so it dies with its parent. run() adds a wall-clock
// timeout. All functions are thread-safe; a Process object is used by one thread at a time.
#pragma once

#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "kope/error.h"

namespace kope::util {

struct ResourceLimits {
  std::optional<uint64_t> cpu_seconds;          // RLIMIT_CPU (SIGXCPU, then SIGKILL)
  std::optional<uint64_t> address_space_bytes;  // RLIMIT_AS
  std::optional<uint64_t> file_size_bytes;      // RLIMIT_FSIZE (SIGXFSZ)
  std::optional<uint64_t> open_files;           // RLIMIT_NOFILE
  std::optional<uint64_t> processes;            // RLIMIT_NPROC (not enforced for root)
  std::optional<uint64_t> stack_bytes;          // RLIMIT_STACK
  bool no_core_dumps = true;                    // RLIMIT_CORE = 0
};

struct SpawnOptions {
  std::vector<std::string> argv;  // argv[0] is resolved through $PATH when it has no '/'
  std::optional<std::vector<std::string>> env;  // "K=V" entries; nullopt inherits ours
  std::filesystem::path cwd;                    // empty: inherit
  ResourceLimits limits;
  std::vector<int> pass_fds;  // parent fds that stay open in the child under the same number
  bool capture_stdout = true;  // false: /dev/null
  bool capture_stderr = true;
};

// How a child ended.
struct ExitStatus {
  bool exited = false;  // true: normal exit with `code`; false: killed by `signal`
  int code = -1;
  int signal = 0;
  double user_seconds = 0;
  double system_seconds = 0;
  uint64_t max_rss_bytes = 0;

  bool success() const { return exited && code == 0; }
  // "exited with code 3" / "killed by signal 11 (SIGSEGV: Segmentation fault)"
  std::string describe() const;
};

// "SIGSEGV" for 11, "SIG42" for unknown numbers.
std::string signal_name(int sig);

class Process {
 public:
  // Starts the child. Fails with io when the program cannot be found or executed (the exec
  // error is reported from the child through a close-on-exec pipe).
  static Result<Process> spawn(const SpawnOptions& options);

  Process(Process&& other) noexcept;
  Process& operator=(Process&& other) noexcept;
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  // Kills the whole group with SIGKILL and reaps the child if it was not waited for.
  ~Process();

  pid_t pid() const { return m_pid; }
  int stdout_fd() const { return m_out; }  // -1 when not captured; owned by this object
  int stderr_fd() const { return m_err; }
  int pidfd() const { return m_pidfd; }    // readable (POLLIN) once the child has exited

  // Sends `sig` once to the child's whole process group (the child among them).
  void kill_group(int sig = SIGKILL) const;
  // Blocks until the child exits (retrying on EINTR) and returns how it ended.
  ExitStatus wait();
  // Non-blocking: the status if the child has exited.
  std::optional<ExitStatus> try_wait();
  bool reaped() const { return m_reaped; }

 private:
  Process() = default;
  void close_fds();
  pid_t m_pid = -1;
  int m_out = -1;
  int m_err = -1;
  int m_pidfd = -1;
  bool m_reaped = true;
  ExitStatus m_status;
};

struct RunOptions {
  SpawnOptions spawn;
  std::chrono::milliseconds timeout{0};  // 0: no wall-clock limit
  size_t stdout_cap = 1 << 20;           // bytes kept; the rest is counted and dropped
  size_t stderr_cap = 1 << 20;
  bool kill_on_output_cap = false;       // kill the group once a stream exceeds its cap
};

struct RunResult {
  ExitStatus status;
  bool timed_out = false;       // killed because the wall-clock limit passed
  bool output_capped = false;   // a stream exceeded its cap
  std::string out;              // the first stdout_cap bytes
  std::string err;
  uint64_t out_bytes = 0;       // total bytes the child wrote, kept or not
  uint64_t err_bytes = 0;
  double wall_seconds = 0;
};

// Runs a child to completion under the options. A child that times out or floods its output is
// killed as a group; that is a result, not an error. Errors only when it cannot be started.
Result<RunResult> run(const RunOptions& options);

}  // namespace kope::util
