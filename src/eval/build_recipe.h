// eval/build_recipe.h — the recipe every backend's candidate build follows.
//
// A candidate is built once per content: the backend computes a cache key (its recipe version,
// toolchain, flags, the source and everything generated around it) and hands run_candidate_build
// the entry's path with three steps of its own: the fresh build (a script in the compile
// sandbox, in a private scratch directory), what the entry keeps of the scratch directory, and
// the conclusion (the backend's rules applied to a built entry). A cached entry skips the build
// but is concluded again, so a cache hit can never skip a rule; a fresh build is stored
// atomically before it is concluded. Failures that depend on the machine (a timeout, a killed
// compiler) are outcomes that are not stored. Everything here is thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/inspect.h"
#include "eval/sandbox.h"
#include "kope/error.h"
#include "util/fs.h"
#include "util/subprocess.h"

namespace kope::eval {

namespace fs = std::filesystem;

// The limits a candidate's build runs under (its compilers' rlimits and the sandbox's).
struct CompileLimits {
  std::chrono::seconds wall{120};
  uint64_t cpu_seconds = 120;
  uint64_t memory_bytes = 4ull << 30;    // RLIMIT_AS of the compiler
  uint64_t object_bytes = 128ull << 20;  // RLIMIT_FSIZE: the largest file it may write
  uint64_t tmp_bytes = 512ull << 20;     // the sandbox's /tmp
  uint64_t processes = 32;               // RLIMIT_NPROC
  size_t output_cap = 256 << 10;         // compiler output beyond this kills it
  size_t source_bytes = 1 << 20;         // larger sources are refused before compiling
};

// The limits of a build that may take `timeout` (wall clock and CPU time alike) and
// `memory_bytes` of address space; the rest as CompileLimits' defaults.
CompileLimits compile_limits(std::chrono::seconds timeout, uint64_t memory_bytes);

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

// What a fresh build produced: the outcome record to store in the entry (outcome.json), or,
// when `stored` is empty, an outcome that must not be cached (a limit of this machine).
struct FreshBuild {
  std::optional<nlohmann::json> stored;
  BuildOutcome uncached;
};

// One candidate build: the entry and the backend's three steps.
struct CandidateBuild {
  fs::path entry;  // cache_dir()/eval/<kind>/<key[0:2]>/<key[0:40]>
  // Builds in `scratch` (sandboxed). Errors only when kope cannot run the build.
  std::function<Result<FreshBuild>(const fs::path& scratch)> build;
  // Copies what the entry keeps from `scratch` into `staged`; empty: keep_object_build.
  std::function<Status(const fs::path& scratch, const fs::path& staged, const nlohmann::json& stored)> keep;
  // Applies the backend's rules to an entry (fresh or cached) and its stored record.
  std::function<Result<BuildOutcome>(const fs::path& dir, const nlohmann::json& stored)> conclude;
};

// The recipe: the cached entry concluded again (a damaged entry is rebuilt), else a fresh build,
// stored, then concluded. Sets the outcome's `cached` and `seconds`.
Result<BuildOutcome> run_candidate_build(const CandidateBuild& build);

// The default `keep`: kernel.o, kernel.so and flagged.txt, those that exist.
Status keep_object_build(const fs::path& scratch, const fs::path& staged);

// The sandbox of a build script: `scratch` at /build (the working directory), a private /tmp of
// limits.tmp_bytes, a minimal C-locale environment, the script run by /bin/sh -c (it travels on
// the command line, not as a file in the writable directory the compiler shares with it).
SandboxSpec build_sandbox(const fs::path& scratch, const CompileLimits& limits, std::string script);

// Runs a build sandbox under `limits`; output beyond limits.output_cap kills it.
Result<util::RunResult> run_build_sandbox(const SandboxSpec& spec, const CompileLimits& limits);

// objdump, which disassembles candidates for the instruction filter; unavailable when missing.
Result<fs::path> objdump_path();

// A fresh marker for a build script's step lines ("@@kope-<random> "): the candidate cannot
// print it in advance.
std::string step_marker();

// Splits the combined stderr of a build script at the lines `marker`<step>; what comes before
// the first marker is step "setup".
std::map<std::string, std::string> split_steps(std::string_view err, const std::string& marker);

// The first line of `text` for which `matches` holds, trimmed and cut to 300 bytes; "" if none.
std::string first_line_where(std::string_view text, const std::function<bool(std::string_view)>& matches);

// The stored record of a candidate that does not compile: "does not compile[: first_error]".
nlohmann::json compile_error_record(std::string_view first_error, std::string diagnostics);

// Outcomes.
BuildOutcome compile_error(std::string message, std::string diagnostics = "");
// The outcome of a stored record whose status is not "built".
BuildOutcome stored_compile_error(const nlohmann::json& stored);
BuildOutcome built(fs::path shared_object, std::string diagnostics = "");

// The rules after an object-file build (CPU, CUDA): `inspection` of kernel.o rejects when
// `enforce`, then kope_kernel must be defined, then the link must have succeeded.
struct ObjectRules {
  bool enforce = true;
  std::string no_entry;              // the message when kope_kernel is not defined
  std::string no_entry_diagnostics;
  std::string not_linked;            // the message when the link failed
};
BuildOutcome conclude_object_build(const fs::path& dir, const nlohmann::json& stored, InspectionReport inspection,
                                   const ObjectRules& rules);

// kernel.o and flagged.txt of an entry, for the inspection.
struct BuiltObject {
  elf::File object;
  std::string flagged;  // the disassembly filter's lines
};
Result<BuiltObject> read_built_object(const fs::path& dir);

// Compiler diagnostics for the model: scratch paths and temporary file names scrubbed, error
// blocks before warnings and notes, at most `max_lines` lines / `max_bytes` bytes.
std::string scrub_diagnostics(std::string_view text, const std::vector<std::string>& scratch_paths,
                              size_t max_lines = 60, size_t max_bytes = 6000);

}  // namespace kope::eval
