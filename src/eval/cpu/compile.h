// eval/compile.h — building an untrusted CPU candidate: sandboxed compile, inspection, link.
//
// One sandbox run compiles the candidate to an object, filters its disassembly for forbidden
// instructions and links it with the op's entry shim into a shared object; the parent then
// inspects the object (eval/inspect.h). Results are kept in a content-addressed cache under
// cache_dir()/eval/compile, keyed by the source, the shim, the compiler version and every flag;
// a cache hit skips the compiler but the inspection runs again on the cached object, so a hit
// can never skip a rule. Failures that depend on the machine (a timeout, a killed compiler) are
// not cached. Thread-safe.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "eval/inspect.h"
#include "eval/native.h"
#include "kope/error.h"
#include "kope/spec.h"
#include "util/fs.h"

namespace kope::eval {

namespace fs = std::filesystem;

struct CompileLimits {
  std::chrono::seconds wall{120};
  uint64_t cpu_seconds = 120;
  uint64_t memory_bytes = 4ull << 30;    // RLIMIT_AS of the compiler
  uint64_t object_bytes = 128ull << 20;  // RLIMIT_FSIZE: the largest file it may write
  uint64_t tmp_bytes = 512ull << 20;     // the sandbox's /tmp
  size_t output_cap = 256 << 10;         // compiler output beyond this kills it
  size_t source_bytes = 1 << 20;         // larger sources are refused before compiling
};

struct BuildOutcome {
  enum class Status { ok, compile_error, rejected };
  Status status = Status::compile_error;
  std::string message;      // one line
  std::string diagnostics;  // trimmed compiler errors (first errors first) or inspection findings
  fs::path shared_object;   // the linked kernel (in the cache) when ok
  InspectionReport inspection;
  bool cached = false;
  double seconds = 0;
};

class CpuCompiler {
 public:
  // `inspect` = false skips the inspection verdict (tests use it to reach the runtime sandbox
  // with kernels the inspection would reject); the compile itself is unchanged.
  CpuCompiler(Toolchain toolchain, CompileLimits limits, bool inspect);

  // Compiles, inspects and links one candidate for `op`. Errors only when kope cannot run the
  // build (no sandbox, no compiler); a bad candidate is an outcome.
  Result<BuildOutcome> build(const spec::OpSpec& op, std::string_view source,
                             const std::vector<std::string>& extra_flags) const;

  const Toolchain& toolchain() const { return m_tc; }
  // The flags candidates are compiled with (toolchain flags, language standard, PIC, extras).
  std::vector<std::string> compile_flags(const std::vector<std::string>& extra_flags) const;

 private:
  Result<fs::path> shim_object(const spec::OpSpec& op) const;
  Toolchain m_tc;
  CompileLimits m_limits;
  bool m_inspect;
  fs::path m_compiler;  // resolved absolute path
};

// Why a user-supplied extra flag may not be passed to the compiler, or "" when it may.
std::string extra_flag_problem(std::string_view flag);

// Compiler diagnostics for the model: scratch paths and temporary file names scrubbed, error
// blocks before warnings and notes, at most `max_lines` lines / `max_bytes` bytes.
std::string scrub_diagnostics(std::string_view text, const std::vector<std::string>& scratch_paths,
                              size_t max_lines = 60, size_t max_bytes = 6000);

// Publishes a compile-cache entry built in `staged` (a directory beside `entry`): writes
// `outcome_json` as its outcome.json, then renames it into place atomically. Losing the race to
// another process that stored the same entry first is not an error.
Status publish_cache_entry(util::TempDir& staged, const fs::path& entry, const std::string& outcome_json);

// Stores a native build as a compile-cache entry: kernel.o, kernel.so and flagged.txt from
// `scratch` (those that exist) and the outcome, published with publish_cache_entry.
Status store_native_build(const fs::path& scratch, const fs::path& entry, const std::string& outcome_json);

}  // namespace kope::eval
