// The CPU C++ backend: g++ in the sandbox, ELF inspection, kope-runner with seccomp.
#include <algorithm>
#include <mutex>

#include "eval/backend.h"
#include "eval/cpu/compile.h"
#include "eval/cpu/cpu.h"
#include "eval/native.h"
#include "eval/sandbox.h"

namespace kope::eval {

namespace {

class CpuBackend final : public Backend {
 public:
  CpuBackend(const HardwareProfile& hw, const EvaluatorOptions& o, Toolchain tc, fs::path runner)
      : m_hw(hw), m_options(o.cpu), m_compiler(tc, compile_limits(o.cpu.compile_timeout, o.cpu.compile_memory_bytes), o.inspect), m_tc(std::move(tc)), m_runner(std::move(runner)) {
    m_threads = o.cpu.threads > 0 ? o.cpu.threads : std::max(1, hw.cores);
  }

  std::string name() const override { return "cpu"; }
  Target target() const override { return m_hw.target; }
  std::string toolchain_id() const override { return m_tc.id(); }
  int threads() const override { return m_threads; }
  bool supports_inouts() const override { return true; }
  bool supports_case_attrs() const override { return true; }

  Result<BuildOutcome> build_candidate(const spec::OpSpec& op, std::string_view source,
                                       const std::vector<std::string>& extra_flags) const override {
    return m_compiler.build(op, source, extra_flags);
  }

  Result<fs::path> build_trusted(const spec::OpSpec& op, const fs::path& source, bool library) const override {
    return eval::build_trusted(op, source, m_tc, library ? library_link_flags() : std::vector<std::string>{});
  }

  RunnerOptions runner_options(proto::Mode mode, uint64_t buffer_bytes) const override {
    RunnerOptions r;
    r.runner = m_runner;
    r.mode = mode;
    r.threads = m_threads;
    uint64_t allowance = m_options.memory_bytes;
    if (allowance == 0) {
      uint64_t eighth = m_hw.memory_bytes / 8;
      allowance = std::clamp<uint64_t>(eighth, 1ull << 30, 8ull << 30);
    }
    // Thread stacks and per-thread malloc arenas are address space too.
    allowance += static_cast<uint64_t>(m_threads) * (80ull << 20);
    if (mode == proto::Mode::trusted) allowance += 4ull << 30;  // vendor libraries reserve a lot
    r.memory_bytes = buffer_bytes + allowance;
    r.processes = static_cast<uint64_t>(m_threads) + 32;
    r.cpu_seconds = static_cast<uint64_t>(m_threads) * 3600;
    return r;
  }

 private:
  HardwareProfile m_hw;
  CpuBackendOptions m_options;
  CpuCompiler m_compiler;
  Toolchain m_tc;
  fs::path m_runner;
  int m_threads = 1;
};

// Scratch directories of a kope that was killed are never removed by it; sweep those older
// than a day (no evaluation lasts that long), once per process.
void sweep_stale_scratch() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::error_code ec;
    auto now = fs::file_time_type::clock::now();
    for (const auto& e : fs::directory_iterator(sandbox_scratch_parent(), ec)) {
      std::string name = e.path().filename().string();
      if (!(name.starts_with("kope-run-") || name.starts_with("kope-cc-")) || !e.is_directory(ec)) continue;
      auto age = now - e.last_write_time(ec);
      if (!ec && age > std::chrono::hours(24)) fs::remove_all(e.path(), ec);
    }
  });
}

}  // namespace

Result<std::unique_ptr<Backend>> make_cpu_backend(const HardwareProfile& hw, const EvaluatorOptions& options) {
  std::string why;
  if (!sandbox_available(&why)) {
    return fail(ErrorKind::unavailable, "the kernel sandbox is unavailable: {} (bubblewrap with user namespaces is required)", why);
  }
  KOPE_ASSIGN(fs::path runner, find_runner());
  sweep_stale_scratch();
  KOPE_ASSIGN(Toolchain tc, cpu_toolchain());
  return std::unique_ptr<Backend>(new CpuBackend(hw, options, std::move(tc), std::move(runner)));
}

}  // namespace kope::eval

namespace kope::eval {

BackendInfo cpu_backend_info(const HardwareProfile& hw) {
  BackendInfo b;
  b.built = true;
  auto tc = cpu_toolchain();
  if (tc) b.toolchain = tc->id();
  std::string why;
  bool sandbox = sandbox_available(&why);
  auto runner = find_runner();
  b.can_compile = tc.has_value() && sandbox;
  b.usable = b.can_compile && runner.has_value();
  if (!tc) {
    b.detail = "no C++ compiler: " + tc.error().message;
  } else if (!sandbox) {
    b.detail = "the kernel sandbox is unavailable: " + why + " (bubblewrap with user namespaces is required)";
  } else if (!runner) {
    b.detail = runner.error().message;
  } else {
    b.detail = fmt::format("{} cores, sandboxed g++ build, kope-runner with seccomp", hw.cores);
  }
  return b;
}

}  // namespace kope::eval
