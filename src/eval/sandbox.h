// eval/sandbox.h — the bubblewrap sandbox every untrusted step runs in.
//
// A sandbox is a fresh set of namespaces (user, pid, network, ipc, uts, cgroup) with a
// read-only view of /usr (and the /lib, /bin symlinks), no /home, /root, /work, data or cache
// directories, a size-limited private /tmp, at most the host directories the caller binds, a
// cleared environment and no capabilities. When kope runs as root the sandbox also runs under a
// fresh unprivileged uid (setpriv), so RLIMIT_NPROC applies and a fork bomb stays inside its own
// count. The resource limits themselves are set on the spawned process (util::ResourceLimits).
// Thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kope/error.h"

namespace kope::eval {

namespace fs = std::filesystem;

struct SandboxSpec {
  std::vector<std::string> command;  // argv inside the sandbox (argv[0] an absolute path)
  std::vector<std::pair<fs::path, std::string>> ro_binds;  // host path -> path inside
  std::vector<std::pair<fs::path, std::string>> rw_binds;
  std::string chdir = "/";
  std::vector<std::pair<std::string, std::string>> env;  // the only variables inside
  uint64_t tmp_bytes = 64ull << 20;  // size of the private /tmp (tmpfs)
  bool proc = false;                 // mount a /proc of the sandbox's own pid namespace
  bool sys = false;                  // bind /sys read-only (trusted library baselines only)
  std::optional<uid_t> uid;          // run as this host uid (set by prepare_sandbox_uid)
  std::vector<std::string> devices;  // host device nodes made available (--dev-bind), e.g. GPUs
};

// The argv that runs `spec` under bubblewrap. Fails with unavailable when bwrap (or, for a uid
// change, setpriv) is missing.
Result<std::vector<std::string>> sandbox_argv(const SandboxSpec& spec);

// When kope runs as root: a fresh uid for one sandbox, distinct from every other sandbox this
// process starts; `dirs` are handed to it (chown) so the sandbox can use them. nullopt when not
// root or when setpriv is missing (the sandbox then runs as our own uid).
std::optional<uid_t> prepare_sandbox_uid(const std::vector<fs::path>& dirs);

// True when this process can start sandboxes: bwrap runs and can create user namespaces. The
// probe runs once per process; `why` receives bwrap's complaint otherwise.
bool sandbox_available(std::string* why = nullptr);

// Where sandbox scratch directories are created: $TMPDIR when a sandbox running under another
// uid can reach it, else /tmp.
fs::path sandbox_scratch_parent();

}  // namespace kope::eval
