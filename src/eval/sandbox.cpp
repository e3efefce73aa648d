#include "eval/sandbox.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

#include "util/fs.h"
#include "util/strings.h"
#include "util/subprocess.h"

namespace kope::eval {

namespace {

// Host paths that are symlinks into /usr on merged-/usr systems; bound as real directories
// elsewhere.
const char* const k_system_dirs[] = {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"};

// A base far above any real account; each sandbox of this process takes the next uid.
constexpr uid_t k_uid_base = 1'500'000'000;
std::atomic<uint32_t> g_uid_counter{0};

}  // namespace

Result<std::vector<std::string>> sandbox_argv(const SandboxSpec& spec) {
  static const auto bwrap = util::find_executable("bwrap");
  if (!bwrap) return fail(ErrorKind::unavailable, "bubblewrap (bwrap) is not installed; the evaluator needs it to sandbox kernels (scripts/setup.sh installs it)");
  std::vector<std::string> a;
  if (spec.uid) {
    static const auto setpriv = util::find_executable("setpriv");
    if (!setpriv) return fail(ErrorKind::unavailable, "setpriv (util-linux) is missing");
    a = {setpriv->string(), fmt::format("--reuid={}", *spec.uid), fmt::format("--regid={}", *spec.uid),
         "--clear-groups", "--"};
  }
  a.push_back(bwrap->string());
  for (const char* s : {"--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
                        "--cap-drop", "ALL", "--hostname", "kope-sandbox", "--clearenv"}) {
    a.emplace_back(s);
  }
  a.insert(a.end(), {"--ro-bind", "/usr", "/usr"});
  for (const char* d : k_system_dirs) {
    std::error_code ec;
    if (fs::is_symlink(d, ec)) {
      a.insert(a.end(), {"--symlink", fs::read_symlink(d, ec).string(), d});
    } else if (fs::is_directory(d, ec)) {
      a.insert(a.end(), {"--ro-bind", d, d});
    }
  }
  // /etc/alternatives holds only symlinks; Debian reaches libopenblas and others through it.
  for (const char* f : {"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/alternatives"}) {
    std::error_code ec;
    if (fs::exists(f, ec)) a.insert(a.end(), {"--ro-bind", f, f});
  }
  a.insert(a.end(), {"--dev", "/dev", "--size", std::to_string(spec.tmp_bytes), "--tmpfs", "/tmp"});
  for (const auto& d : spec.devices) a.insert(a.end(), {"--dev-bind", d, d});
  if (spec.proc) a.insert(a.end(), {"--proc", "/proc"});
  if (spec.sys) a.insert(a.end(), {"--ro-bind", "/sys", "/sys"});
  for (const auto& [host, inside] : spec.ro_binds) a.insert(a.end(), {"--ro-bind", host.string(), inside});
  for (const auto& [host, inside] : spec.rw_binds) a.insert(a.end(), {"--bind", host.string(), inside});
  for (const auto& [k, v] : spec.env) a.insert(a.end(), {"--setenv", k, v});
  a.insert(a.end(), {"--chdir", spec.chdir, "--"});
  a.insert(a.end(), spec.command.begin(), spec.command.end());
  return a;
}

std::optional<uid_t> prepare_sandbox_uid(const std::vector<fs::path>& dirs) {
  if (::geteuid() != 0) return std::nullopt;
  static const bool have_setpriv = util::find_executable("setpriv").has_value();
  if (!have_setpriv || util::get_env("KOPE_SANDBOX_KEEP_UID")) return std::nullopt;
  uint32_t n = g_uid_counter.fetch_add(1);
  auto uid = static_cast<uid_t>(k_uid_base + ((static_cast<uint32_t>(::getpid()) & 0xffff) << 12) + (n & 0xfff));
  for (const auto& d : dirs) {
    if (::chown(d.c_str(), uid, uid) != 0) return std::nullopt;
  }
  return uid;
}

fs::path sandbox_scratch_parent() {
  auto tmp = util::get_env("TMPDIR");
  if (!tmp) return "/tmp";
  std::error_code ec;
  fs::path p = fs::absolute(*tmp, ec);
  if (ec || util::make_dirs(p).has_value() == false) return "/tmp";
  struct stat st {};
  for (fs::path d = p; !d.empty(); d = d.parent_path()) {
    if (::stat(d.c_str(), &st) != 0 || (st.st_mode & S_IXOTH) == 0) return "/tmp";
    if (d == d.root_path()) break;
  }
  return p;
}

bool sandbox_available(std::string* why) {
  static std::once_flag once;
  static bool ok = false;
  static std::string reason;
  std::call_once(once, [] {
    SandboxSpec spec;
    spec.command = {"/usr/bin/true"};
    spec.uid = prepare_sandbox_uid({});
    auto argv = sandbox_argv(spec);
    if (!argv) {
      reason = argv.error().message;
      return;
    }
    util::RunOptions ro;
    ro.spawn.argv = *argv;
    ro.timeout = std::chrono::seconds(20);
    auto r = util::run(ro);
    if (!r) {
      reason = r.error().message;
    } else if (!r->status.success()) {
      reason = fmt::format("bwrap {}: {}", r->status.describe(), std::string(util::trim(r->err)));
    } else {
      ok = true;
    }
  });
  if (!ok && why != nullptr) *why = reason;
  return ok;
}

}  // namespace kope::eval
